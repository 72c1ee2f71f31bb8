"""Write the repository's .env so a plain `docker compose run --rm SERVICE` picks GPU or CPU images for this host.

    python -m scripts.setup            # decide from the Docker engine and nvidia-smi (make setup)
    python -m scripts.setup --gpu      # force a choice, --cpu or --gpu (make setup DEVICE=gpu)

A host runs GPU containers when its Docker engine knows the NVIDIA runtime (or has CDI specs for nvidia) and
`nvidia-smi -L` lists a GPU: then .env adds compose.gpu.yaml (the reservation) and selects the `gpu` image of every
family; elsewhere it selects the CPU images. Only the keys in `settings` are replaced, in a block under a comment that
says `make setup` wrote it; every other line of .env stays. The orchestrator (scripts/compose.py) passes its files and
variables explicitly, so .env changes only compose commands typed by hand.
"""
import argparse
import os
import sys
from dataclasses import dataclass
from pathlib import Path

from scripts.compose import ExecutorError, cdi_has_nvidia, cell_limits, check_engine, docker_cli, quiet
from scripts.matrix import ROOT

MARK = "# written by `make setup` (python -m scripts.setup); rerun it after changing Docker or the driver"


@dataclass(frozen=True)
class Choice:
    gpu: bool
    reason: str     # what decided it, in words: printed, so the user knows why
    hint: str = ""  # what to do for GPU containers, where the host lacks something


def gpus():
    """The GPUs `nvidia-smi -L` lists ("GPU 0: NVIDIA H200 (UUID: …)"); none where it is missing or fails."""
    out = quiet(["nvidia-smi", "-L"])
    return [line.strip() for line in out.stdout.splitlines() if line.startswith("GPU ")] if out.returncode == 0 else []


def detect():
    try:
        info = check_engine(docker_cli())
    except ExecutorError as e:
        return Choice(False, "no Docker engine answers", str(e))
    if "nvidia" not in (info.get("Runtimes") or {}) and not cdi_has_nvidia(info):
        return Choice(False, "no NVIDIA runtime in Docker", "install the NVIDIA Container Toolkit, then "
                      "`nvidia-ctk runtime configure --runtime=docker` and restart Docker")
    found = gpus()
    if not found:
        return Choice(False, "Docker has the NVIDIA runtime but `nvidia-smi -L` lists no GPU",
                      "install the NVIDIA driver")
    return Choice(True, f"NVIDIA runtime in Docker and {len(found)} GPU(s), {found[0]}")


def settings(gpu):
    device = "gpu" if gpu else "cpu"
    cpus, memory = cell_limits(0, 0)      # a `docker compose run` by hand: the whole host, less 1 GiB of memory
    return {"COMPOSE_FILE": "compose.yaml:compose.gpu.yaml" if gpu else "compose.yaml",
            "ROSETTA_DEVICE": device, "ROSETTA_VARIANT": device,
            "ROSETTA_UID": str(os.getuid()), "ROSETTA_GID": str(os.getgid()),
            "ROSETTA_CPUS": cpus, "ROSETTA_MEMORY": memory}


def merged(text, values):
    """The .env `text` without our mark and our keys' lines, then our block at the end; a rerun changes nothing."""
    kept = [line for line in text.splitlines()
            if line.strip() != MARK and line.split("=", 1)[0].strip() not in values]
    while kept and not kept[-1].strip():
        kept.pop()
    return "\n".join([*kept, *([""] if kept else []), MARK, *(f"{k}={v}" for k, v in values.items())]) + "\n"


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m scripts.setup", description=__doc__.split("\n")[0])
    force = ap.add_mutually_exclusive_group()
    force.add_argument("--cpu", action="store_true", help="CPU images, whatever the host has")
    force.add_argument("--gpu", action="store_true", help="GPU images and reservation, whatever the host has")
    ap.add_argument("--env-file", type=Path, default=ROOT / ".env")
    args = ap.parse_args(argv)
    choice = Choice(False, "--cpu") if args.cpu else detect()
    if args.gpu and not choice.gpu:
        print(f"warning: --gpu, but {choice.reason}: GPU containers will not start here ({choice.hint})",
              file=sys.stderr)
        choice = Choice(True, "--gpu")
    print(f"{choice.reason}: {'GPU' if choice.gpu else 'CPU'} images" + (f" ({choice.hint})" if choice.hint else ""))
    values = settings(choice.gpu)
    old = args.env_file.read_text() if args.env_file.exists() else ""
    args.env_file.write_text(merged(old, values))
    print(f"wrote {args.env_file}: " + " ".join(f"{k}={v}" for k, v in values.items()))
    (ROOT / "results" / "compose").mkdir(parents=True, exist_ok=True)   # the services' results folder, yours
    return 0


if __name__ == "__main__":
    sys.exit(main())
