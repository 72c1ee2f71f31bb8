"""A CUDA device synchronize that needs no framework, to check the frameworks' own barriers against.

The CUDA driver API through ctypes (libcuda.so.1, which every NVIDIA driver installs): `cuCtxSynchronize` in each
device's primary context, the context PyTorch, JAX, TensorFlow, CuPy and MXNet run their streams in. It returns
only when every stream of that context is idle, so called right after a framework's barrier it must return at once;
called instead of the barrier it waits for the queued work (scripts/gpu_check.py shows both). Only the contexts this
process already uses are touched: a CPU cell, or a process whose framework never started CUDA, gets None and no new
context (which would cost GPU memory). Runs on Python 3.6 like the rest of `shared`.
"""

import ctypes
import time
from typing import Any, List, Optional


class DeviceSync:
    """`sync()` waits for every stream of the primary contexts active in this process and returns the seconds it
    took. Use `DeviceSync.attach()`, which gives None where there is nothing to synchronize."""

    def __init__(self, cuda: Any, contexts: List[Any]) -> None:
        self.cuda, self.contexts = cuda, contexts

    @classmethod
    def attach(cls) -> Optional["DeviceSync"]:
        try:
            cuda = ctypes.CDLL("libcuda.so.1")
        except OSError:
            return None  # no NVIDIA driver on this host
        count = ctypes.c_int(0)
        if cuda.cuInit(0) != 0 or cuda.cuDeviceGetCount(ctypes.byref(count)) != 0:
            return None  # a driver but no usable device (or CUDA_VISIBLE_DEVICES empty)
        contexts = []
        for index in range(count.value):
            device, flags, active = ctypes.c_int(), ctypes.c_uint(), ctypes.c_int()
            if cuda.cuDeviceGet(ctypes.byref(device), index) != 0:
                continue
            if cuda.cuDevicePrimaryCtxGetState(device, ctypes.byref(flags), ctypes.byref(active)) or not active.value:
                continue  # this process never used the device: creating a context would not help
            context = ctypes.c_void_p()
            if cuda.cuDevicePrimaryCtxRetain(ctypes.byref(context), device) == 0:  # kept for the process's life
                contexts.append(context)
        return cls(cuda, contexts) if contexts else None

    def __call__(self):
        start = time.perf_counter()
        for context in self.contexts:
            self.cuda.cuCtxPushCurrent(context)
            error = self.cuda.cuCtxSynchronize()
            self.cuda.cuCtxPopCurrent(ctypes.byref(ctypes.c_void_p()))
            if error:
                raise RuntimeError(f"cuCtxSynchronize failed with CUDA error {error}")
        return time.perf_counter() - start


_attached = []  # type: list


def device_sync() -> Optional[DeviceSync]:
    """The process's DeviceSync, attached on first use once the framework has started CUDA (None before, and on a
    host or cell without one). Attaching is retried until it succeeds: a framework starts CUDA lazily."""
    if not _attached:
        sync = DeviceSync.attach()
        if sync is None:
            return None
        _attached.append(sync)
    return _attached[0]
