"""The device's own limit: one denominator per machine for a cell's efficiency (docs/design.md, "Trust").

A GPU's peak is its vendor's published dense rate for the precision the cell computes in (no structured sparsity),
from the datasheets below; a CPU's is usable cores × clock × FMA units × vector width, from the record's own facts
(shared.sysinfo.cpu_facts). The framework's own calibration GEMM (shared.calibration) stays a second, labelled
figure ("of its own GEMM"): it says how much of what that framework can reach on the device a model used, not how
much of the device. Either share above 100 % is implausible (a clock that stops early, a peak that does not apply) and
is flagged, never shown as an efficiency. Runs on Python 3.6 like the rest of `shared`.
"""

import math
import re
from typing import Any, Dict, List, Mapping, Optional, Tuple

TFLOPS = 1e12
# Dense peaks in TFLOP/s: fp32 on the CUDA cores, tf32/bf16/fp16 on the tensor cores (amp = fp16), from NVIDIA's
# datasheets (H100/H200: "NVIDIA H100 Tensor Core GPU" and "H200" datasheets, SXM form factor; A100: "NVIDIA A100
# Tensor Core GPU" (SXM4 and PCIe alike); V100: "NVIDIA Tesla V100" (SXM2, PCIe); T4, L4, A10: their datasheets).
# The datasheets print the tensor rates with sparsity; these are half of those. None: the GPU has no such unit.
GPU_PEAKS = (  # (pattern on the slugged nvidia-smi name, {precision: TFLOP/s}), first match wins
    (r"h200", {"fp32": 67.0, "tf32": 494.7, "bf16": 989.4, "amp": 989.4}),
    (r"h100-pcie", {"fp32": 51.0, "tf32": 378.0, "bf16": 756.0, "amp": 756.0}),
    (r"h100-(sxm|80gb-hbm3)", {"fp32": 67.0, "tf32": 494.7, "bf16": 989.4, "amp": 989.4}),
    (r"a100", {"fp32": 19.5, "tf32": 156.0, "bf16": 312.0, "amp": 312.0}),
    (r"v100-sxm2", {"fp32": 15.7, "tf32": None, "bf16": None, "amp": 125.0}),
    (r"v100-pcie", {"fp32": 14.0, "tf32": None, "bf16": None, "amp": 112.0}),
    (r"(^|-)t4($|-)", {"fp32": 8.1, "tf32": None, "bf16": None, "amp": 65.0}),
    (r"(^|-)l4($|-)", {"fp32": 30.3, "tf32": 60.0, "bf16": 121.0, "amp": 121.0}),
    (r"(^|-)a10($|-)", {"fp32": 31.2, "tf32": 62.5, "bf16": 125.0, "amp": 125.0}),
)
# FLOPs a CPU core retires per cycle in fp32 = FMA units × lanes × 2, where the flags alone would say more than the
# core does: Zen 2-4 (AMD family 23 from model 0x30, family 25) run AVX-512 (Zen 4) on two 256-bit FMA pipes.
CPU_CORE_FLOPS = (  # (vendor, family, lowest model, FLOP/cycle in fp32)
    ("AuthenticAMD", 25, 0, 2 * 8 * 2),
    ("AuthenticAMD", 23, 0x30, 2 * 8 * 2),
)


def slug(text: Any) -> str:
    return re.sub(r"[^a-z0-9]+", "-", str(text).lower()).strip("-")


def gpu_peak(name: str, precision: str) -> Optional[float]:
    """The published dense FLOP/s of one GPU named `name` (as nvidia-smi says it) in `precision`, or None where the
    table has no such GPU or the GPU no such unit."""
    key = slug(name)
    for pattern, peaks in GPU_PEAKS:
        if re.search(pattern, key):
            value = peaks.get(precision)
            return value * TFLOPS if value else None
    return None


def number(text: Any) -> Optional[float]:
    try:
        return int(str(text), 0) if not isinstance(text, (int, float)) else text
    except ValueError:
        return None


def positive(value: Any) -> Optional[float]:
    """`value` as a float where it is a finite number above 0, else None: a fact a record left out, wrote as null or
    as another type (a clock of "fast") gives no peak, never an error (the schema refuses such a record; this is the
    second line)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        value = float(value)
    except OverflowError:  # an integer beyond a float's range
        return None
    return value if math.isfinite(value) and value > 0 else None


def cpu_flags(system: Mapping[str, Any]) -> List[str]:
    """The record's CPU flags: [] where it has none or something other than a list of them."""
    flags = system.get("cpu_flags")
    return [f for f in flags if isinstance(f, str)] if isinstance(flags, list) else []


def clock_and_cores(system: Mapping[str, Any]) -> Tuple[Optional[float], Optional[float]]:
    """(MHz, usable cores) from the record's facts, each None where it has no usable one: the kernel's maximum clock
    where it reports one, else the clock it reports; the usable cores, else all of them."""
    return (
        positive(system.get("cpu_max_mhz")) or positive(system.get("cpu_mhz")),
        positive(system.get("cpu_usable")) or positive(system.get("cpu_count")),
    )


