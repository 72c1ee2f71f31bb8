"""System information for the result record: what the host is, and what the framework says it runs on."""

import os
import platform
import re
import shutil
import subprocess
import sys
from typing import Any, Dict, List, Mapping, Optional, Set, Tuple

from shared import buildinfo

ISA_FLAGS = (
    "avx2",
    "fma",
    "avx512f",
    "avx512_vnni",
    "avx512_bf16",
    "avx512_fp16",
    "amx_tile",
    "amx_bf16",
    "amx_fp16",
    "asimd",
    "sve",
    "sve2",  # what decides a CPU's GEMM rate (x86 and Arm) …
    "avx_vnni",
    "avx512_vp2intersect",
    "avx_vnni_int8",
    "avx_ne_convert",
    "avx_ifma",
    "avx10",
)  # … and, with
# the family/model/stepping, which generation it is where the VM names every CPU alike ("AMD EPYC"): Zen 5 has
# avx_vnni and avx512_vp2intersect, Zen 4 neither; Sapphire Rapids has amx_*, Granite Rapids amx_fp16
ISA_LEVELS = (
    ("amx_bf16", "amx"),
    ("avx512_bf16", "avx512-bf16"),
    ("avx512f", "avx512"),
    ("avx2", "avx2"),
    ("sve", "sve"),
    ("asimd", "neon"),
)  # the class names the best the CPU has
GENERATION_FLAGS = (
    ("avx_vnni", "avxvnni"),
    ("avx512_vp2intersect", "vp2intersect"),
    ("avx512_fp16", "fp16"),
    ("amx_fp16", "amxfp16"),
    ("avx_ne_convert", "neconvert"),
    ("avx10", "avx10"),
)


def cpuinfo(generation: Optional[Dict[str, str]] = None) -> Tuple[str, Set[str], Optional[int]]:
    """(model name, set of flags, physical cores) from /proc/cpuinfo; physical cores = distinct (package, core).
    `generation`, a dict, receives what the kernel reports even where a VM masks the model name: vendor, CPU family,
    model and stepping (x86: `cpu family`, `model`, `stepping`; Arm: implementer, part, variant, revision)."""
    flags: Set[str]
    cores: Set[Tuple[Optional[str], str]]
    model, flags, cores = None, set(), set()
    package = None
    keys = {
        "vendor_id": "cpu_vendor",
        "cpu family": "cpu_family",
        "model": "cpu_model_number",
        "stepping": "cpu_stepping",
        "CPU implementer": "cpu_vendor",
        "CPU architecture": "cpu_family",
        "CPU part": "cpu_model_number",
        "CPU variant": "cpu_stepping",
        "cpu MHz": "cpu_mhz",
    }
    generation = {} if generation is None else generation
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                key, _, value = (s.strip() for s in line.partition(":"))
                if key in keys and keys[key] not in generation:
                    generation[keys[key]] = value
                if key == "model name" and model is None:
                    model = value
                elif key in ("flags", "Features") and not flags:
                    flags = set(value.split())
                elif key == "physical id":
                    package = value
                elif key == "core id":
                    cores.add((package, value))
    except OSError:
        pass
    return model or platform.processor() or platform.machine(), flags, len(cores) or None


def read_text(path: str) -> Optional[str]:
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return None


def cgroup_cpus() -> Optional[float]:
    """The cgroup's CPU quota in CPUs (`docker --cpus`, a pod's limit), or None: cgroup v2's cpu.max ('150000 100000';
    'max …' = none), else v1's cfs files (Docker on a v1 host; quota -1 = none)."""
    v2 = read_text("/sys/fs/cgroup/cpu.max")
    quota: Optional[str]
    period: Optional[str]
    quota, period = (
        v2.split()
        if v2
        else (read_text("/sys/fs/cgroup/cpu/cpu.cfs_quota_us"), read_text("/sys/fs/cgroup/cpu/cpu.cfs_period_us"))
    )
    try:
        # a file that is missing reads as "": ValueError, as int(None)'s TypeError was
        return int(quota or "") / int(period or "") if int(quota or "") > 0 else None
    except (TypeError, ValueError):
        return None


