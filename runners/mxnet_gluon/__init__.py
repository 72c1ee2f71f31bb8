"""MXNet Gluon runners (mxnet 1.9.1): contexts, precision and provenance shared by the four task modules (the
Module-API runners in runners/mxnet_module import them too: one MXNet install, two APIs).

Gluon in a sentence: write the network imperatively as `HybridBlock`s, debug it eagerly, then `hybridize()` it so
MXNet caches the graph and runs it as one symbolic program (seed lesson 15); train with `autograd.record()`,
`loss.backward()` and a `gluon.Trainer`. Every NDArray op is queued on MXNet's asynchronous engine: nothing in a
training loop waits for the device unless it asks for a value (`asnumpy()`, `asscalar()`, lesson 13), so the clock
edges call `mx.nd.waitall()` (lesson 14).
"""

import re
from importlib import metadata

import mxnet as mx
import numpy as np

from shared import batching
from shared.record import GpuMissing, Skip

# Glorot/Xavier uniform, Keras' and the canonical CNN's kernel initializer (seed lesson 7): U(±√(6/(fan_in+fan_out))).
GLOROT_UNIFORM = mx.init.Xavier(rnd_type="uniform", factor_type="avg", magnitude=3)
# MXNet's Adam folds the bias corrections into the step size, lr·√(1-β2ᵗ)/(1-β1ᵗ), and adds ε to √v itself: Kingma
# & Ba's "ε-hat" form (as Keras does). PyTorch and optax add ε after the correction. Recorded in `differences`.
ADAM_EPSILON_HAT = (
    "Adam ε added before bias correction (MXNet's epsilon-hat form, like Keras; PyTorch/optax add it after)"
)
# amp's dynamic loss scaler (mxnet.contrib.amp, set up by amp.init_trainer) reads its overflow check back to the host
# before every update (lesson 13: asking for a value waits for the engine), a sync MXNet imposes. In `differences`.
AMP_HOST_SYNC = "amp: MXNet's loss scaler reads its overflow check on the host every step (a sync MXNet imposes)"


def wheel_cuda():
    """The CUDA version the installed wheel was built for, read from its name (`mxnet-cu112` -> "11.2"): MXNet 1.x has
    no runtime query for it. None for the CPU wheel."""
    for dist in metadata.distributions():
        match = re.fullmatch(r"mxnet-cu(\d+)(\d)", dist.metadata["Name"] or "")
        if match:
            return f"{match[1]}.{match[2]}"
    return None


def framework_info():
    features = mx.runtime.Features()
    cuda = features.is_enabled("CUDA")
    return {
        "framework_version": mx.__version__,
        "cuda": wheel_cuda() if cuda else None,
        "cudnn": ("built in" if features.is_enabled("CUDNN") else None) if cuda else None,  # 1.x has no version query
        "mkldnn": features.is_enabled("MKLDNN"),
        "gpus": [
            f"gpu({i}) sm_{mx.util.get_cuda_compute_capability(mx.gpu(i))}"  # no device-name query in 1.x
            for i in range(mx.context.num_gpus())
        ]
        if cuda
        else [],
    }


# rosetta: device
def contexts(cfg):
    """The cell's contexts: `cfg.gpus` GPUs, or as many CPU contexts on the CPU, so a data-parallel cell on the CPU
    splits each batch over `mx.cpu(0)`, `mx.cpu(1)`, … in one process and runs the same multi-device code. Too few
    visible GPUs is a broken install or launch (status failed, so `--resume` retries it)."""
    n = max(cfg.gpus, 1)
    if cfg.device == "cpu":
        return [mx.cpu(i) for i in range(n)]
    visible = mx.context.num_gpus()
    if visible < n:
        raise GpuMissing(n, visible, f"MXNet {mx.__version__} (CUDA build: {mx.runtime.Features().is_enabled('CUDA')})")
    return [mx.gpu(i) for i in range(n)]


# rosetta: barrier
def sync():
    """The clock's barrier: wait until MXNet's engine has finished every queued operation (seed lesson 14)."""
    return mx.nd.waitall


def gemm(cfg, n, dtype):
    """The calibration GEMM (shared/calibration.py): `nd.dot` on the cell's first context; the engine's waitall is
    the barrier."""
    a = mx.nd.ones((n, n), ctx=contexts(cfg)[0], dtype=dtype)
    return (lambda: mx.nd.dot(a, a)), sync()


