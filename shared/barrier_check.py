"""The barrier self-test: does a framework's barrier wait for the device's queued work? (`python -m runners
--barrier-check FRAMEWORK`, run by `make gpu-check` for every framework its interpreter holds.)

Three measurements on the cell's first GPU, each after queuing the same long device operation (PRODUCTS products of
N×N floats through the runner package's calibration `gemm`, whose barrier is the one its clock uses; few and large,
because XLA blocks the dispatch of more than a few dozen computations in flight: on an H200, 64 products of 4096²
left only the last 10 ms for JAX's barrier to wait for, `queue_seconds` shows it):
    barrier   the framework's barrier alone: about the operation's time
    after     a CUDA device synchronize (shared/devsync.py) right after the barrier: about nothing
    control   a device synchronize instead of the barrier: about the operation's time again, which proves the
              synchronize sees the framework's streams (else `after` would pass for any barrier)
A barrier passes when `after` is within LEAK_SECONDS or LEAK_SHARE of `barrier` and `control` is at least half of it.
Without a GPU the check is skipped with the reason. Runs on Python 3.6 like the rest of `shared`.
"""

import time
from pathlib import Path
from typing import Any, Callable, Dict

from shared.devsync import device_sync
from shared.runner import RunConfig
from shared.timing import LEAK_SECONDS, LEAK_SHARE

N = 8192
PRODUCTS = 16  # 17.6 TFLOP: a third of a second on an H200 in fp32, long enough to see a leak


def timed(fn: Callable[[], Any]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def check(framework: str, family: Any, device: str = "gpu") -> Dict[str, Any]:
    """The self-test's result: status ok / failed / skipped with the three times and the reason."""
    result: Dict[str, Any] = {
        "framework": framework,
        "status": "skipped",
        "reason": None,
        "n": N,
        "products": PRODUCTS,
        "queue_seconds": None,
        "barrier_seconds": None,
        "after_seconds": None,
        "control_seconds": None,
    }
    if device != "gpu":
        result["reason"] = "the barrier self-test checks GPU barriers; this cell runs on the CPU"
        return result
    if not hasattr(family, "gemm"):
        result["reason"] = f"runners for {framework} offer no calibration GEMM to queue device work with"
        return result
    cfg = RunConfig(framework=framework, task="cnn", data=Path("."), out=Path("."), device="gpu")
    try:
        matmul, barrier = family.gemm(cfg, N, "float32")
    except Exception as e:  # no GPU for this framework: GpuMissing and the like say why
        result["reason"] = f"no GPU for {framework}: {type(e).__name__}: {e}"[:300]
        return result
    matmul()
    barrier()  # compile, autotune, allocate: outside every measurement
    sync = device_sync()
    if sync is None:
        result["reason"] = "no CUDA context in this process after the framework's GPU work (libcuda.so.1 missing?)"
        return result

    def queue():
        for _ in range(PRODUCTS):
            matmul()

    result["queue_seconds"] = timed(queue)
    result["barrier_seconds"] = timed(barrier)
    result["after_seconds"] = sync()
    queue()
    result["control_seconds"] = sync()
    barrier()
    leaked = result["after_seconds"] > max(LEAK_SECONDS, LEAK_SHARE * result["barrier_seconds"])
    blind = result["control_seconds"] < 0.5 * result["barrier_seconds"]
    result["status"] = "failed" if leaked or blind else "ok"
    if leaked:
        result["reason"] = (
            f"a device synchronize after the barrier still waited {result['after_seconds']:.4f} s "
            f"(the barrier took {result['barrier_seconds']:.4f} s): the barrier returns before the "
            "queued work ends, so the clock stops early"
        )
    elif blind:
        result["reason"] = (
            f"the device synchronize alone waited {result['control_seconds']:.4f} s for work the "
            f"barrier waited {result['barrier_seconds']:.4f} s for: it does not see this framework's "
            "streams, so the check proves nothing"
        )
    return result
