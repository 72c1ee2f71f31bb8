"""Build the runner images a profile needs: one per framework family × variant, tagged rosetta/FAMILY:VARIANT.

    python -m scripts.launch.images --profile full                      # every image of the profile
    python -m scripts.launch.images --framework pytorch --variant cpu   # one image (--variant gpu: the default GPU one)
    python -m scripts.launch.images --profile full --list               # one job per image, JSON (workflows/images.yml)
    python -m scripts.launch.images --framework pytorch --variant cpu --push ghcr.io/OWNER/   # publish a built image

Each build first fills a host wheelhouse (.wheelhouse/FAMILY-REQUIREMENTS) with the variant's pinned requirements for
the image's Python and glibc, then installs from it with no network (scripts/launch/wheelhouse.py says why). Every image
is then asked what it carries (`IMAGE --inspect`: CUDA, cuDNN, GPU architectures) and refused if that differs from what
matrix.yaml declares, because the pre-flight decides from the declaration which GPUs a cell may run on. A family's first
GPU variant is also tagged rosetta/FAMILY:gpu, the image `make setup` points Compose at on a GPU host.

--push REGISTRY publishes an image built here that holds this checkout's code: it adds its `--inspect` report as a label
(org.rosetta.inspect; the code hash is already one), pushes it as REGISTRYrosetta/FAMILY:VARIANT and …:VARIANT-CODEHASH
(the name `make setup PULL=REGISTRY` pulls for a checkout of that code; the gpu alias likewise), and prints {image:
digest}; with --github-output it also appends name= and digest= for the provenance step.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from scripts.launch import venvs, wheelhouse
from scripts.launch.compose import check_engine, code_hash, docker_cli, image_code_hash
from scripts.launch.executors import ExecutorError, quiet
from scripts.paths import ROOT
from scripts.plan.matrix import Matrix, MatrixError, Variant, expand, load

# The python3 each local base image ships; a variant asking for another Python brings pyenv's (docker/pyenv.Dockerfile).
BASE_PYTHON = {"rosetta/debian:bookworm": "3.11"}


def needs_pyenv(variant: Variant) -> bool:
    return variant.python != BASE_PYTHON.get(variant.base_image, variant.python)


def dockerfile(family: str, variant: Variant) -> Path:
    """The variant's own `dockerfile` where matrix.yaml names one (the theano family's GPU image); docker/FAMILY/
    Dockerfile where a family needs its own; docker/pyenv.Dockerfile for a Python the base lacks; else the shared
    pip-based docker/Dockerfile."""
    if variant.dockerfile:
        return ROOT / variant.dockerfile
    own = ROOT / "docker" / family / "Dockerfile"
    if own.exists():
        return own
    return ROOT / "docker" / ("pyenv.Dockerfile" if needs_pyenv(variant) else "Dockerfile")


def stage_interpreter(version: str) -> tuple[Path, Path]:
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


def pyenv_build_args(family: str, variant: Variant, house: Path) -> list[str]:
    """The extra build arguments of docker/pyenv.Dockerfile; also puts its bootstrap pip into the wheelhouse."""
    staged, prefix = stage_interpreter(variant.python)
    bootstrap = venvs.BOOTSTRAP.get(variant.python, ["pip", "setuptools", "wheel"])
    with tempfile.NamedTemporaryFile("w", suffix=".txt") as pins:
        pins.write("\n".join(bootstrap) + "\n")
        pins.flush()
        if wheelhouse.main(
            [
                "--requirements",
                pins.name,
                "--dest",
                str(house),
                "--python-version",
                variant.python,
                "--glibc",
                variant.glibc,
            ]
        ):
            raise ExecutorError(f"could not fill {house} with {' '.join(bootstrap)} (pip's message is above)")
    return [
        "--build-arg",
        f"INTERPRETER={staged.relative_to(ROOT)}",
        "--build-arg",
        f"PYTHON_HOME={prefix}",
        "--build-arg",
        f"FAMILY={family}",
        "--build-arg",
        f"BOOTSTRAP={' '.join(bootstrap)}",
    ]


def wanted(matrix: Matrix, profile: str, framework: str | None, variant: str | None) -> list[tuple[str, Variant]]:
    """(family, Variant) pairs to build, without repeats (the three Keras ids share one image), each variant's parent
    before it."""
    if framework:
        if framework not in matrix.frameworks:
            raise MatrixError(f"unknown framework {framework!r}; declared: {', '.join(matrix.frameworks)}")
        fw = matrix.frameworks[framework]
        if variant == "gpu" and "gpu" not in fw.variants:  # the alias rosetta/FAMILY:gpu names
            variant = default_gpu_variant(matrix, fw.family)
        names = [variant] if variant else list(fw.variants)
        unknown = [n for n in names if n not in fw.variants]
        if unknown:
            raise MatrixError(
                f"frameworks.{framework} has no variant {unknown[0]!r}; declared: {', '.join(fw.variants)}"
            )
        pairs = [(fw.family, fw.variants[n]) for n in names]
    else:
        plan = expand(matrix, profile)
        pairs = [
            (matrix.frameworks[c.framework].family, matrix.frameworks[c.framework].variants[c.variant])
            for c in plan.cells
            if not variant or c.variant == variant
        ]
    with_parents = []
    for family, v in pairs:
        if v.parent:
            parent = parent_of(matrix, family, v)
            assert parent is not None  # v names one
            with_parents.append((family, parent))
        with_parents.append((family, v))
    return list(dict.fromkeys(with_parents))


def parent_of(matrix: Matrix, family: str, variant: Variant) -> Variant | None:
    """The Variant `variant` is built on (matrix.yaml's `parent`), or None."""
    if not variant.parent:
        return None
    return next(fw.variants[variant.parent] for fw in matrix.frameworks.values() if fw.family == family)


def mismatches(variant: Variant, report: Mapping[str, Any]) -> list[str]:
    """How an image's own report (shared/buildinfo.py) differs from its matrix.yaml declaration; [] when it agrees.
    Versions match on the declared prefix ("13.0" matches 13.0.96), architectures exactly."""
    problems = []
    for key in ("cuda", "cudnn"):
        declared, carried = set(getattr(variant, key)), report.get(key) or []
        found = {d for d in declared if any(c == d or c.startswith(d + ".") for c in carried)}
        extra = [c for c in carried if not any(c == d or c.startswith(d + ".") for d in declared)]
        if declared - found or (extra and declared):
            problems.append(f"{key}: declared {sorted(declared)}, the image carries {carried}")
    for key in ("gpu_archs", "ptx"):
        if variant.device == "gpu" and report.get("kernels") and list(getattr(variant, key)) != report.get(key, []):
            problems.append(
                f"{key}: declared {list(getattr(variant, key))}, the image's kernels are {report.get(key, [])}"
            )
    return problems


def inspect(docker: str, tag: str) -> Any:
    """The image's report of what it carries (`IMAGE --inspect`)."""
    out = subprocess.run([docker, "run", "--rm", "--network", "none", tag, "--inspect"], capture_output=True, text=True)
    if out.returncode:
        raise ExecutorError(f"{tag} built but `--inspect` failed: {out.stderr.strip()[-500:]}")
    return json.loads(out.stdout)


def default_gpu_variant(matrix: Matrix, family: str) -> str | None:
    """The family's first GPU variant in matrix.yaml, which `rosetta/FAMILY:gpu` names."""
    for fw in matrix.frameworks.values():
        if fw.family == family:
            return next((v.name for v in fw.variants.values() if v.device == "gpu"), None)
    return None


def ensure_local_base(docker: str, image: str) -> None:
    """A local Debian base (rosetta/debian:SUITE) is made on first use by .ci/docker-setup.sh (mmdebstrap, about a
    minute): no registry has it."""
    suite = image.partition("rosetta/debian:")[2]
    if suite and quiet([docker, "image", "inspect", image]).returncode:
        env = {**os.environ, "ROSETTA_BASE_IMAGE": image, "ROSETTA_BASE_SUITE": suite}
        if subprocess.run(["bash", str(ROOT / ".ci" / "docker-setup.sh")], env=env).returncode:
            raise ExecutorError(f"could not build the local base image {image} (.ci/docker-setup.sh's message above)")


def wheelhouse_of(family: str, variant: Variant) -> Path:
    """One wheelhouse per requirements file: variants built from the same pins (PyTorch's cpu and cu130) share it."""
    return ROOT / ".wheelhouse" / f"{family}-{Path(variant.requirements).stem}"


def build(docker: str, family: str, variant: Variant, gpu_alias: bool = False, parent: Variant | None = None) -> None:
    house = wheelhouse_of(family, variant)
    code = wheelhouse.main(
        [
            "--requirements",
            str(ROOT / variant.requirements),
            "--dest",
            str(house),
            "--python-version",
            variant.python,
            "--glibc",
            variant.glibc,
            *(["--no-deps"] if variant.parent else []),
        ]
    )
    if code:
        raise ExecutorError(f"could not fill {house} from {variant.requirements} (pip's message is above)")
    tag = variant.image(family)
    if variant.parent:
        file, extra = (
            ROOT / "docker" / "overrides.Dockerfile",
            ["--build-arg", f"PARENT_IMAGE=rosetta/{family}:{variant.parent}"],
        )
    else:
        ensure_local_base(docker, variant.base_image)
        file, extra = (
            dockerfile(family, variant),
            ["--build-arg", f"BASE_IMAGE={variant.base_image}", "--build-arg", f"FAMILY={family}"],
        )
        extra += pyenv_build_args(family, variant, house) if needs_pyenv(variant) else []
    argv = [
        docker,
        "build",
        "-f",
        str(file),
        "-t",
        tag,
        "--build-arg",
        f"REQUIREMENTS={variant.requirements}",
        "--build-arg",
        f"WHEELHOUSE={house.relative_to(ROOT)}",
        "--build-arg",
        f"IMAGE={tag}",
        "--build-arg",
        f"CODE_HASH={code_hash(family, variant, parent)}",
        *extra,
        str(ROOT),
    ]
    started = time.time()
    if subprocess.run(argv, cwd=ROOT, env={**os.environ, "DOCKER_BUILDKIT": "1"}).returncode:
        raise ExecutorError(f"docker build of {tag} failed (its output is above)")
    health = subprocess.run(
        [docker, "run", "--rm", "--network", "none", tag, "--version"], capture_output=True, text=True
    )
    if health.returncode:
        raise ExecutorError(f"{tag} built but its health line failed: {health.stderr.strip()[-500:]}")
    report = inspect(docker, tag)
    problems = mismatches(variant, report)
    if problems:
        raise ExecutorError(
            f"{tag} does not carry what matrix.yaml declares for it: {'; '.join(problems)}. Fix the "
            f"variant's pins ({variant.requirements}) or its declaration"
        )
    if gpu_alias:
        subprocess.run([docker, "tag", tag, f"rosetta/{family}:gpu"], check=True)
    size = subprocess.run([docker, "image", "inspect", "-f", "{{.Size}}", tag], capture_output=True, text=True)
    carries = ", ".join(f"{k} {'/'.join(report[k])}" for k in ("cuda", "cudnn", "nccl") if report.get(k))
    print(
        f"{tag}: built in {time.time() - started:.0f} s, {int(size.stdout or 0) / 1e9:.2f} GB — "
        f"{health.stdout.strip()}; {carries or 'no CUDA'}; kernels {' '.join(report['gpu_archs']) or 'none'}"
        f"{' + PTX ' + ' '.join(report['ptx']) if report['ptx'] else ''}"
        f"{f'; also tagged rosetta/{family}:gpu' if gpu_alias else ''}",
        flush=True,
    )


INSPECT_LABEL = "org.rosetta.inspect"


def jobs(matrix: Matrix, pairs: Iterable[tuple[str, Variant]]) -> list[dict[str, str]]:
    """One job per image, for a GitHub matrix: [{"framework", "variant", "image"}], named by a framework id that
    `--framework` knows (a child's job builds its parent first too, from the runner's Docker cache where it can)."""
    framework_of = {fw.family: fid for fid, fw in reversed(matrix.frameworks.items())}
    return [{"framework": framework_of[family], "variant": v.name, "image": v.image(family)} for family, v in pairs]


def repo_digest(docker: str, name: str) -> str:
    """The registry digest (sha256:…) the engine knows for `name` (REGISTRY/rosetta/FAMILY:TAG) after a push."""
    out = quiet([docker, "image", "inspect", "-f", "{{json .RepoDigests}}", name])
    repository = name.rsplit(":", 1)[0]
    for entry in json.loads(out.stdout or "[]") if out.returncode == 0 else []:
        found, _, digest = entry.partition("@")
        if found == repository and digest.startswith("sha256:"):
            return digest
    raise ExecutorError(f"{name}: the engine knows no registry digest for it")


def publish(
    docker: str, family: str, variant: Variant, registry: str, parent: Variant | None = None, gpu_alias: bool = False
) -> tuple[str, str]:
    """Push the local image of `variant` under `registry`; returns (repository, digest). Refuses an image that holds
    other code than this checkout, which its code-hash tag would then misname."""
    local, expected = variant.image(family), code_hash(family, variant, parent)
    label = image_code_hash(docker, local)
    if label != expected:
        raise ExecutorError(
            f"{local} holds code {label or 'of no known hash'}, this checkout's is {expected}: "
            f"build it first (`python -m scripts.launch.images --framework … --variant {variant.name}`)"
        )
    report = json.dumps(inspect(docker, local), sort_keys=True, separators=(",", ":"))
    repository = f"{registry}rosetta/{family}"
    names = [f"{repository}:{variant.name}", f"{repository}:{variant.name}-{expected}"]
    if gpu_alias:
        names = list(dict.fromkeys([*names, f"{repository}:gpu", f"{repository}:gpu-{expected}"]))
    # The report as a label: a build of one FROM line changes only the image's configuration, no layer.
    labelled = subprocess.run(
        [
            docker,
            "build",
            "--label",
            f"{INSPECT_LABEL}={report}",
            *(arg for name in names for arg in ("-t", name)),
            "-",
        ],
        input=f"FROM {local}\n",
        text=True,
        capture_output=True,
    )
    if labelled.returncode:
        raise ExecutorError(f"could not label {local} with its report: {labelled.stderr.strip()[-500:]}")
    for name in names:
        if subprocess.run([docker, "push", name]).returncode:
            raise ExecutorError(f"docker push {name} failed (its output is above; `docker login` to the registry?)")
    return repository, repo_digest(docker, names[0])


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m scripts.launch.images", description=__doc__.split("\n")[0])
    ap.add_argument(
        "--profile", default="full", help="build the images this profile of matrix.yaml needs (default: full)"
    )
    ap.add_argument("--framework", help="only this framework's image (a framework id, e.g. keras-tf)")
    ap.add_argument("--variant", help="only this variant (cpu, gpu, cu130, …)")
    ap.add_argument(
        "--if-stale",
        action="store_true",
        help="build only images that are missing or hold other code than this checkout (their label)",
    )
    ap.add_argument("--and-cpu", action="store_true", help="every family's cpu image too")
    ap.add_argument(
        "--lean",
        action="store_true",
        help="remove each image's wheelhouse once it is built (a tight disk, CI's: the wheelhouse only "
        "saves the download of a rebuild, and the image holds what it installed)",
    )
    ap.add_argument("--list", action="store_true", help="print the images to build as JSON jobs; build nothing")
    ap.add_argument(
        "--push",
        metavar="REGISTRY",
        help="push the built image(s) as REGISTRYrosetta/FAMILY:… "
        "(e.g. ghcr.io/OWNER/), with the --inspect report as a label",
    )
    ap.add_argument(
        "--github-output",
        type=Path,
        help="append the --list jobs (images=) or the pushed name= and digest= to this file (GitHub's $GITHUB_OUTPUT)",
    )
    args = ap.parse_args(argv)
    try:
        matrix = load()
        pairs = wanted(matrix, args.profile, args.framework, args.variant)
        if args.and_cpu:  # what `docker compose run` uses on a host without a GPU: each family's cpu image
            pairs = list(
                dict.fromkeys(
                    [
                        *pairs,
                        *((fw.family, fw.variants["cpu"]) for fw in matrix.frameworks.values() if "cpu" in fw.variants),
                    ]
                )
            )
        if args.list:
            listed = json.dumps(jobs(matrix, pairs))
            print(listed)
            if args.github_output:
                with args.github_output.open("a") as out:
                    out.write(f"images={listed}\n")
            return 0
        docker = docker_cli()
        check_engine(docker)
        if args.push:  # the image asked for, not the parent `wanted` adds before it (its own job pushes that)
            return push(docker, matrix, pairs[-1:] if args.variant else pairs, args.push, args.github_output)
        for i, (family, variant) in enumerate(pairs):
            parent = parent_of(matrix, family, variant)
            if args.if_stale and image_code_hash(docker, variant.image(family)) == code_hash(family, variant, parent):
                print(f"{variant.image(family)}: holds this checkout's code, not rebuilt")
                continue
            build(docker, family, variant, gpu_alias=variant.name == default_gpu_variant(matrix, family), parent=parent)
            house = wheelhouse_of(family, variant)
            if args.lean and all(wheelhouse_of(*later) != house for later in pairs[i + 1 :]):  # its last user
                shutil.rmtree(house, ignore_errors=True)
    except (MatrixError, ExecutorError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


def push(
    docker: str, matrix: Matrix, pairs: Iterable[tuple[str, Variant]], registry: str, github_output: Path | None = None
) -> int:
    """Publish the images of `pairs`; print {image: digest} as JSON."""
    digests = {}
    for family, variant in pairs:
        repository, digests[variant.image(family)] = publish(
            docker,
            family,
            variant,
            registry,
            parent_of(matrix, family, variant),
            gpu_alias=variant.name == default_gpu_variant(matrix, family),
        )
        if github_output:
            with github_output.open("a") as out:
                out.write(f"name={repository}\ndigest={digests[variant.image(family)]}\n")
    print(json.dumps(digests, indent=1, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