def cgroup_memory() -> Optional[int]:
    """The cgroup's memory limit in bytes, or None: v2's memory.max ('max' = none), else v1's limit_in_bytes (a number
    near 2⁶³ = none)."""
    text = read_text("/sys/fs/cgroup/memory.max") or read_text("/sys/fs/cgroup/memory/memory.limit_in_bytes")
    try:
        return int(text or "") if int(text or "") < 2**60 else None
    except (TypeError, ValueError):
        return None


def usable_cpus() -> Optional[float]:
    """The CPUs this process may use: its affinity mask (taskset, Slurm, Kubernetes' static policy) and, inside a
    container, the cgroup's CPU quota, whichever is smaller."""
    count = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    quota = cgroup_cpus()
    # a quota means Linux, whose count is known
    return min(count, round(quota, 2)) if quota and count is not None else count


def memory_gib() -> Optional[float]:
    """The memory this process may use: the host's, or inside a container the cgroup's limit (`docker --memory`, a
    pod's limit) where that is smaller."""
    total = None
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    total = int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    limit = cgroup_memory()
    if limit:
        total = min(total or limit, limit)
    return round(total / 2**30, 1) if total else None


def gpu_facts() -> List[Dict[str, Any]]:
    """What nvidia-smi says of each GPU this process sees: name, memory, maximum clocks, compute capability, driver;
    [] without an NVIDIA driver. (Streaming multiprocessors: from the framework, where it reports them.)"""
    fields = ("name", "memory.total", "clocks.max.sm", "clocks.max.memory", "compute_cap", "driver_version")
    if not shutil.which("nvidia-smi"):
        return []
    try:
        out = subprocess.run(
            ["nvidia-smi", f"--query-gpu={','.join(fields)}", "--format=csv,noheader,nounits"],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            universal_newlines=True,  # not text=: Python 3.6 (CNTK) has no such argument
            timeout=20,
        )
    except (OSError, subprocess.TimeoutExpired):
        return []
    gpus = []
    for line in out.stdout.splitlines() if out.returncode == 0 else []:
        values = [v.strip() for v in line.split(",")]
        if len(values) == len(fields):
            name, memory, sm_clock, mem_clock, capability, driver = values
            gpus.append(
                {
                    "name": name,
                    "memory_mib": number(memory),
                    "max_sm_clock_mhz": number(sm_clock),
                    "max_memory_clock_mhz": number(mem_clock),
                    "compute_capability": capability,
                    "driver": driver,
                }
            )
    return gpus


def number(text: str) -> Optional[int]:
    try:
        return int(text)
    except ValueError:
        return None


def slug(text: Any) -> str:
    return re.sub(r"[^a-z0-9]+", "-", str(text).lower().replace("(r)", "").replace("(tm)", "")).strip("-")


def machine_class(system: Mapping[str, Any], device: str, gpus: int = 1) -> str:
    """What the speed of a cell depends on, in one key that never holds a host name: for a CPU cell the CPU model,
    its generation as the kernel reports it even where a VM masks the model name (family, model, stepping), its best
    instruction set with the flags that tell generations apart, and the CPUs the cell could use
    ('cpu:amd-epyc:f25-m17-s1:avx512-bf16:2c'; a Zen 5 is 'cpu:amd-epyc:f26-m2-s1:avx512-bf16.avxvnni.vp2intersect:2c');
    for a GPU cell the GPU model, its memory in GiB rounded and how many ('gpu:nvidia-h200:140g:x1': 143,771 MiB).
    Records of one class are comparable. Facts without the generation (records made before it) give the format-1
    class they were made with ('cpu:amd-epyc:avx512-bf16:2c'), which no format-2 class equals: such a reference is
    made again, never trusted across generations (class_format)."""
    if device == "gpu":
        facts = (system.get("gpu_facts") or [{}])[0]
        name = facts.get("name") or ((system.get("gpus") or ["unknown"])[0])
        memory = facts.get("memory_mib")
        return f"gpu:{slug(name)}:{round(memory / 1024) if memory else '?'}g:x{gpus}"
    flags = set(system.get("cpu_flags") or ())
    isa = next((name for flag, name in ISA_LEVELS if flag in flags), "isa-unknown" if not flags else "baseline")
    usable = system.get("cpu_usable") or system.get("cpu_count")
    cores = f"{usable if usable is not None else '?'}c"
    if system.get("cpu_family") is None:  # a record made before the generation facts: the class format 1
        return f"cpu:{slug(system.get('cpu') or 'unknown')}:{isa}:{cores}"
    generation = slug(f"f{system['cpu_family']}-m{system.get('cpu_model_number')}-s{system.get('cpu_stepping')}")
    extra = "".join(f".{name}" for flag, name in GENERATION_FLAGS if flag in flags)
    return f"cpu:{slug(system.get('cpu') or 'unknown')}:{generation}:{isa}{extra}:{cores}"


