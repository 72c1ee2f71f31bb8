"""Keras 3 runners (keras 3.15; backends TensorFlow 2.21, JAX 0.10, PyTorch 2.13/2.14): one package for three
framework ids. `runners.prepare_environment` sets KERAS_BACKEND before this import; the task modules are written
once against the Keras API and only the precision, device and data-parallel plumbing below asks which backend runs.
"""

import contextlib
import time

import keras
import numpy as np

from shared import batching
from shared.record import GpuMissing, Skip
from shared.timing import WINDOW_STEPS

BACKEND = keras.backend.backend()  # "tensorflow" | "jax" | "torch"
# Keras' own fast path, the same in the CNN and the GRU (their TUNED; tuning=tuned, docs/tuned.md), same work:
FAST_PATH = {
    "jit_compile": True,  # the train step compiled on every backend: XLA (TF, JAX), torch.compile (torch)
    # a window of steps per compiled call, the host back in Python 5× less often; Keras' torch backend refuses more
    # than one ("`steps_per_execution` must be 1 with the PyTorch backend"), so there it stays 1
    "steps_per_execution": 1 if BACKEND == "torch" else WINDOW_STEPS,
}
# Keras' Adam (also TF's: tf.keras.optimizers.Adam) updates w -= lr·√(1−β₂ᵗ)/(1−β₁ᵗ) · m / (√v + ε): ε is added before
# the bias correction (Kingma & Ba's "epsilon hat"), where PyTorch and optax add it to √v̂ after it. The same ε = 1e-8
# is thus ε/√(1−β₂ᵗ) in PyTorch's terms: 32× larger at step 1, the same once β₂ᵗ → 0. A record names it.
ADAM_EPSILON_HAT = "Adam ε added before bias correction (Keras' epsilon-hat form; PyTorch/optax add it after)"
# Keras 3's Adam on TensorFlow squares a sparse gradient element-wise as it comes (ops.square on a tf.IndexedSlices
# squares each slice): the embedding's gradient has one slice per token occurrence, so a token seen k times in a batch
# adds Σ g_i² to Adam's second moment where Adam's definition (and every other backend) adds (Σ g_i)². Found by
# tests/test_training_equivalence.py; the TensorFlow-backed GRU records name it.
ADAM_SPARSE_SQUARES = (
    "Keras' Adam on TensorFlow squares the embedding's sparse gradient per token occurrence "
    "(second moment Σg² instead of (Σg)² for a token repeated in a batch)"
)
SPARSE_SQUARES = (ADAM_SPARSE_SQUARES,) if BACKEND == "tensorflow" else ()
# On TensorFlow, whose backend Keras does not mark thread-safe, `fit` runs the batch callbacks on the main thread and
# converts each step's logs to Python floats first (keras/src/callbacks/callback_list.py), so every step waits for the
# device: a sync Keras imposes in every precision, which the training runners add to `differences`.
FIT_HOST_SYNCS = (
    ("Keras on TensorFlow: fit converts every step's logs to Python floats (a host sync it imposes)",)
    if BACKEND == "tensorflow"
    else ()
)


def _backend_info():
    """(version, cuda, cudnn, gpu names) of the backend library, without initializing its devices: densenet121
    still has to create N logical CPU devices on TF and JAX, which is only possible before that."""
    if BACKEND == "tensorflow":
        import tensorflow as tf

        build = tf.sysconfig.get_build_info()
        gpus = tf.config.list_physical_devices("GPU")  # physical devices only: the runtime stays unconfigured
        names = [tf.config.experimental.get_device_details(g).get("device_name", g.name) for g in gpus]
        return tf.__version__, build.get("cuda_version"), build.get("cudnn_version"), names
    if BACKEND == "jax":
        import jax
        from jax._src.lib import cuda_versions  # None unless a CUDA plugin is installed

        if cuda_versions is None:
            return jax.__version__, None, None, []
        return (
            jax.__version__,
            str(cuda_versions.cuda_runtime_get_version()),
            str(cuda_versions.cudnn_get_version()),
            [d.device_kind for d in jax.devices("gpu")],
        )
    import torch

    cuda = torch.cuda.is_available()
    return (
        torch.__version__,
        torch.version.cuda if cuda else None,
        torch.backends.cudnn.version() if cuda else None,
        [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())] if cuda else [],
    )


