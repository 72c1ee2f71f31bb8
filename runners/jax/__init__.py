"""JAX runners (jax 0.10, Flax NNX 0.12, optax 0.2): devices, precision and provenance shared by the four task modules.

Every task trains with Flax's "functional training loop": `nnx.split` the model and optimizer into a static graph
definition and a pytree of arrays once, then call a plain `jax.jit` step that merges, updates and splits again. That
is the loop the Flax docs recommend for speed (guides/performance: `nnx.jit` walks the object graph in Python on every
call; `jax.jit` over split state does that only while tracing).
"""

import argparse
import os
import sys


# XLA reads its flags once, when JAX first initializes a backend, so the stand-in devices of a data-parallel cell on the
# CPU (`--device cpu --gpus N`, docs/design.md, "The tasks": CPU processes or logical devices) must be requested before
# `import jax`. runners/__main__.py imports this package (through framework_info) before any task module and before
# anything touches JAX, so this is the one place that can do it without the generic runner knowing about XLA. We read
# just these two options from the runner's command line: parse_known_args ignores everything else and never fails (the
# test probe's argv has neither option, so nothing changes there). JAX_PLATFORMS=cpu keeps a `--device cpu` cell off a
# GPU that happens to be visible. Values a user already set in the environment win.
def _prepare_xla(argv):
    options = argparse.ArgumentParser(add_help=False)
    options.add_argument("--device")
    options.add_argument("--gpus", type=int, default=1)
    args, _ = options.parse_known_args(argv)
    if args.device != "cpu":
        return
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    flags = os.environ.get("XLA_FLAGS", "")
    if args.gpus > 1 and "xla_force_host_platform_device_count" not in flags:
        os.environ["XLA_FLAGS"] = f"{flags} --xla_force_host_platform_device_count={args.gpus}".strip()


if "jax" not in sys.modules:  # too late once JAX is imported; select_devices then fails with the reason
    _prepare_xla(sys.argv[1:])

import flax  # noqa: E402
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import jaxlib  # noqa: E402
import numpy as np  # noqa: E402
import optax  # noqa: E402
from flax import nnx  # noqa: E402

from shared import batching  # noqa: E402
from shared.record import GpuMissing, Skip  # noqa: E402


def _cuda_versions():
    """(cuda, cudnn) of the loaded CUDA plugin, or (None, None). JAX exposes them only through a private module (the
    one `jax.print_environment_info` uses), hence the guard."""
    try:
        from jax._src.lib import cuda_versions

        return str(cuda_versions.cuda_runtime_get_version()), str(cuda_versions.cudnn_get_version())
    except Exception:
        return None, None


def framework_info():
    gpu = jax.default_backend() == "gpu"
    cuda, cudnn = _cuda_versions() if gpu else (None, None)
    return {
        "framework_version": jax.__version__,
        "jaxlib_version": jaxlib.__version__,
        "flax_version": flax.__version__,
        "optax_version": optax.__version__,
        "backend": jax.default_backend(),
        "devices": [str(d) for d in jax.devices()],
        "cuda": cuda,
        "cudnn": cudnn,
        "gpus": [d.device_kind for d in jax.devices()] if gpu else [],
        "gpu_sm_counts": [getattr(d, "core_count", None) for d in jax.devices()] if gpu else [],  # nvidia-smi has none
    }


# rosetta: device
def select_devices(cfg, count=1):
    """The first `count` devices of the cell's platform. Fewer than asked is a broken install or launch (status
    failed, so `--resume` retries it), never an unsupported combination."""
    if cfg.device == "cpu":
        devices = jax.devices("cpu")
        if len(devices) < count:
            raise RuntimeError(
                f"{count} CPU devices asked for, {len(devices)} visible to JAX: XLA_FLAGS="
                f"--xla_force_host_platform_device_count={count} must be set before JAX is imported "
                "(`python -m runners` does it for `--device cpu --gpus N`)"
            )
        return devices[:count]
    try:
        devices = jax.devices("gpu")
    except RuntimeError:  # no GPU backend at all: a CPU-only jaxlib, or the CUDA plugin found no driver
        devices = []
    if len(devices) < count:
        raise GpuMissing(count, len(devices), f"JAX {jax.__version__} (backends: {jax.default_backend()})")
    return devices[:count]


