"""Build the runner images a profile needs: one per framework family × variant, tagged rosetta/FAMILY:VARIANT.

    python -m scripts.images --profile full                      # every image of the profile
    python -m scripts.images --framework pytorch --variant cpu   # one image

Each build first fills a host wheelhouse (.wheelhouse/FAMILY-VARIANT) with the variant's pinned requirements for the
image's Python and glibc, then installs from it with no network (scripts/wheelhouse.py says why).
"""
import argparse
import os
import subprocess
import sys
import time

from scripts import wheelhouse
from scripts.compose import ExecutorError, check_engine, docker_cli
from scripts.matrix import ROOT, MatrixError, expand, load


def dockerfile(family):
    """docker/FAMILY/Dockerfile where a family needs its own, else the shared pip-based docker/Dockerfile."""
    own = ROOT / "docker" / family / "Dockerfile"
    return own if own.exists() else ROOT / "docker" / "Dockerfile"


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
    argv = [docker, "build", "-f", str(dockerfile(family)), "-t", tag,
            "--build-arg", f"BASE_IMAGE={variant.base_image}", "--build-arg", f"REQUIREMENTS={variant.requirements}",
            "--build-arg", f"WHEELHOUSE={house.relative_to(ROOT)}", "--build-arg", f"IMAGE={tag}", str(ROOT)]
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
