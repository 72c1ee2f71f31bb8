"""Write the repository's .env so a plain `docker compose run --rm SERVICE` picks GPU or CPU images for this host.

    python -m scripts.launch.setup            # decide from the Docker engine and nvidia-smi (make setup)
    python -m scripts.launch.setup --gpu      # force a choice, --cpu or --gpu (make setup DEVICE=gpu)
    python -m scripts.launch.setup --pull ghcr.io/OWNER/ [--digests images.json] [--framework pytorch …]
                                       # and pull the published images of that choice (make setup PULL=…)

A host runs GPU containers when its Docker engine knows the NVIDIA runtime (or has CDI specs for nvidia) and `nvidia-smi
-L` lists a GPU: then .env adds compose.gpu.yaml (the reservation) and selects the `gpu` image of every family;
elsewhere it selects the CPU images. Only the keys in `settings` are replaced, in a block under a comment that says
`make setup` wrote it; every other line of .env stays. The orchestrator (scripts/launch/compose.py) passes its files and
variables explicitly, so .env changes only compose commands typed by hand.

Then it names the images that choice uses and are not on this host, with the two ways to get them: build (`make images
FRAMEWORK=… VARIANT=…`) or pull. --pull REGISTRY pulls each family's image of the choice as published by
.github/workflows/images.yml: by digest where one is known (--digests, the workflow's images.json artifact:
{"rosetta/FAMILY:VARIANT": "sha256:…"}), else by the tag that names this checkout's code (VARIANT-CODEHASH); refuses one
whose code-hash label is not this checkout's; tags it REGISTRYrosetta/FAMILY:VARIANT and rosetta/FAMILY:VARIANT (the
names Compose and the orchestrator look for, so neither pulls by a mutable tag), and writes ROSETTA_REGISTRY=REGISTRY to
.env.
"""

import argparse
import os
import subprocess
import sys
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from scripts.launch.compose import (
    cdi_has_nvidia,
    cell_limits,
    check_engine,
    code_hash,
    docker_cli,
    image_code_hash,
    missing_images,
)
from scripts.launch.executors import ExecutorError, quiet
from scripts.launch.images import default_gpu_variant, parent_of
from scripts.launch.k8s import K8sError, read_digests
from scripts.paths import DATA, RESULTS, ROOT
from scripts.plan.matrix import Matrix, MatrixError, load

MARK = "# written by `make setup` (python -m scripts.launch.setup); rerun it after changing Docker or the driver"


@dataclass(frozen=True)
class Choice:
    gpu: bool
    reason: str  # what decided it, in words: printed, so the user knows why
    hint: str = ""  # what to do for GPU containers, where the host lacks something


def gpus() -> list[str]:
    """The GPUs `nvidia-smi -L` lists ("GPU 0: NVIDIA H200 (UUID: …)"); none where it is missing or fails."""
    out = quiet(["nvidia-smi", "-L"])
    return [line.strip() for line in out.stdout.splitlines() if line.startswith("GPU ")] if out.returncode == 0 else []


def detect() -> Choice:
    try:
        info = check_engine(docker_cli())
    except ExecutorError as e:
        return Choice(False, "no Docker engine answers", str(e))
    if "nvidia" not in (info.get("Runtimes") or {}) and not cdi_has_nvidia(info):
        return Choice(
            False,
            "no NVIDIA runtime in Docker",
            "install the NVIDIA Container Toolkit, then "
            "`nvidia-ctk runtime configure --runtime=docker` and restart Docker",
        )
    found = gpus()
    if not found:
        return Choice(
            False, "Docker has the NVIDIA runtime but `nvidia-smi -L` lists no GPU", "install the NVIDIA driver"
        )
    return Choice(True, f"NVIDIA runtime in Docker and {len(found)} GPU(s), {found[0]}")


def settings(gpu: bool) -> dict[str, str]:
    device = "gpu" if gpu else "cpu"
    cpus, memory = cell_limits(0, 0)  # a `docker compose run` by hand: the whole host, less 1 GiB of memory
    return {
        "COMPOSE_FILE": "compose.yaml:compose.gpu.yaml" if gpu else "compose.yaml",
        "ROSETTA_DEVICE": device,
        "ROSETTA_VARIANT": device,
        "ROSETTA_UID": str(os.getuid()),
        "ROSETTA_GID": str(os.getgid()),
        "ROSETTA_CPUS": cpus,
        "ROSETTA_MEMORY": memory,
    }


def choice_images(matrix: Matrix, gpu: bool, frameworks: Collection[str] = ()) -> dict[str, tuple[str, str, str]]:
    """{local image: (framework id, code hash, the variant's own image)} that .env's choice runs: each family's cpu
    image, or its gpu alias (the family's default GPU variant); only the families of `frameworks` where given."""
    images: dict[str, tuple[str, str, str]] = {}
    for fid, fw in matrix.frameworks.items():
        if frameworks and fid not in frameworks:
            continue
        name = default_gpu_variant(matrix, fw.family) if gpu else "cpu"
        if name in fw.variants:
            variant = fw.variants[name]
            tag = f"rosetta/{fw.family}:{'gpu' if gpu else 'cpu'}"
            images.setdefault(
                tag,
                (fid, code_hash(fw.family, variant, parent_of(matrix, fw.family, variant)), variant.image(fw.family)),
            )
    return images