def set_precision(precision, device):
    """Set matmul/conv precision and return (compute dtype, loss scale) for `precision`.

    Parameters stay float32 in every mode; Flax layers take the compute dtype (`dtype=`) and cast inputs and kernels to
    it, which is Flax's form of mixed precision. fp32 asks for "highest" explicitly, because XLA on NVIDIA GPUs may use
    TF32 for float32 matmuls and convolutions by default; tf32 asks for "tensorfloat32". amp is float16 compute with a
    dynamic loss scale (below), like torch.amp's GradScaler; bf16 needs no scaling (same exponent range as float32).
    """
    gpu = device.platform == "gpu"
    if precision in ("tf32", "amp") and not gpu:
        raise Skip(f"{precision} needs an NVIDIA GPU (tensor cores); this cell runs on the CPU")
    # XLA would run bf16 on a pre-Ampere GPU too, emulated through float32: not what a bf16 column promises.
    capability = getattr(device, "compute_capability", "0") if gpu else None
    if precision in ("tf32", "bf16") and gpu and float(capability) < 8:
        raise Skip(
            f"{precision} needs an Ampere or newer GPU (compute capability 8.0+); {device.device_kind} is {capability}"
        )
    # rosetta: precision
    jax.config.update("jax_default_matmul_precision", "tensorfloat32" if precision == "tf32" else "highest")
    dtype = {"amp": jnp.float16, "bf16": jnp.bfloat16}.get(precision, jnp.float32)
    return dtype, (DynamicLossScale() if precision == "amp" else LossScale())


class LossScale(nnx.Module):
    """No loss scaling (fp32, tf32, bf16): plain value-and-grad, so every train step has the same shape."""

    def value_and_grad(self, loss_fn, model):
        return nnx.value_and_grad(loss_fn)(model)

    def wrap(self, tx):
        return tx


class DynamicLossScale(LossScale):
    """float16 loss scaling for amp (optax has none built in): scale the loss so small gradients survive float16,
    unscale the gradients; on overflow halve the scale and skip the update (optax.apply_if_finite), after `period`
    finite steps double it. The defaults are torch.amp.GradScaler's (2**16, 2000), so both frameworks scale alike."""

    def __init__(self, scale=2.0**16, period=2000):
        self.scale = nnx.Variable(jnp.float32(scale))
        self.good_steps = nnx.Variable(jnp.int32(0))
        self.period = period

    def value_and_grad(self, loss_fn, model):
        scale = self.scale[...]
        scaled, grads = nnx.value_and_grad(lambda m: loss_fn(m) * scale)(model)
        grads = jax.tree.map(lambda g: g / scale, grads)
        finite = jnp.all(jnp.asarray([jnp.all(jnp.isfinite(g)) for g in jax.tree.leaves(grads)]))
        good = jnp.where(finite, self.good_steps[...] + 1, 0)
        grow = good >= self.period
        self.scale[...] = jnp.where(finite, jnp.where(grow, scale * 2, scale), scale / 2)
        self.good_steps[...] = jnp.where(grow, 0, good)
        return scaled / scale, grads

    def wrap(self, tx):
        return optax.apply_if_finite(tx, max_consecutive_errors=1_000_000)  # skip, never give up: the scale recovers


def count_parameters(model):
    """Trainable parameters (nnx.Param), like PyTorch's parameters(): BatchNorm running statistics are not counted."""
    return sum(x.size for x in jax.tree.leaves(nnx.state(model, nnx.Param)))


# torchvision's parameter names -> NNX's, for the BatchNorm and the conv/dense layers of load_torchvision_names.
BATCHNORM_NAMES = {"weight": "scale", "bias": "bias", "running_mean": "mean", "running_var": "var"}
LAYER_NAMES = {"weight": "kernel", "bias": "bias"}


def load_torchvision_names(model, weights):
    """Load canonical weights (torchvision's state_dict names and layouts) into an NNX model whose attribute paths
    are torchvision's module names: `layer1.0.downsample.1.running_var` is `model.layer1[0].downsample[1].var`.
    Layouts change on the way: conv kernels OIHW -> HWIO, dense (out, in) -> (in, out). Strict like PyTorch's
    load_state_dict: a name the model lacks, a wrong shape, or a parameter left unloaded is an error."""
    loaded = set()
    for name, w in weights.items():
        *path, leaf = name.split(".")
        module = model
        for part in path:  # a number indexes an nnx.List, as in nn.Sequential
            module = module[int(part)] if part.isdigit() else getattr(module, part)
        variable = getattr(module, (BATCHNORM_NAMES if isinstance(module, nnx.BatchNorm) else LAYER_NAMES)[leaf])
        w = np.asarray(w)
        w = w.transpose(2, 3, 1, 0) if w.ndim == 4 else w.T if w.ndim == 2 else w
        if variable.shape != w.shape:
            raise ValueError(f"{name}: canonical shape {np.shape(weights[name])}, model has {variable.shape}")
        variable.set_value(jnp.asarray(w))  # replaces the array: works on an abstract model too
        loaded.add(id(variable))
    missing = [
        ".".join(map(str, path))
        for path, node in nnx.iter_graph(model)
        if isinstance(node, (nnx.Param, nnx.BatchStat)) and id(node) not in loaded
    ]
    if missing:
        raise ValueError(f"canonical weights lack {len(missing)} of the model's variables, e.g. {missing[:3]}")


def train_batches(x_train, y_train, batch_size, epoch, device):
    """One epoch of (x, y) on `device` in the shared order. Each batch is gathered where the data lives (NumPy on the
    host, an XLA gather on the device) and put on the device; device_put is asynchronous, so the copy overlaps the
    steps still queued, and it is a no-op for a batch already there."""
    for idx in batching.train_batches(len(x_train), batch_size, epoch):
        yield jax.device_put((x_train[idx], y_train[idx]), device)


