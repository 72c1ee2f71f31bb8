"""Toy runners (NumPy 2.4 alone): device, precision, calibration and provenance for the task modules.

A test fixture (tests/test_contributing.py), not a benchmarked framework: NumPy computes on the CPU, synchronously,
in float32, so the device, precision and barrier concepts are what it does instead (docs/style.md).
"""

import numpy as np

from shared.record import GpuMissing, Skip


def framework_info():
    return {"framework_version": np.__version__, "cuda": None, "cudnn": None, "gpus": []}


# rosetta: device
def select_device(cfg):
    """NumPy has one device, the CPU: a GPU cell is a launch that cannot be honoured (failed, never skipped)."""
    if cfg.device != "cpu":
        raise GpuMissing(max(cfg.gpus, 1), 0, "NumPy " + np.__version__)
    return "cpu"


def set_precision(precision):
    """The compute dtype: NumPy's float32; every reduced precision is a combination NumPy cannot run (skipped)."""
    if precision != "fp32":
        raise Skip(precision + ": NumPy has no tensor cores or mixed precision; the toy runs fp32 only")
    # rosetta: precision
    return np.float32


# rosetta: barrier
def sync(device):
    """The clock's barrier: NumPy returns when its work is done, so there is nothing queued to wait for."""
    return lambda: None


def gemm(cfg, n, dtype):
    """The calibration GEMM (shared/calibration.py): an n×n product of float32 on the CPU, and its barrier."""
    select_device(cfg)
    if dtype != "float32":
        raise Skip(dtype + ": NumPy multiplies float32 and float64 only")
    a = np.random.default_rng(0).random((n, n), dtype=np.float32)
    return (lambda: a @ a), sync("cpu")


def count_parameters(model):
    """Every weight and bias of the model's canonical arrays."""
    return sum(int(w.size) for w in model.weights.values())