def cpu_flops_per_cycle(system: Mapping[str, Any]) -> int:
    """fp32 FLOPs a core retires per cycle: the generation table, else two FMA units of the widest vector the flags
    name (AVX-512: 16 lanes, AVX2/FMA: 8, else 4): an upper bound for a core with one FMA unit."""
    family, model = number(system.get("cpu_family")), number(system.get("cpu_model_number"))
    for vendor, fam, lowest, per_cycle in CPU_CORE_FLOPS:
        if system.get("cpu_vendor") == vendor and family == fam and model is not None and model >= lowest:
            return per_cycle
    flags = set(cpu_flags(system))
    lanes = 16 if "avx512f" in flags else 8 if ("avx2" in flags or "fma" in flags) else 4
    return 2 * lanes * 2


def cpu_peak(system: Mapping[str, Any], precision: str = "fp32") -> Optional[float]:
    """Usable cores × clock × fp32 FLOPs per cycle (×2 for bf16 where the core has AVX-512 BF16's dot product), from
    the record's facts; the clock is the kernel's maximum (cpufreq) where it reports one, else the clock it reports
    (`cpu MHz`: a VM's nominal clock, which boost may pass: then cells show as implausible). None without a clock
    (records made before the clock facts) or for a precision the core has no faster unit for (amp)."""
    mhz, cores = clock_and_cores(system)
    if not mhz or not cores or precision not in ("fp32", "tf32", "bf16"):
        return None
    factor = 2 if precision == "bf16" and "avx512_bf16" in cpu_flags(system) else 1
    if precision == "bf16" and factor == 1:
        return None
    peak = cores * mhz * 1e6 * cpu_flops_per_cycle(system) * factor
    return peak if math.isfinite(peak) else None


def device_peak(
    system: Mapping[str, Any], device: str, precision: str, devices: int = 1, measured: Optional[float] = None
) -> Tuple[Optional[float], str]:
    """(peak FLOP/s of the cell's devices, in words where it comes from) or (None, why not). `measured`: the best
    GEMM rate any cell measured on this machine in the cell's compute precision; a CPU's peak is never below it. A
    VM reports its nominal clock (`cpu MHz`, no cpufreq maximum), which boost passes: 114 of 147 CPU reference records
    measured a GEMM above the peak of that clock, and their fastest cells read as "implausible"."""
    if not isinstance(system, Mapping):
        system = {}
    if device == "gpu":
        facts, gpus = system.get("gpu_facts"), system.get("gpus")
        first = facts[0] if isinstance(facts, list) and facts and isinstance(facts[0], Mapping) else {}
        named = [first.get("name"), *(gpus[:1] if isinstance(gpus, list) else [])]
        name = next((n for n in named if isinstance(n, str) and n), None)
        peak = gpu_peak(name, precision) if name else None
        return (
            (peak * devices, f"{name} datasheet, dense {precision}")
            if peak
            else (None, f"no published {precision} peak for {name or 'this GPU'} in shared/peaks.py")
        )
    peak = cpu_peak(system, precision)
    mhz, cores = clock_and_cores(system)
    if not peak:
        if not mhz:
            return None, "no CPU clock in the record"
        return None, "no CPU core count in the record" if not cores else f"no {precision} unit on this CPU"
    clock = "max" if positive(system.get("cpu_max_mhz")) else "reported"
    words = f"{cores:g} cores × {mhz:g} MHz ({clock}) × {cpu_flops_per_cycle(system)} FLOP/cycle"
    best = positive(measured)
    if best and best > peak:
        return best, f"the best GEMM measured on this machine, {best / 1e9:.0f} GFLOP/s, above {words}"
    return peak, words


def shares(achieved: Optional[float], peak: Optional[float], gemm: Optional[float]) -> Dict[str, Any]:
    """{efficiency (of the device's peak), efficiency_of_gemm (of its own GEMM), implausible: [words]}: a share of
    the peak above 1 is named in `implausible` and not given as an efficiency (None): no kernel passes the device's
    limit, so the clock or the work is wrong. A share of its own GEMM above 1 is given as it is: a model's kernels
    may beat one square GEMM of the framework (TensorFlow's CNN ran at 131 % of its 1024² GEMM on two Zen 4 cores)."""
    out: Dict[str, Any] = {"efficiency": None, "efficiency_of_gemm": None}
    implausible: List[str] = []
    got = positive(achieved)
    bottom = positive(peak)
    if got and bottom:
        share = got / bottom
        if share > 1:
            implausible.append(f"{share:.0%} of the device's peak")
        else:
            out["efficiency"] = share
    own = positive(gemm)
    if got and own:
        out["efficiency_of_gemm"] = got / own
    out["implausible"] = implausible
    return out