def check_precision(precision, ctx):
    """Skip what MXNet cannot do here; returns True where mixed precision (mxnet.contrib.amp, float16 with dynamic
    loss scaling) is on. MXNet 1.9 has no TF32 switch and no bf16 GPU path; amp needs a GPU's float16 kernels (its CPU
    mode is bf16 through MKL-DNN, which is not this matrix's amp)."""
    gpu = ctx.device_type == "gpu"
    if precision in ("tf32", "amp") and not gpu:
        raise Skip(f"{precision} needs an NVIDIA GPU (tensor cores); this cell runs on the CPU")
    if precision in ("tf32", "bf16"):
        raise Skip(
            f"MXNet {mx.__version__} has no {precision} mode on {'GPUs' if gpu else 'this device'} "
            "(its amp is float16; bf16 exists only for MKL-DNN CPU inference)"
        )
    return precision == "amp"


def count_parameters(net):
    """Trainable parameters; BatchNorm's running statistics have grad_req 'null' and are not counted."""
    return sum(int(np.prod(p.shape)) for p in net.collect_params().values() if p.grad_req != "null")


# torchvision's BatchNorm names -> Gluon's; conv and dense layers keep `weight`/`bias` and the same layouts (conv OIHW,
# dense (out, in)), because MXNet, like PyTorch, is channels-first and stores dense weights as (units, in_units).
BATCHNORM_NAMES = {"weight": "gamma", "bias": "beta", "running_mean": "running_mean", "running_var": "running_var"}


def gluon_name(name, batchnorms):
    """A canonical (torchvision) name -> the Gluon structural name of the same parameter: `layer1.0.bn1.weight` ->
    `layer1.0.bn1.gamma` where `layer1.0.bn1` is a BatchNorm (`batchnorms`: the set of their structural prefixes)."""
    prefix, leaf = name.rsplit(".", 1)
    return f"{prefix}.{BATCHNORM_NAMES[leaf]}" if prefix in batchnorms else name


def load_structural(net, weights):
    """Load `weights` (structural name -> array) strictly into an initialized `net`: every parameter set, no name left
    over, shapes checked; `set_data` copies each array to every context the parameter lives on. Structural names are
    the ones `save_parameters`/`load_parameters` use (attribute paths such as `layer1.0.conv1.weight`)."""
    params = net._collect_params_with_prefix()  # save_parameters' name map (Gluon 1.x has no public one)
    missing, extra = sorted(set(params) - set(weights)), sorted(set(weights) - set(params))
    if missing or extra:
        raise ValueError(f"canonical weights and the Gluon model differ: missing {missing[:3]}, unexpected {extra[:3]}")
    for name, w in weights.items():
        if tuple(params[name].shape) != np.shape(w):
            raise ValueError(f"{name}: canonical shape {np.shape(w)}, model has {params[name].shape}")
        params[name].set_data(mx.nd.array(np.asarray(w, np.float32)))


def read_structural(net):
    """Every parameter of `net` as a NumPy array by structural name (load_structural's inverse)."""
    return {name: param.data().asnumpy() for name, param in net._collect_params_with_prefix().items()}


def load_torchvision_names(net, weights):
    """Load canonical weights whose names are torchvision's into a Gluon network built with torchvision's module names
    (resnet50, densenet121): only BatchNorm's leaves are renamed (γ, β)."""
    batchnorms = {name for name, block in named_blocks(net) if isinstance(block, mx.gluon.nn.BatchNorm)}
    load_structural(net, {gluon_name(name, batchnorms): w for name, w in weights.items()})


def named_blocks(block, prefix=""):
    """(structural name, block) for `block` and every block under it, like PyTorch's named_modules()."""
    yield prefix, block
    for name, child in block._children.items():
        yield from named_blocks(child, f"{prefix}.{name}" if prefix else name)


def train_batches(x_train, y_train, batch_size, epoch):
    """One epoch of (x, y) NDArrays in the shared order, gathered (`take`) where the training set lives: in host memory
    under shared.params' "host" placement, where MXNet's engine gathers the next batch asynchronously while the device
    still runs the previous step; the train step copies it to its context inside the clock."""
    for idx in batching.train_batches(len(x_train), batch_size, epoch):
        idx = mx.nd.array(idx, ctx=x_train.context, dtype="int32")
        yield x_train.take(idx), y_train.take(idx)


def named_sequential(*named_blocks_):
    """A HybridSequential whose children carry names instead of 0, 1, 2 (PyTorch's `nn.Sequential(OrderedDict(…))`),
    so that structural parameter names become torchvision's (`features.denseblock1.denselayer1.norm1.gamma`). It runs
    its children in the order given, like any HybridSequential."""
    seq = mx.gluon.nn.HybridSequential()
    for name, block in named_blocks_:
        seq.register_child(block, name)
    return seq


def batchnorm(channels):
    """torchvision's BatchNorm: ε = 1e-5, and Gluon's momentum 0.9 (keep 90% of the running value) is PyTorch's 0.1."""
    return mx.gluon.nn.BatchNorm(momentum=0.9, epsilon=1e-5, in_channels=channels)
