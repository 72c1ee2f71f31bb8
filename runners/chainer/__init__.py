"""Chainer runners (chainer 7.8, CuPy on the GPU): device, precision and provenance shared by the four task modules.

Chainer is define-by-run on NumPy (CPU) or CuPy (GPU) arrays: a model is a `chainer.Chain` of links, an optimizer is
set up on it, and `optimizer.update(lossfun, x, t)` clears the gradients, runs forward and backward and updates, the
idiom of Chainer's own examples. The same code runs on either backend; a device object from `chainer.get_device`
('@numpy', '@cupy:N') moves models and batches.

This package is `runners.chainer`; `import chainer` inside it is the library (absolute imports), as `runners.jax`
imports JAX.
"""

import os

# Ampere and newer GPUs would run float32 cuDNN convolutions and cuBLAS matmuls in TF32 by default (cuDNN 8's default
# math mode, which CuPy and Chainer 7 do not override). Chainer has no TF32 switch, so fp32 cells turn it off the
# NVIDIA way, before CUDA's libraries load: the fp32 column stays float32. amp computes in float16 and is unaffected.
os.environ.setdefault("NVIDIA_TF32_OVERRIDE", "0")

import chainer
import chainer.links as L
import numpy as np
from chainer.backends import cuda

from shared import batching
from shared.record import GpuMissing, Skip

# Chainer's Adam divides by sqrt(v) + ε after folding the bias corrections into its step size α_t (chainer/optimizers/
# adam.py), i.e. ε is added before the bias correction, as Keras does; PyTorch and optax add it after.
ADAM_EPSILON_HAT = (
    "Adam ε added before bias correction (Chainer's α_t form, like Keras' epsilon-hat); PyTorch/optax add it after"
)


def _cupy():
    """The CuPy module, or None where it is not installed (a CPU-only environment)."""
    return cuda.cupy if cuda.available else None


def _device_count(cupy):
    try:
        return cupy.cuda.runtime.getDeviceCount()
    except cupy.cuda.runtime.CUDARuntimeError:  # no driver, or no device behind it
        return 0


def framework_info():
    cupy = _cupy()
    count = _device_count(cupy) if cupy is not None else 0
    return {
        "framework_version": chainer.__version__,
        "cupy_version": cupy.__version__ if cupy is not None else None,
        "numpy_version": np.__version__,
        "cuda": str(cupy.cuda.runtime.runtimeGetVersion()) if count else None,
        "cudnn": str(cupy.cuda.cudnn.getVersion()) if count and cuda.cudnn_enabled else None,
        "gpus": [cupy.cuda.runtime.getDeviceProperties(i)["name"].decode() for i in range(count)],
    }


# rosetta: device
def select_device(cfg, rank=0):
    """'@numpy' for a CPU cell, else '@cupy:rank'. A GPU cell without CuPy, or with fewer GPUs than asked, is a broken
    install or launch (status failed, so `--resume` retries it), never an unsupported combination."""
    if cfg.device == "cpu":
        return chainer.get_device("@numpy")
    asked = max(cfg.gpus, 1)
    cupy = _cupy()
    if cupy is None:
        raise GpuMissing(
            asked,
            0,
            f"Chainer {chainer.__version__} (CuPy is not importable: the image lacks its "
            f"cupy-cuda wheel or CUDA libraries)",
        )
    visible = _device_count(cupy)
    if visible < asked:
        raise GpuMissing(asked, visible, f"Chainer {chainer.__version__} with CuPy {cupy.__version__}")
    device = chainer.get_device(f"@cupy:{rank}")
    device.use()
    return device


# rosetta: barrier
def sync(device):
    """The clock's barrier: CuPy launches kernels asynchronously, so wait for the device before reading the time."""
    return device.device.synchronize if device.xp is not np else (lambda: None)


def gemm(cfg, n, dtype):
    """The calibration GEMM (shared/calibration.py): `F.matmul` on the cell's device (NumPy or CuPy)."""
    device = select_device(cfg)
    a = device.send(np.ones((n, n), dtype=dtype))
    return (lambda: chainer.functions.matmul(a, a)), sync(device)


