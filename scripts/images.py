"""Build the runner images a profile needs: one per framework family × variant, tagged rosetta/FAMILY:VARIANT.

    python -m scripts.images --profile full                      # every image of the profile
    python -m scripts.images --framework pytorch --variant cpu   # one image

Each build first fills a host wheelhouse (.wheelhouse/FAMILY-VARIANT) with the variant's pinned requirements for the
image's Python and glibc, then installs from it with no network (scripts/wheelhouse.py says why).
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from scripts import venvs, wheelhouse
from scripts.compose import ExecutorError, check_engine, docker_cli
from scripts.matrix import ROOT, MatrixError, expand, load

# The python3 each local base image ships; a variant asking for another Python brings pyenv's (docker/pyenv.Dockerfile).
BASE_PYTHON = {"rosetta/debian:bookworm": "3.11"}


def needs_pyenv(variant):
    return variant.python != BASE_PYTHON.get(variant.base_image, variant.python)


def dockerfile(family, variant):
    """docker/FAMILY/Dockerfile where a family needs its own; docker/pyenv.Dockerfile for a Python the base lacks;
    else the shared pip-based docker/Dockerfile."""
    own = ROOT / "docker" / family / "Dockerfile"
    if own.exists():
        return own
    return ROOT / "docker" / ("pyenv.Dockerfile" if needs_pyenv(variant) else "Dockerfile")


def stage_interpreter(version):
    """Copy the host's pyenv interpreter for `version` into the build context (.wheelhouse/python-X.Y.Z, once);
    returns (staged folder, its prefix on the host, which the image must reproduce)."""
    try:
        prefix = Path(venvs.find_interpreter(version)).resolve().parents[1]
    except venvs.EnvError as e:
        raise ExecutorError(f"the image needs Python {version}: {e}") from None
    staged = ROOT / ".wheelhouse" / f"python-{prefix.name}"
    if not staged.exists():
        tmp = staged.with_name(staged.name + ".tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        shutil.copytree(prefix, tmp, symlinks=True)
        tmp.rename(staged)
    return staged, prefix


def pyenv_build_args(family, variant, house):
    """The extra build arguments of docker/pyenv.Dockerfile; also puts its bootstrap pip into the wheelhouse."""
    staged, prefix = stage_interpreter(variant.python)
    bootstrap = venvs.BOOTSTRAP.get(variant.python, ["pip", "setuptools", "wheel"])
    with tempfile.NamedTemporaryFile("w", suffix=".txt") as pins:
        pins.write("\n".join(bootstrap) + "\n")
        pins.flush()
        if wheelhouse.main(["--requirements", pins.name, "--dest", str(house), "--python-version", variant.python,
                            "--glibc", variant.glibc]):
            raise ExecutorError(f"could not fill {house} with {' '.join(bootstrap)} (pip's message is above)")
    return ["--build-arg", f"INTERPRETER={staged.relative_to(ROOT)}", "--build-arg", f"PYTHON_HOME={prefix}",
            "--build-arg", f"FAMILY={family}", "--build-arg", f"BOOTSTRAP={' '.join(bootstrap)}"]


def wanted(matrix, profile, framework, variant):
    """(family, Variant) pairs to build, without repeats (the three Keras ids share one image)."""
    if framework:
        if framework not in matrix.frameworks:
            raise MatrixError(f"unknown framework {framework!r}; declared: {', '.join(matrix.frameworks)}")
        fw = matrix.frameworks[framework]
        names = [variant] if variant else list(fw.variants)
        unknown = [n for n in names if n not in fw.variants]
        if unknown:
            raise MatrixError(f"frameworks.{framework} has no variant {unknown[0]!r}; declared: "
                              f"{', '.join(fw.variants)}")
        pairs = [(fw.family, fw.variants[n]) for n in names]
    else:
        plan = expand(matrix, profile)
        pairs = [(matrix.frameworks[c.framework].family, matrix.frameworks[c.framework].variants[c.variant])
                 for c in plan.cells if not variant or c.variant == variant]
    return list(dict.fromkeys(pairs))


def build(docker, family, variant):
    house = ROOT / ".wheelhouse" / f"{family}-{variant.name}"
    code = wheelhouse.main(["--requirements", str(ROOT / variant.requirements), "--dest", str(house),
                            "--python-version", variant.python, "--glibc", variant.glibc])
    if code:
        raise ExecutorError(f"could not fill {house} from {variant.requirements} (pip's message is above)")
    tag = variant.image(family)
    argv = [docker, "build", "-f", str(dockerfile(family, variant)), "-t", tag,
            "--build-arg", f"BASE_IMAGE={variant.base_image}", "--build-arg", f"REQUIREMENTS={variant.requirements}",
            "--build-arg", f"WHEELHOUSE={house.relative_to(ROOT)}", "--build-arg", f"IMAGE={tag}",
            *(pyenv_build_args(family, variant, house) if needs_pyenv(variant) else []), str(ROOT)]
    started = time.time()
    if subprocess.run(argv, cwd=ROOT, env={**os.environ, "DOCKER_BUILDKIT": "1"}).returncode:
        raise ExecutorError(f"docker build of {tag} failed (its output is above)")
    health = subprocess.run([docker, "run", "--rm", "--network", "none", tag, "--version"], capture_output=True,
                            text=True)
    if health.returncode:
        raise ExecutorError(f"{tag} built but its health line failed: {health.stderr.strip()[-500:]}")
    size = subprocess.run([docker, "image", "inspect", "-f", "{{.Size}}", tag], capture_output=True, text=True)
    print(f"{tag}: built in {time.time() - started:.0f} s, {int(size.stdout or 0) / 1e9:.2f} GB — "
          f"{health.stdout.strip()}", flush=True)


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m scripts.images", description=__doc__.split("\n")[0])
    ap.add_argument("--profile", default="full")
    ap.add_argument("--framework")
    ap.add_argument("--variant")
    args = ap.parse_args(argv)
    try:
        pairs = wanted(load(), args.profile, args.framework, args.variant)
        docker = docker_cli()
        check_engine(docker)
        for family, variant in pairs:
            build(docker, family, variant)
    except (MatrixError, ExecutorError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