def train_chunks(x_train, y_train, batch_size, epoch, device, k):
    """The tuned input path: one epoch in the shared order as chunks of `k` batches stacked on a new leading axis
    (k, batch, …), each gathered where the data lives and put on the device at once: one copy and one dispatch per
    k steps (multi_step). The batches an epoch leaves over come one by one, as train_batches gives them."""
    order = list(batching.train_batches(len(x_train), batch_size, epoch))
    whole = len(order) - len(order) % k
    for start in range(0, whole, k):
        idx = np.concatenate(order[start : start + k])
        x, y = x_train[idx], y_train[idx]
        yield jax.device_put((x.reshape(k, batch_size, *x.shape[1:]), y.reshape(k, batch_size, *y.shape[1:])), device)
    for idx in order[whole:]:
        yield jax.device_put((x_train[idx], y_train[idx]), device)


def multi_step(train_step, donate=True):
    """The tuned step: `train_step` (pure: (state, x, y) -> (state, loss)) run over a chunk's k batches by lax.scan
    inside one XLA program, one dispatch for k steps; returns (state, the k losses)."""

    def steps(state, xs, ys):
        return jax.lax.scan(lambda carry, batch: train_step(carry, *batch), state, (xs, ys))

    return jax.jit(steps, donate_argnums=0 if donate else ())


class Stepper:
    """One call per item an epoch yields, holding the training state between calls: a batch through `train_step`,
    or, where the tuned `steps_per_dispatch` k > 1, a chunk of k batches through one multi-step program (labels
    (k, batch)). `batches(epoch)` gives what the epoch yields, `steps_of` how many steps an item is (timed_epochs)."""

    def __init__(self, make_train_step, graphdef, state, switches):
        self.state, self.k = state, switches["steps_per_dispatch"]
        self.train_step = make_train_step(graphdef, switches)
        self.chunk_step = (
            multi_step(make_train_step(graphdef, {**switches, "jit": False}), switches["donate"])
            if self.k > 1
            else None
        )

    def __call__(self, batch):
        self.state, loss = (self.chunk_step if self.steps_of(batch) > 1 else self.train_step)(self.state, *batch)
        return loss

    @staticmethod
    def steps_of(batch):
        return len(batch[1]) if batch[1].ndim == 2 else 1

    def batches(self, x_train, y_train, batch_size, device):
        if self.k > 1:
            return lambda epoch: train_chunks(x_train, y_train, batch_size, epoch, device, self.k)
        return lambda epoch: train_batches(x_train, y_train, batch_size, epoch, device)


def tuned_steps(chunk_step, state, objects, read_canonical, x, y, steps):
    """`train_steps` of a tuned cell (the training-equivalence test): step 1 as a chunk of one, the other steps as one
    chunk, through the multi-step program `chunk_step`; `objects` (model first) take each chunk's state. Returns (each
    step's loss, weights after each step: after step 1 and after the last; None between, which the scan keeps)."""
    losses, after = [], []
    for n in (1, steps - 1):
        if n < 1:
            continue
        xs, ys = (jnp.broadcast_to(a, (n, *a.shape)) for a in (jnp.asarray(x), jnp.asarray(y)))
        state, chunk_losses = chunk_step(state, xs, ys)
        nnx.update(objects, state)
        losses += [float(v) for v in np.ravel(chunk_losses)]
        after += [None] * (n - 1) + [read_canonical(objects[0])]
    return losses, after


def gemm(cfg, n, dtype):
    """The calibration GEMM (shared/calibration.py): a jitted n×n product on the cell's first device. "tfloat32" is
    float32 at TF32 precision; "float32" asks for the highest, whatever the cell's default matmul precision."""
    tf32 = dtype == "tfloat32"
    a = jax.device_put(jnp.ones((n, n), jnp.float32 if tf32 else dtype), select_devices(cfg)[0])
    product, last = jax.jit(lambda x: jnp.matmul(x, x, precision="tensorfloat32" if tf32 else "highest")), []

    def matmul():
        last[:] = [product(a)]

    return matmul, lambda: last and last[0].block_until_ready()


def device_copy(cfg, nbytes, pinned):
    """The calibration's host-to-device copy (shared/calibration.py): `nbytes` from page-locked host memory (JAX's
    "pinned_host" memory kind) or from a NumPy array (pageable)."""
    device = select_devices(cfg)[0]
    host = np.zeros(nbytes, np.uint8)
    if pinned:
        host = jax.device_put(host, jax.sharding.SingleDeviceSharding(device, memory_kind="pinned_host"))
    on_device, last = jax.sharding.SingleDeviceSharding(device, memory_kind="device"), []

    def copy():
        last[:] = [jax.device_put(host, on_device)]

    return copy, lambda: last and last[0].block_until_ready()
