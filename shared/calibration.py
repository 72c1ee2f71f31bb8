"""How fast this device can go, measured in the cell's own framework right after the cell: a fixed square GEMM in
fp32 (and in the cell's reduced precision where it has one: TF32 for a tf32 cell, never counted as fp32), a host
memory-bandwidth probe on the CPU, and on a GPU the host-to-device copy from pinned and from pageable memory (every GPU
cell copies its batches inside the clock); a few seconds at most. After, not before: TensorFlow and JAX fix their
logical devices when their runtime starts, which a GEMM would do before the cell splits the CPU into devices; and the
device is warm by then. The record keeps it
(`system.calibration`) and each ok cell's achieved FLOP/s is reported as a share of the device's peak
(`metrics.efficiency`, shared/peaks.py: one denominator per machine) and of this GEMM rate
(`metrics.efficiency_of_gemm`, "of its own GEMM"): which framework leaves the machine idle, and by how much.

A runner package offers `gemm(cfg, n, dtype) -> (matmul, barrier)`: `matmul()` queues one n×n by n×n product of
`dtype` on the cell's device ("tfloat32": float32 storage, TF32 products; "float32": TF32 off, whatever the cell
set), `barrier()` waits for it; and on a GPU `device_copy(cfg, nbytes, pinned) -> (copy, barrier)`: `copy()` queues
one host-to-device copy of `nbytes` from pinned (page-locked) or pageable host memory. Runs on Python 3.6 like the
rest of `shared`.
"""

import statistics
import time
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Mapping, Optional

import numpy as np

from shared import flops, peaks

if TYPE_CHECKING:  # shared.runner imports this module
    from shared.runner import RunConfig

N = 1024  # the GEMM's size: big enough to reach a device's rate on the CPU, seconds at most everywhere
N_GPU = 8192  # … and on a GPU, where 1024² is far too small: on an H200 it gave JAX 34 TFLOP/s in bf16, so
# ResNet-50 "used" 158 % of it (gpu-check, 2026-12-04); 8192² is ~1 TFLOP a product
CALLS = 4  # products per timed sample
SAMPLES = 5
REDUCED = {"amp": "float16", "bf16": "bfloat16", "tf32": "tfloat32"}  # the product a cell's kernels run
BANDWIDTH_BYTES = 64 * 2**20  # twice any CPU's last-level cache here (32 MiB), a quarter of the page faults of 256
COPY_BYTES = 64 * 2**20  # a host-to-device copy: larger than one batch of every task, a few ms on PCIe 5


def median_seconds(
    fn: Callable[[], Any], barrier: Callable[[], Any] = lambda: None, calls: int = 1, warm: int = 1
) -> float:
    """The median seconds of SAMPLES samples of `calls` calls of `fn` (a barrier closing each), after `warm` untimed
    calls: the one clock of every probe here."""
    for _ in range(warm):
        fn()
    barrier()
    times = []
    for _ in range(SAMPLES):
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        barrier()
        times.append(max(time.perf_counter() - start, 1e-9))
    return statistics.median(times)


def gemm_rate(matmul: Callable[[], Any], barrier: Callable[[], Any], n: int = N) -> float:
    """FLOP/s of `matmul` (n×n × n×n): two untimed calls, then the median of SAMPLES samples of CALLS calls."""
    return 2 * n**3 * CALLS / median_seconds(matmul, barrier, calls=CALLS, warm=2)


