"""System information for the result record: what the host is, and what the framework says it runs on."""
import os
import platform
import re
import shutil
import subprocess

from shared import buildinfo


def cpu_name():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def nvidia_driver():
    """The driver version from nvidia-smi, or None where there is no NVIDIA driver."""
    if not shutil.which("nvidia-smi"):
        return None
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                             universal_newlines=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return None
    lines = out.stdout.split()
    return lines[0] if out.returncode == 0 and lines else None


def safe_name(name):
    """A host name in the records' safe alphabet (letters, digits, ._-; at most 128): the merge builds file names
    from it, and it lands in reports."""
    return re.sub(r"[^A-Za-z0-9._-]", "-", str(name)).lstrip("-._")[:128] or "unknown-host"


def placement():
    """Where a cell ran: the host that launched it (ROSETTA_HOST, passed into containers, whose own name is random;
    else this machine's name) and the host's GPU indices it was given (ROSETTA_GPU_IDS from the orchestrator, else the
    CUDA_VISIBLE_DEVICES a scheduler set; None when neither is set)."""
    return {"host": safe_name(os.environ.get("ROSETTA_HOST") or platform.node()),
            "gpu_ids": os.environ.get("ROSETTA_GPU_IDS") or os.environ.get("CUDA_VISIBLE_DEVICES") or None}


def system_info(framework):
    """Merge host facts with `framework`, the dict a runner reports: framework_version, cuda, cudnn, gpus, switches."""
    return {
        "framework_version": None,
        "cuda": None,
        "cudnn": None,
        "gpus": [],
        "switches": {},
        **framework,
        "driver": nvidia_driver(),
        "python": platform.python_version(),
        "cpu": cpu_name(),
        "cpu_count": os.cpu_count(),
        **placement(),
        "os": platform.platform(),
        "image": os.environ.get("ROSETTA_IMAGE"),  # set by the Dockerfile: which image a containerized cell ran in
        "code_hash": os.environ.get("ROSETTA_CODE_HASH"),  # and the code it holds (scripts/compose.py: code_hash)
        "build": buildinfo.cached(),               # what the environment carries: CUDA, cuDNN, NCCL, GPU kernels
    }
