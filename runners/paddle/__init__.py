"""PaddlePaddle runners (paddle 3.3, dygraph): device, precision and provenance shared by the four task modules.

Every task is written the way Paddle's own docs write dygraph training: a `paddle.nn.Layer`, a `paddle.optimizer`
built over `model.parameters()`, and a step of `loss.backward()`, `optimizer.step()`, `optimizer.clear_grad()`.
Paddle's tensors and layers take their device from `paddle.set_device`, so there is no `.to(device)` anywhere.
"""

import contextlib

import numpy as np
import paddle

from shared import batching
from shared.record import GpuMissing, Skip

# GradScaler._update tests its inf/NaN flag with a Python `if` (paddle/amp/grad_scaler.py), which reads it back to the
# host: under amp every step waits for the device there, a sync Paddle imposes and the report footnotes.
AMP_HOST_SYNC = "amp: GradScaler reads its inf/NaN check on the host every step (a sync Paddle imposes)"
# Paddle's automatic mixed precision is enabled on CUDA, XPU and custom places only: on the CPU `auto_cast` warns and
# runs float32 (paddle/amp/auto_cast.py), which would time fp32 under the bf16 label.
CPU_BF16 = (
    "bf16 on the CPU: Paddle 3.3's paddle.amp.auto_cast is enabled on CUDA, XPU and custom devices only; on the CPU "
    "it runs float32 and says so, which would time fp32 under the bf16 label"
)


def gpu_count():
    return paddle.device.cuda.device_count() if paddle.is_compiled_with_cuda() else 0


def framework_info():
    gpus = gpu_count()
    return {
        "framework_version": paddle.__version__,
        "paddle_commit": paddle.version.commit,
        "cuda": paddle.version.cuda() if gpus else None,
        "cudnn": paddle.version.cudnn() if gpus else None,
        "gpus": [paddle.device.cuda.get_device_name(i) for i in range(gpus)],
        # streaming multiprocessors, which nvidia-smi does not report (shared/sysinfo.py: gpu_facts)
        "gpu_sm_counts": [paddle.device.cuda.get_device_properties(i).multi_processor_count for i in range(gpus)],
    }


# rosetta: device
def select_device(cfg, rank=0):
    """Make `gpu:rank` (a GPU cell) or the CPU Paddle's current place, where every new tensor and layer lives, and
    return it. Too few visible GPUs is a broken install or launch (status failed, so `--resume` retries it), never an
    unsupported combination: the CPU build of Paddle (PyPI's `paddlepaddle`) sees none."""
    if cfg.device == "cpu":
        return paddle.set_device("cpu")
    if gpu_count() < max(cfg.gpus, 1):
        raise GpuMissing(
            max(cfg.gpus, 1), gpu_count(), f"Paddle {paddle.__version__} (CUDA build: {paddle.is_compiled_with_cuda()})"
        )
    return paddle.set_device(f"gpu:{rank}")


# rosetta: barrier
def sync(place):
    """The clock's barrier: GPU kernels run asynchronously, so wait for the queued ones; CPU kernels run in the
    calling thread in dygraph, so the CPU's barrier waits for nothing."""
    return paddle.device.synchronize if place.is_gpu_place() else (lambda: None)


def gemm(cfg, n, dtype):
    """The calibration GEMM (shared/calibration.py): an n×n product of `dtype` on the cell's device, and its barrier.
    "tfloat32" is float32 on TF32 tensor cores; "float32" turns cuBLAS's TF32 off for its product (Paddle allows it
    by default)."""
    place = select_device(cfg)
    tf32 = dtype == "tfloat32"
    a = paddle.randn([n, n]).astype("float32" if tf32 else dtype)

    def matmul():
        if place.is_gpu_place():
            paddle.set_flags({"FLAGS_allow_tf32_cublas": tf32})
        return paddle.matmul(a, a)

    return matmul, sync(place)


def device_copy(cfg, nbytes, pinned):
    """The calibration's host-to-device copy (shared/calibration.py): `nbytes` from pinned or pageable host memory."""
    place = select_device(cfg)
    source = paddle.to_tensor(np.zeros(nbytes, np.uint8), place=paddle.CPUPlace())
    source = source.pin_memory() if pinned else source
    return (lambda: source.cuda(blocking=not pinned)), sync(place)