def host_bandwidth() -> float:
    """Bytes per second a copy of BANDWIDTH_BYTES moves in host memory (read + write), the median of five."""
    src = np.ones(BANDWIDTH_BYTES // 8)
    dst = np.empty_like(src)
    return 2 * BANDWIDTH_BYTES / median_seconds(lambda: np.copyto(dst, src))


def copy_rate(copy: Callable[[], Any], barrier: Callable[[], Any], nbytes: int = COPY_BYTES) -> float:
    """Bytes per second of `copy` (one host-to-device copy of `nbytes`): one untimed copy, then the median of five."""
    return nbytes / median_seconds(copy, barrier)


def device_copies(family: Any, cfg: "RunConfig") -> Dict[str, Any]:
    """{"h2d_pinned_bytes_per_s", "h2d_pageable_bytes_per_s"} on a GPU (None where the package cannot copy that way,
    with the reason in "h2d_note"); {} on the CPU, whose batches never leave host memory."""
    if cfg.device != "gpu":
        return {}
    block = {
        "h2d_pinned_bytes_per_s": None,
        "h2d_pageable_bytes_per_s": None,
        "h2d_bytes": COPY_BYTES,
        "h2d_note": None,
    }  # type: Dict[str, Any]
    if not hasattr(family, "device_copy"):
        block["h2d_note"] = "this runner package has no host-to-device copy probe"
        return block
    for kind, pinned in (("pinned", True), ("pageable", False)):
        try:
            block[f"h2d_{kind}_bytes_per_s"] = copy_rate(*family.device_copy(cfg, COPY_BYTES, pinned))
        except Exception as e:  # as for the GEMM: the cell keeps its result, the record says why
            block["h2d_note"] = f"{kind} copy failed: {type(e).__name__}: {e}"[:300]
    return block


def cpu_ceiling(system: Mapping[str, Any]) -> float:
    """An upper bound on a CPU's fp32 FLOP/s no GEMM can pass: usable cores × 5 GHz × two FMA units of the widest
    vector it has (AVX-512: 64 FLOP a cycle, AVX2: 32, else 16). A rate above it is a product that did not run
    (a cached graph, a lazy result never forced): recorded as implausible, never used."""
    flags = set(system.get("cpu_flags") or ())
    per_cycle = 64 if "avx512f" in flags else 32 if "avx2" in flags else 16
    return (system.get("cpu_usable") or system.get("cpu_count") or 1) * 5e9 * per_cycle


def calibrate(family: Any, cfg: "RunConfig", system: Mapping[str, Any]) -> Dict[str, Any]:
    """The `calibration` block of a record: the framework's GEMM rates and the host's copy bandwidth. Where the
    package offers no GEMM, or a dtype fails on this device, the value is None with the reason. `system`: the
    record's system block (its CPU facts bound a plausible rate)."""
    n = N_GPU if cfg.device == "gpu" else N
    block = {
        "gemm_n": n,
        "gemm_fp32_flops": None,
        "gemm_reduced_flops": None,
        "reduced_dtype": None,
        "host_copy_bytes_per_s": host_bandwidth() if cfg.device == "cpu" else None,
        "note": None,
    }  # type: Dict[str, Any]
    if not hasattr(family, "gemm"):
        block["note"] = "this runner package has no calibration GEMM"
        return block
    try:
        matmul, barrier = family.gemm(cfg, n, "float32")
        block["gemm_fp32_flops"] = gemm_rate(matmul, barrier, n)
    except Exception as e:  # a calibration that fails must not fail the cell: it says why instead
        block["note"] = f"fp32 GEMM failed: {type(e).__name__}: {e}"[:300]
    ceiling = cpu_ceiling(system) if cfg.device == "cpu" else None
    if ceiling and (block["gemm_fp32_flops"] or 0) > ceiling:
        block["note"] = (
            f"implausible fp32 GEMM rate {block['gemm_fp32_flops'] / 1e9:.0f} GFLOP/s, above this CPU's "
            f"ceiling of {ceiling / 1e9:.0f}: the product did not run each time (a cached graph?)"
        )
        block["gemm_fp32_flops"] = None
    dtype = REDUCED.get(cfg.precision)
    if dtype:
        block["reduced_dtype"] = dtype
        try:
            matmul, barrier = family.gemm(cfg, n, dtype)
            block["gemm_reduced_flops"] = gemm_rate(matmul, barrier, n)
        except Exception as e:
            block["note"] = f"{dtype} GEMM failed: {type(e).__name__}: {e}"[:300]
    return {**block, **device_copies(family, cfg)}


def outdated(calibration: Optional[Mapping[str, Any]], device: str, precision: str) -> List[str]:
    """How a record's calibration differs from what `calibrate` measures today, in size or precision ([] where it
    does not): ['1024² GEMMs, now 8192²', 'tf32 calibrated as float32, now tfloat32']. Efficiencies over another
    calibration are not today's: the README, the site and verify say so instead of comparing them."""
    if not calibration:
        return ["no calibration recorded"]
    why = []
    n = N_GPU if device == "gpu" else N
    if calibration.get("gemm_n") != n:
        why.append("{}² GEMMs, now {}²".format(calibration.get("gemm_n"), n))
    want = REDUCED.get(precision)
    if calibration.get("reduced_dtype") != want:
        had = calibration.get("reduced_dtype") or "float32"
        why.append("{} calibrated as {}, now {}".format(precision, had, want or "float32"))
    return why


def efficiency(
    cfg: "RunConfig",
    metrics: Mapping[str, Any],
    calibration: Optional[Mapping[str, Any]],
    system: Optional[Mapping[str, Any]] = None,
) -> Dict[str, Any]:
    """{model_flops_per_sample, achieved_flops, peak_flops, peak_source, efficiency, efficiency_of_gemm,
    implausible}: the cell's steady-state FLOP/s, its share of the device's peak for the cell's precision (one
    denominator per machine: shared.peaks, from `system`, the record's facts) and, as a second figure, of the
    framework's own calibrated GEMM rate of its compute dtype (times the devices on a GPU; CPU 'devices' share the
    same cores). A share above 100 % is named in `implausible` and not given."""
    per_sample = flops.per_sample(cfg.task, cfg.params)
    rate = metrics.get("steady_samples_per_second") or metrics.get("samples_per_second")
    if cfg.task == "resnet50" and metrics.get("images") and metrics.get("seconds_per_1000_images"):
        rate = 1000 / metrics["seconds_per_1000_images"]
    achieved = per_sample * rate if rate else None
    gemm = (calibration or {}).get("gemm_reduced_flops") or (calibration or {}).get("gemm_fp32_flops")
    devices = metrics.get("devices", 1) if cfg.device == "gpu" else 1
    # the cell's own GEMM is the best this record knows the machine can do (the report raises it to the machine's)
    peak, source = peaks.device_peak(system or {}, cfg.device, cfg.precision, devices, gemm)
    return {
        "model_flops_per_sample": per_sample,
        "achieved_flops": achieved,
        "peak_flops": peak,
        "peak_source": source,
        **peaks.shares(achieved, peak, gemm * devices if gemm else None),
    }