def pull(docker: str, registry: str, images: Mapping[str, tuple[str, str, str]], digests: Mapping[str, str]) -> None:
    """Pull each of `images` (choice_images) from `registry`, check and tag it (see the module's docstring)."""
    for local, (_, expected, own) in images.items():
        repository, tag = f"{registry}{local}".rsplit(":", 1)
        source = f"{repository}@{digests[own]}" if own in digests else f"{repository}:{tag}-{expected}"
        print(f"pulling {source}", flush=True)
        if subprocess.run([docker, "pull", source]).returncode:
            raise ExecutorError(
                f"docker pull {source} failed (its output is above): is this checkout's code "
                f"published (a release tag built by .github/workflows/images.yml)? Else build: "
                f"`make images FRAMEWORK={images[local][0]} VARIANT={tag}`"
            )
        label = image_code_hash(docker, source)
        if label != expected:
            raise ExecutorError(
                f"{source} holds code {label or 'of no known hash'}, this checkout's is {expected}: "
                f"its records would claim code it does not run. Check out the release it was built "
                f"from, or build: `make images FRAMEWORK={images[local][0]} VARIANT={tag}`"
            )
        for name in (f"{repository}:{tag}", local):
            subprocess.run([docker, "tag", source, name], check=True)
        print(f"{local}: {source} (code {expected})")


def offer(images: Mapping[str, tuple[str, str, str]]) -> None:
    """Say which images of the choice are missing here, and how to build or pull them (nothing without an engine:
    the choice's own line says so)."""
    try:
        docker = docker_cli()
        check_engine(docker)
    except ExecutorError:
        return
    missing = missing_images(docker, images)
    if missing:
        builds = "; ".join(
            f"`make images FRAMEWORK={images[image][0]} VARIANT={image.split(':')[1]}`" for image in missing
        )
        print(
            f"not on this host: {', '.join(missing)}. Build them ({builds}: 1–4 min and 1–8 GB each), or pull "
            f"the published ones: `make setup PULL=ghcr.io/OWNER/` (README, GPU host)"
        )


def merged(text: str, values: Mapping[str, str]) -> str:
    """The .env `text` without our mark and our keys' lines, then our block at the end; a rerun changes nothing."""
    kept = [line for line in text.splitlines() if line.strip() != MARK and line.split("=", 1)[0].strip() not in values]
    while kept and not kept[-1].strip():
        kept.pop()
    return "\n".join([*kept, *([""] if kept else []), MARK, *(f"{k}={v}" for k, v in values.items())]) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m scripts.launch.setup", description=__doc__.split("\n")[0])
    force = ap.add_mutually_exclusive_group()
    force.add_argument("--cpu", action="store_true", help="CPU images, whatever the host has")
    force.add_argument("--gpu", action="store_true", help="GPU images and reservation, whatever the host has")
    ap.add_argument(
        "--env-file", type=Path, default=ROOT / ".env", help="the file to write (default: .env, which Compose reads)"
    )
    ap.add_argument(
        "--pull",
        metavar="REGISTRY",
        help="pull the published images of the choice from REGISTRY "
        "(e.g. ghcr.io/OWNER/, ending in /) instead of building them",
    )
    ap.add_argument("--digests", type=Path, help='JSON {"rosetta/FAMILY:VARIANT": "sha256:…"}: pull those by digest')
    ap.add_argument("--framework", action="append", default=[], help="pull only these frameworks' images")
    args = ap.parse_args(argv)
    choice = Choice(False, "--cpu") if args.cpu else detect()
    if args.gpu and not choice.gpu:
        print(
            f"warning: --gpu, but {choice.reason}: GPU containers will not start here ({choice.hint})", file=sys.stderr
        )
        choice = Choice(True, "--gpu")
    print(f"{choice.reason}: {'GPU' if choice.gpu else 'CPU'} images" + (f" ({choice.hint})" if choice.hint else ""))
    values = settings(choice.gpu)
    try:
        matrix = load()
        images = choice_images(matrix, choice.gpu, args.framework)
        if args.pull:
            if not args.pull.endswith("/"):
                raise ExecutorError(f"--pull {args.pull}: a registry prefix ends in / (e.g. ghcr.io/OWNER/)")
            known = {v.image(fw.family) for fw in matrix.frameworks.values() for v in fw.variants.values()}
            digests = read_digests(args.digests, known) if args.digests else {}
            pull(docker_cli(), args.pull, images, digests)
            values["ROSETTA_REGISTRY"] = args.pull
        else:
            offer(images)
    except (ExecutorError, K8sError, MatrixError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    old = args.env_file.read_text() if args.env_file.exists() else ""
    args.env_file.write_text(merged(old, values))
    print(f"wrote {args.env_file}: " + " ".join(f"{k}={v}" for k, v in values.items()))
    # The services' results folder and the data folder, yours: where either is missing, Docker creates it as root.
    for folder in (RESULTS / "compose", DATA / "synthetic"):
        folder.mkdir(parents=True, exist_ok=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