def legacy_class(system: Mapping[str, Any], device: str, gpus: int = 1) -> str:
    """The format-1 class of facts that may hold the generation: what a reference made before it would name them."""
    return machine_class({**system, "cpu_family": None}, device, gpus)


def class_format(machine: Any) -> Optional[int]:
    """1 for a CPU class string made before the generation facts (cpu:MODEL:ISA:CORES), 2 after
    (cpu:MODEL:fFAMILY-mMODEL-sSTEPPING:ISA[.FLAGS]:CORES); None for a GPU class."""
    if not str(machine).startswith("cpu:"):
        return None
    return 2 if len(str(machine).split(":")) == 5 else 1


def nvidia_driver() -> Optional[str]:
    """The driver version from nvidia-smi, or None where there is no NVIDIA driver."""
    if not shutil.which("nvidia-smi"):
        return None
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            universal_newlines=True,  # not text=: Python 3.6 (CNTK) has no such argument
            timeout=20,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    lines = out.stdout.split()
    return lines[0] if out.returncode == 0 and lines else None


def safe_name(name: Any) -> str:
    """A host name in the records' safe alphabet (letters, digits, ._-; at most 128): the merge builds file names
    from it, and it lands in reports."""
    return re.sub(r"[^A-Za-z0-9._-]", "-", str(name)).lstrip("-._")[:128] or "unknown-host"


def placement() -> Dict[str, Optional[str]]:
    """Where a cell ran: the host that launched it (ROSETTA_HOST, passed into containers, whose own name is random;
    else this machine's name) and the host's GPU indices it was given (ROSETTA_GPU_IDS from the orchestrator, else the
    CUDA_VISIBLE_DEVICES a scheduler set; None when neither is set)."""
    return {
        "host": safe_name(os.environ.get("ROSETTA_HOST") or platform.node()),
        "gpu_ids": os.environ.get("ROSETTA_GPU_IDS") or os.environ.get("CUDA_VISIBLE_DEVICES") or None,
    }


def cpu_facts() -> Dict[str, Any]:
    generation: Dict[str, str] = {}
    model, flags, physical = cpuinfo(generation)
    max_khz = read_text("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq")
    try:
        mhz = round(float(generation.get("cpu_mhz", "")))
    except (TypeError, ValueError):
        mhz = None
    return {
        "cpu": model,
        "cpu_vendor": generation.get("cpu_vendor"),
        "cpu_family": generation.get("cpu_family"),
        "cpu_mhz": mhz,
        "cpu_max_mhz": round(int(max_khz) / 1000) if max_khz and max_khz.isdigit() else None,
        "cpu_model_number": generation.get("cpu_model_number"),
        "cpu_stepping": generation.get("cpu_stepping"),
        "cpu_flags": sorted(f for f in ISA_FLAGS if f in flags),
        "cpu_count": os.cpu_count(),
        "cpu_physical_cores": physical,
        "cpu_usable": usable_cpus(),
        "memory_gib": memory_gib(),
    }


def system_info(framework: Mapping[str, Any]) -> Dict[str, Any]:
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
        "interpreter": sys.executable,  # which Python ran the cell: a venv's, an image's, a machine's own
        "executor": os.environ.get("ROSETTA_EXECUTOR"),  # local (venvs), system (one interpreter), compose, …
        **cpu_facts(),
        "gpu_facts": gpu_facts(),
        **placement(),
        "os": platform.platform(),
        "image": os.environ.get("ROSETTA_IMAGE"),  # set by the Dockerfile: which image a containerized cell ran in
        "code_hash": os.environ.get(
            "ROSETTA_CODE_HASH"
        ),  # and the code it holds (scripts/launch/compose.py: code_hash)
        "build": buildinfo.cached(),  # what the environment carries: CUDA, cuDNN, NCCL, GPU kernels
    }