def framework_info():
    version, cuda, cudnn, gpus = _backend_info()
    return {
        "framework_version": f"keras {keras.__version__} / {BACKEND} {version}",
        "keras_version": keras.__version__,
        "backend": BACKEND,
        "backend_version": version,
        "cuda": cuda,
        "cudnn": cudnn,
        "gpus": gpus,
    }


def gpu_count():
    if BACKEND == "tensorflow":
        import tensorflow as tf

        return len(tf.config.list_physical_devices("GPU"))
    if BACKEND == "jax":
        import jax

        return len([d for d in jax.devices() if d.platform == "gpu"])
    import torch

    return torch.cuda.device_count()


# rosetta: device
def check_device(cfg):
    """Fail a GPU cell where the backend sees too few GPUs (a broken install, never an unsupported combination)."""
    if cfg.device == "gpu" and gpu_count() < max(cfg.gpus, 1):
        raise GpuMissing(cfg.gpus, gpu_count(), f"Keras' {BACKEND} backend")


def compute_capability():
    """(major, minor) of the first GPU, as the backend reports it."""
    if BACKEND == "tensorflow":
        import tensorflow as tf

        return tuple(
            tf.config.experimental.get_device_details(tf.config.list_physical_devices("GPU")[0]).get(
                "compute_capability", (0, 0)
            )
        )
    if BACKEND == "jax":
        import jax

        return tuple(int(v) for v in jax.devices("gpu")[0].compute_capability.split("."))
    import torch

    return torch.cuda.get_device_capability(0)


def set_precision(precision, device):
    """Set Keras' global dtype policy (and the backend's TF32 switch); returns the policy name.

    fp32 turns TF32 off explicitly (TF and JAX allow it on Ampere by default); tf32 turns it on; amp is
    "mixed_float16" — `compile()` then wraps the optimizer in a LossScaleOptimizer itself (auto_scale_loss=True);
    bf16 is "mixed_bfloat16", which needs no loss scaling. Mixed policies keep variables in float32.
    """
    gpu = device == "gpu"
    if precision in ("tf32", "amp") and not gpu:
        raise Skip(f"{precision} needs an NVIDIA GPU (tensor cores); this cell runs on the CPU")
    if precision in ("tf32", "bf16") and gpu and compute_capability() < (8, 0):  # else Keras runs it as fp32
        raise Skip(
            f"{precision} needs an Ampere or newer GPU (compute capability 8.0+), this one is "
            f"{'.'.join(map(str, compute_capability()))}"
        )
    # rosetta: precision
    tf32 = precision == "tf32"
    if BACKEND == "tensorflow":
        import tensorflow as tf

        tf.config.experimental.enable_tensor_float_32_execution(tf32)
    elif BACKEND == "jax":
        import jax

        jax.config.update("jax_default_matmul_precision", "tensorfloat32" if tf32 else "highest")
    else:
        import torch

        torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = tf32
    policy = {"amp": "mixed_float16", "bf16": "mixed_bfloat16"}.get(precision, "float32")
    keras.mixed_precision.set_global_policy(policy)
    return policy


def cudnn_gru(layer, device, jit_compile=False):
    """Whether the GRU `layer` runs cuDNN's fused kernel, decided as Keras decides it (layers.GRU.inner_loop): the
    layer's `use_cudnn` not off, a GPU cell, a backend with the kernel (TF and torch; JAX's GRU is a lax.scan), the
    canonical reset_after form, no recurrent dropout, and Keras' own test of the activations, unrolling, bias and a
    visible GPU (backend.cudnn_ok, not public API). On torch a compiled step leaves cuDNN too: Keras' torch GRU falls
    back to its loop while torch.compile traces it."""
    from keras.src import backend

    cell = layer.cell
    return bool(
        device == "gpu"
        and layer.use_cudnn is not False
        and BACKEND in ("tensorflow", "torch")
        and cell.reset_after
        and not layer.recurrent_dropout
        and not (BACKEND == "torch" and jit_compile)
        and backend.cudnn_ok(cell.activation, cell.recurrent_activation, layer.unroll, cell.use_bias)
    )