def set_precision(precision, device):
    """Set Chainer's default dtype for `precision` and return whether the optimizer must scale the loss.

    fp32 is float32 throughout. amp is Chainer's `mixed16` mode: links create float16 parameters and compute in
    float16, BatchNormalization keeps float32 parameters and statistics, the optimizer keeps float32 master copies
    (`use_fp32_update`) and scales the loss dynamically (`loss_scaling`), so small gradients survive float16.
    Chainer 7 has no TF32 or bfloat16 mode.
    """
    # rosetta: precision
    gpu = device.xp is not np
    if precision in ("tf32", "bf16"):
        raise Skip(f"{precision}: Chainer {chainer.__version__} has no {precision} mode (float32 and mixed16 only)")
    if precision == "amp" and not gpu:
        raise Skip(
            "amp needs an NVIDIA GPU (float16 tensor cores); this cell runs on the CPU, where Chainer's "
            "mixed16 would compute in emulated float16"
        )
    chainer.global_config.dtype = chainer.mixed16 if precision == "amp" else np.float32
    return precision == "amp"


def setup_optimizer(optimizer, model, loss_scaling):
    """`optimizer.setup(model)`, with float32 master weights and dynamic loss scaling under mixed16."""
    optimizer.setup(model)
    if loss_scaling:
        optimizer.use_fp32_update()
        optimizer.loss_scaling()  # dynamic: start at 1, grow ×2 every 1,000 finite steps, halve on overflow
    return optimizer


def count_parameters(model):
    """Trainable parameters; BatchNormalization's avg_mean/avg_var are persistent values, not parameters."""
    return sum(p.size for p in model.params())


# torchvision's parameter names -> Chainer's, for links whose paths are torchvision's module names.
BATCHNORM_NAMES = {"weight": "gamma", "bias": "beta", "running_mean": "avg_mean", "running_var": "avg_var"}
LAYER_NAMES = {"weight": "W", "bias": "b"}


def load_torchvision_names(model, weights):
    """Load canonical weights (torchvision's state_dict names; conv OIHW and dense (out, in), which are Chainer's own
    layouts too) into a Chain whose attribute paths are torchvision's module names: `layer1.0.downsample.1.running_var`
    is `model.layer1[0].downsample[1].avg_var`. Strict like PyTorch's load_state_dict: a name the model lacks, a wrong
    shape, or a parameter or statistic left unloaded is an error."""
    loaded = set()
    for name, w in weights.items():
        *path, leaf = name.split(".")
        link = model
        for part in path:  # a number indexes a ChainList (chainer.Sequential)
            link = link[int(part)] if part.isdigit() else getattr(link, part)
        target = getattr(link, (BATCHNORM_NAMES if isinstance(link, L.BatchNormalization) else LAYER_NAMES)[leaf])
        array = target.array if isinstance(target, chainer.Variable) else target
        if array.shape != np.shape(w):
            raise ValueError(f"{name}: canonical shape {np.shape(w)}, model has {array.shape}")
        array[...] = link.xp.asarray(w, dtype=array.dtype)
        loaded.add(id(target))
    missing = [path for path, param in model.namedparams() if id(param) not in loaded]
    missing += [
        f"{path}/{attr}"
        for path, link in model.namedlinks()
        if isinstance(link, L.BatchNormalization)
        for attr in ("avg_mean", "avg_var")
        if id(getattr(link, attr)) not in loaded
    ]
    if missing:
        raise ValueError(f"canonical weights lack {len(missing)} of the model's arrays, e.g. {missing[:3]}")


def train_batches(x_train, y_train, batch_size, epoch, device, dtype=np.float32):
    """One epoch of (x, y) on `device` in the shared order: each batch is gathered where the data lives and sent to
    the device (a no-op for arrays already there); floating inputs are cast to the compute dtype (float16 under amp)."""
    for idx in batching.train_batches(len(x_train), batch_size, epoch):
        x, y = x_train[idx], y_train[idx]
        if x.dtype.kind == "f":
            x = x.astype(dtype, copy=False)
        yield device.send(x), device.send(y)