def set_precision(precision, place):
    """Configure matmul/conv precision and return (autocast context factory, GradScaler or None).

    Paddle lets cuBLAS use TF32 for float32 matmuls by default (FLAGS_allow_tf32_cublas), so fp32 turns it off
    explicitly and tf32 turns it on for cuBLAS and cuDNN; amp is float16 auto_cast (level O1: a white list of ops in
    float16, the rest float32) with dynamic loss scaling; bf16 is bfloat16 auto_cast, which needs no scaling.
    """
    gpu = place.is_gpu_place()
    if precision in ("tf32", "amp") and not gpu:
        raise Skip(f"{precision} needs an NVIDIA GPU (tensor cores); this cell runs on the CPU")
    if precision == "bf16" and not gpu:
        raise Skip(CPU_BF16)
    capability = paddle.device.cuda.get_device_capability() if gpu else None
    if precision in ("tf32", "bf16") and gpu and capability < (8, 0):
        raise Skip(
            f"{precision} needs an Ampere or newer GPU (compute capability 8.0+); "
            f"{paddle.device.cuda.get_device_name()} is {capability[0]}.{capability[1]}"
        )
    # rosetta: precision
    if gpu:
        tf32 = precision == "tf32"
        paddle.set_flags({"FLAGS_allow_tf32_cublas": tf32, "FLAGS_allow_tf32_cudnn": tf32})
    if precision in ("amp", "bf16"):
        dtype = "float16" if precision == "amp" else "bfloat16"
        autocast = lambda: paddle.amp.auto_cast(level="O1", dtype=dtype)
    else:
        autocast = contextlib.nullcontext
    scaler = paddle.amp.GradScaler() if precision == "amp" else None  # 2**16, doubled after 2,000 finite steps
    return autocast, scaler


def count_parameters(model):
    """Trainable parameters: BatchNorm's running mean and variance are parameters in Paddle too, but with
    stop_gradient set, so they are not counted (PyTorch's buffers)."""
    return sum(int(p.size) for p in model.parameters() if not p.stop_gradient)


# torchvision's BatchNorm statistics -> Paddle's names for them
STATISTICS = {"running_mean": "_mean", "running_var": "_variance"}


def paddle_name(name):
    """A canonical (torchvision) name in Paddle's spelling: only BatchNorm's statistics are named differently."""
    prefix, _, leaf = name.rpartition(".")
    return f"{prefix}.{STATISTICS.get(leaf, leaf)}"


def dense_names(model):
    """The parameter names of the model's Linear layers: their weight is (in, out) in Paddle, (out, in) canonically."""
    return {
        f"{layer_name}.{name}"
        for layer_name, layer in model.named_sublayers()
        if isinstance(layer, paddle.nn.Linear)
        for name, _ in layer.named_parameters()
    }


def same_name(name):
    """For the small networks written here: their layers carry the canonical names."""
    return name


def load_state(model, weights, rename=paddle_name):
    """Load canonical weights into `model` under the names `rename` gives. Layouts: conv kernels are OIHW in Paddle as
    in the canonical layout; a Linear's weight is (in, out) in Paddle, so dense kernels are transposed. Strict like
    PyTorch's load_state_dict: a name the model lacks, a wrong shape, or a parameter left unloaded is an error."""
    state, dense, ours = model.state_dict(), dense_names(model), {}
    for name, w in weights.items():
        key, w = rename(name), np.asarray(w, np.float32)
        if key not in state:
            raise KeyError(f"{name}: the model has no {key}")
        w = w.T if key in dense else w
        if tuple(state[key].shape) != w.shape:
            raise ValueError(f"{name}: canonical shape {np.shape(weights[name])}, {key} has {tuple(state[key].shape)}")
        ours[key] = w
    missing = [name for name, _ in model.named_parameters() if name not in ours]
    if missing:
        raise ValueError(f"canonical weights lack {len(missing)} of the model's parameters, e.g. {missing[:3]}")
    model.set_state_dict(ours)


def read_state(model, names, rename=paddle_name):
    """The model's arrays under their canonical names (dense kernels back to (out, in))."""
    state, dense, out = model.state_dict(), dense_names(model), {}
    for name in names:
        w = state[rename(name)].numpy().copy()
        out[name] = w.T if rename(name) in dense else w
    return out


def train_batches(x_train, y_train, batch_size, epoch):
    """One epoch of (x, y) in the shared order. Each batch is gathered where the data lives (paddle.gather on a
    tensor on the device, NumPy indexing in host memory) and made a tensor on the current place: a host→device copy on
    a GPU, a wrap of the gathered array on the CPU."""
    for idx in batching.train_batches(len(x_train), batch_size, epoch):
        if isinstance(x_train, paddle.Tensor):
            idx = paddle.to_tensor(idx)
            yield paddle.gather(x_train, idx), paddle.gather(y_train, idx)
        else:
            yield paddle.to_tensor(x_train[idx]), paddle.to_tensor(y_train[idx])