def data_format_of(switches, cfg):
    """The image layout from the `channels_first` switch; None picks NCHW where the kernels are NCHW (cuDNN, lesson 2;
    PyTorch's CPU kernels, which Keras' torch backend otherwise feeds by copying NHWC tensors around every conv and
    pool) and NHWC elsewhere (oneDNN and XLA CPU kernels)."""
    channels_first = switches["channels_first"]
    if channels_first is None:
        channels_first = cfg.device == "gpu" or BACKEND == "torch"
    return "channels_first" if channels_first else "channels_last"


def nchw_to(x, data_format):
    """The shared batches are NCHW; Keras' channels_last layers want NHWC (a host-side transpose)."""
    return x if data_format == "channels_first" else np.ascontiguousarray(x.transpose(0, 2, 3, 1))


class EpochBatches(keras.utils.PyDataset):
    """`fit`'s input: each epoch's batches in the shared seeded order (shared.batching), so every framework sees the
    same data (seed lesson 1: framework-side shuffling changed the accuracy); fit(..., shuffle=False) keeps the order.
    `make_batch(idx, epoch, rank)` returns numpy (x, y). The epoch number comes from fit itself through `callback`:
    Keras also calls the PyDataset's own on_epoch_* hooks around its input-signature peeks, so counting them drifts.
    With `world` data-parallel replicas one item is a whole global batch, the ranks' slices concatenated in rank
    order, which Keras splits back across the devices (each replica gets the slice a PyTorch DDP rank would)."""

    def __init__(self, n, batch_size, make_batch, world=1, **kwargs):
        super().__init__(**kwargs)
        self.n, self.batch_size, self.make_batch, self.world = n, batch_size, make_batch, world
        self.set_epoch(0)
        self.callback = keras.callbacks.LambdaCallback(on_epoch_begin=lambda epoch, logs: self.set_epoch(epoch))

    def set_epoch(self, epoch):
        self.epoch = epoch
        self.batches = list(
            zip(
                *(
                    batching.train_batches(self.n, self.batch_size, epoch, rank, self.world)
                    for rank in range(self.world)
                )
            )
        )

    def __len__(self):
        return batching.steps_per_epoch(self.n, self.batch_size, self.world)

    def __getitem__(self, i):
        parts = [self.make_batch(idx, self.epoch, rank) for rank, idx in enumerate(self.batches[i])]
        return tuple(np.concatenate(column) for column in zip(*parts)) if self.world > 1 else parts[0]


@contextlib.contextmanager
def input_wait(wait):
    """While `fit` runs, time every wait of its training loop for the next batch with `wait` (shared.timing.InputWait).
    Keras has no public hook for it, so this wraps the generator that its PyDataset adapter hands the trainer (Keras 3
    internals: PyDatasetAdapter._get_iterator): every backend pulls that generator on the training thread (TF through
    a tf.data from_generator without prefetch when Keras runs its own workers; JAX and torch directly)."""
    from keras.src.trainers.data_adapters.py_dataset_adapter import PyDatasetAdapter

    original = PyDatasetAdapter._get_iterator
    PyDatasetAdapter._get_iterator = lambda adapter: wait(original(adapter))
    try:
        yield wait
    finally:
        PyDatasetAdapter._get_iterator = original


class EpochTimer(keras.callbacks.Callback):
    """The training clock inside `model.fit`: one interval per epoch, and the end of the first step (trace/compile) as
    the warm-up, and a sample per `window` steps after it (shared.timing.WINDOW_STEPS unless the task has its own), as
    shared.timing.timed_epochs does, without adding work to `fit`.

    Epoch edges are barriers already: Keras waits for its asynchronous batch hooks and converts the epoch's logs to
    Python floats before `on_epoch_end`. Per-batch hooks would make Keras call every batch hook synchronously, pulling
    each step's loss to the host on the main thread; `async_safe` keeps Keras' own asynchronous dispatch instead
    (keras/src/callbacks/callback_list.py), where a worker thread receives each step's logs once the step has run, so
    the first call ends the warm-up and the others return at once. (On TF, Keras runs batch hooks synchronously for
    every user, since its TF backend is not marked thread-safe; the timer adds nothing to that either.)

    It also keeps each step's loss (`step_losses()`, read after `fit`). Keras 3 hands batch hooks the epoch's running
    mean, not the batch's loss (its loss tracker is a Mean over the epoch), so the batch's own loss is recovered from
    consecutive means: after b batches of equal size, loss_b = b·mean_b − (b−1)·mean_(b−1). The values are kept as
    Keras hands them and converted once `fit` has returned."""

    async_safe = True

    def __init__(self, window=WINDOW_STEPS):
        super().__init__()
        self.window = window
        self.epoch_seconds, self.warmup, self.windows, self.means = [], None, [], []

    def on_train_begin(self, logs=None):
        # Read here, not in the batch hook: on JAX, `self.model` syncs the model's variables with the training state,
        # which from a worker thread would race the main thread's next step (it donates those buffers).
        self.steps_per_execution = self.model.steps_per_execution

    def on_epoch_begin(self, epoch, logs=None):
        self.start = time.perf_counter()
        self.window_start, self.window_after = self.start, 0  # a window: `window` steps after step `window_after`
        self.means.append([])

    def on_train_batch_end(self, batch, logs=None):
        # `batch` is the last step of a compiled call: the first call ends below steps_per_execution.
        now = time.perf_counter()
        self.means[-1].append((batch + 1, logs["loss"]))
        if not self.epoch_seconds and batch < self.steps_per_execution:
            self.warmup = now - self.start
            self.window_start, self.window_after = now, batch + 1
        elif batch + 1 - self.window_after >= self.window:
            self.windows.append((now - self.window_start) / (batch + 1 - self.window_after))
            self.window_start, self.window_after = now, batch + 1

    # rosetta: barrier
    def on_epoch_end(self, epoch, logs=None):
        self.epoch_seconds.append(time.perf_counter() - self.start)

    @property
    def final_loss(self):
        """The mean loss over the last epoch (README, "one loss definition"): Keras' own epoch mean."""
        return float(self.means[-1][-1][1]) if self.means and self.means[-1] else None

    def step_losses(self):
        """Each step's loss, epochs back to back (with steps_per_execution > 1: each compiled call's mean, repeated
        for its steps), recovered from the running means Keras reported."""
        losses = []
        for epoch in self.means:
            seen, total = 0, 0.0
            for count, mean in epoch:
                running = float(mean) * count
                losses += [(running - total) / (count - seen)] * (count - seen)
                seen, total = count, running
        return losses


class OneBatch(keras.utils.PyDataset):
    """`steps` copies of one batch (x, y): the training-equivalence test's input to `fit` (tests/fw_probe.py)."""

    def __init__(self, x, y, steps):
        super().__init__()
        self.batch, self.steps = (x, y), steps

    def __len__(self):
        return self.steps

    def __getitem__(self, i):
        return self.batch


def fit_steps(model, x, y, steps, read_canonical):
    """`fit` on one batch `steps` times with the model as compiled by its runner: (each step's loss, as the runner's
    EpochTimer recovers it; the canonical weights after each step, read by a batch hook, where Keras has synced the
    model's variables with its training state)."""

    class Weights(keras.callbacks.Callback):
        def on_train_batch_end(self, batch, logs=None):
            after.append(read_canonical(self.model))  # `self.model`, not `model`: on JAX it syncs the variables first

    timer, after = EpochTimer(), []
    model.fit(OneBatch(x, y, steps), epochs=1, shuffle=False, callbacks=[timer, Weights()], verbose=0)
    return timer.step_losses(), after


def count_parameters(model):
    """Trainable parameters only: BatchNorm's moving statistics are weights to Keras, not parameters."""
    return sum(int(np.prod(v.shape)) for v in model.trainable_weights)


def gemm(cfg, n, dtype):
    """The calibration GEMM (shared/calibration.py) through keras.ops on the backend's default device; the barrier
    reads the last product back."""
    a, last = keras.ops.cast(keras.random.normal((n, n)), dtype), []

    def matmul():
        last[:] = [keras.ops.matmul(a, a)]

    return matmul, lambda: last and keras.ops.convert_to_numpy(last[0])
