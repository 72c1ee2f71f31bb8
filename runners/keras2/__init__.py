"""Keras 2 runners (keras 2.3.1, multi-backend Keras' last release, on CNTK 2.7 or Theano 1.0.5): one package for the
framework ids keras2-cntk and keras2-theano. `runners.prepare_environment` sets KERAS_BACKEND before this import; the
task modules are written once against Keras 2's API (Sequential and functional models, `compile`, `fit` on a
`keras.utils.Sequence`, `predict`) and only the device, Theano's flags and provenance below ask which backend runs.

Both backends fix their device when Keras imports them: Theano reads THEANO_FLAGS once (`device=cuda` is its GPU path,
through libgpuarray/pygpu), and Keras' CNTK backend freezes CNTK's process-wide default device on import (it calls
`C.device.use_default_device()`). So this module reads the cell's device from ROSETTA_DEVICE, which `python -m runners`
sets from `--device` before importing a runner package, and sets the backend up *before* `import keras`;
`check_device(cfg)` then fails a GPU cell whose backend did not get one.
"""

import os
import time

BACKEND = os.environ.get("KERAS_BACKEND")


def theano_flags(device, environ=os.environ):
    """THEANO_FLAGS with this project's defaults in front of the user's own: Theano keeps the last value of a key, so
    a flag the user sets wins (each default applies only where it is unset). Theano 1.0 spells sections with dots
    (`blas.ldflags`; the `blas__ldflags` form is Aesara's)."""
    defaults = [
        "floatX=float32",  # Keras' floatx; Theano's own default is float64
        "blas.ldflags=-lopenblas",
    ]  # Theano's C GEMM/GEMV ops link OpenBLAS (libopenblas-dev in the image)
    if environ.get("ROSETTA_CACHE_DIR"):  # compiled C modules, the container's own (a tmpfs per cell; 42 s cold)
        defaults.append("base_compiledir=" + os.path.join(environ["ROSETTA_CACHE_DIR"], "theano"))
    if device == "gpu":
        defaults.append("device=cuda")  # libgpuarray's CUDA backend (pygpu); Theano 1.0 has no other GPU path
        defaults.append("dnn.enabled=False")  # Theano 1.0.5's cuDNN ops need cuDNN <= 7, which no wheel ships (the
        # theano image has none): GpuCorrMM convolutions and cuBLAS instead
    return ",".join(defaults + ([environ["THEANO_FLAGS"]] if environ.get("THEANO_FLAGS") else []))


DEVICE = os.environ.get("ROSETTA_DEVICE", "gpu")  # the runner contract's default device
if BACKEND == "theano":
    os.environ["THEANO_FLAGS"] = theano_flags(DEVICE)
elif BACKEND == "cntk":
    import cntk as C

    # CNTK alone would pick a visible GPU; the cell's device is set explicitly either way (the CPU for a GPU cell
    # without a GPU, which check_device then fails).
    _gpus = [d for d in C.device.all_devices() if d.type() == C.device.DeviceKind.GPU]
    C.device.try_set_default_device(_gpus[0] if DEVICE == "gpu" and _gpus else C.device.cpu())

import keras  # noqa: E402
import numpy as np  # noqa: E402
from keras.utils.conv_utils import convert_kernel  # noqa: E402
from keras.utils.layer_utils import count_params  # noqa: E402

from shared import batching  # noqa: E402
from shared.record import GpuMissing, Skip  # noqa: E402
from shared.timing import WINDOW_STEPS, edge  # noqa: E402

BACKEND = keras.backend.backend()  # "cntk" | "theano"
# Keras' Adam updates w -= lr·√(1−β₂ᵗ)/(1−β₁ᵗ) · m / (√v + ε): ε is added before the bias correction (Kingma & Ba's
# "epsilon hat", as Keras 3 still does), where PyTorch and optax add it to √v̂ after it. Recorded in `differences`.
ADAM_EPSILON_HAT = "Adam ε added before bias correction (Keras' epsilon-hat form; PyTorch/optax add it after)"
# Keras 2's Theano backend computes a from-logits cross-entropy as softmax, then clip to [1e-7, 1 − 1e-7], then
# −log (keras/backend/theano_backend.py): the loss saturates near 16.1 and a sample whose true class has probability
# below 1e-7 gets no gradient. Keras' CNTK backend calls C.cross_entropy_with_softmax, the exact function.
CLIPPED_CROSS_ENTROPY = (
    "softmax cross-entropy clips the probabilities to [1e-7, 1 - 1e-7] (Keras 2's Theano "
    "backend, also from logits): no gradient from samples below 1e-7"
)


def differences():
    """The formulation differences every task's loss has on this backend (the `differences` metric)."""
    return [CLIPPED_CROSS_ENTROPY] if BACKEND == "theano" else []


# ---------------------------------------------------------------- device and provenance
def _cntk_gpus():
    return [d for d in C.device.all_devices() if d.type() == C.device.DeviceKind.GPU]


def _bundled(prefix):
    """The CUDA or cuDNN version cntk-gpu bundles, from its libraries' names (CNTK has no runtime query)."""
    libs = os.path.join(os.path.dirname(C.__file__), "libs")
    names = sorted(n for n in os.listdir(libs) if n.startswith(prefix + ".so.")) if os.path.isdir(libs) else []
    return names[-1][len(prefix) + 4 :] if names else None


def _theano_gpu():
    """(device name, cuDNN version) of Theano's GPU context, or None where Theano runs on the CPU."""
    import theano.gpuarray

    if not theano.gpuarray.pygpu_activated:
        return None
    from theano.gpuarray import dnn

    return (theano.gpuarray.type.get_context(None).devname, str(dnn.version()) if dnn.dnn_present() else None)


def framework_info():
    if BACKEND == "cntk":
        on_gpu = on_device_gpu()
        info = {
            "backend_version": C.__version__,
            "gpus": [C.device.get_gpu_properties(d).name for d in _cntk_gpus()],
            "cuda": _bundled("libcudart") if on_gpu else None,
            "cudnn": _bundled("libcudnn") if on_gpu else None,
            "cntk_device": str(C.device.use_default_device()),
        }
    else:
        import theano

        gpu = _theano_gpu()
        info = {
            "backend_version": theano.__version__,
            "gpus": [gpu[0]] if gpu else [],
            "cuda": None,
            "cudnn": gpu[1] if gpu else None,
            "theano_device": theano.config.device,
            "blas_ldflags": theano.config.blas.ldflags,
            "compiledir": theano.config.compiledir,
        }
    return {
        "framework_version": f"keras {keras.__version__} / {BACKEND} {info['backend_version']}",
        "keras_version": keras.__version__,
        "backend": BACKEND,
        **info,
    }


def backend_switches():
    """The backend flags that pick the GPU kernels, for the record's switches: Theano's cuDNN flag on the GPU."""
    if BACKEND != "theano" or DEVICE != "gpu":
        return {}
    import theano

    return {"theano_dnn_enabled": theano.config.dnn.enabled}


def on_device_gpu():
    """Whether the backend computes on a GPU: CNTK's (frozen) default device, or Theano's pygpu context."""
    if BACKEND == "cntk":
        return C.device.use_default_device().type() == C.device.DeviceKind.GPU
    return _theano_gpu() is not None


# rosetta: device
def check_device(cfg):
    """Fail a GPU cell where the backend computes on the CPU (a broken install, never an unsupported combination):
    CNTK without a visible GPU (or the CPU-only `cntk` wheel), Theano without libgpuarray (pygpu)."""
    if cfg.device != DEVICE:
        raise RuntimeError(
            f"the backend was set up for device {DEVICE!r} at import, the cell asks for {cfg.device!r}; "
            "pass the cell's --device on the command line or in ROSETTA_DEVICE"
        )
    asked = max(cfg.gpus, 1)  # these tasks run on the first; more visible than that are fine
    if cfg.device == "gpu" and BACKEND == "cntk" and (not on_device_gpu() or len(_cntk_gpus()) < asked):
        raise GpuMissing(
            asked,
            len(_cntk_gpus()),
            f"Keras 2 on CNTK {C.__version__} (default device: {C.device.use_default_device()})",
        )
    if cfg.device == "gpu" and BACKEND == "theano" and (not on_device_gpu() or asked > 1):
        import theano
        import theano.gpuarray

        pygpu = theano.gpuarray.pygpu
        found = f"pygpu {pygpu.__version__}" if pygpu is not None else "no pygpu"
        raise GpuMissing(
            asked,
            int(on_device_gpu()),
            f"Keras 2 on Theano {theano.__version__} with {found} "
            f"(THEANO_FLAGS device={theano.config.device}: its GPU path "
            "needs libgpuarray and pygpu, and uses one GPU)",
        )


# rosetta: precision
def check_precision(precision):
    """Float32 only: Keras 2 on CNTK and Theano has no mixed-precision policy (set_floatx('float16') casts everything,
    master weights and optimizer state included), and TF32 does not exist for their kernels."""
    if precision != "fp32":
        raise Skip(f"keras2-{BACKEND} runs fp32 only: Keras 2 has no mixed-precision policy on CNTK or Theano")
    keras.backend.set_floatx("float32")


# ---------------------------------------------------------------- data and the training clock
def nchw_to(x, data_format):
    """The shared batches are NCHW; channels_last layers want NHWC (a host-side transpose)."""
    return x if data_format == "channels_first" else np.ascontiguousarray(x.transpose(0, 2, 3, 1))


class EpochBatches(keras.utils.Sequence):
    """`fit`'s input: each epoch's batches in the shared seeded order (shared.batching), so every framework sees the
    same data (seed lesson 1: framework-side shuffling changed the accuracy); fit(..., shuffle=False) keeps the order.
    `make_batch(idx)` returns numpy (x, y). Keras 2 calls a Sequence's `on_epoch_end` exactly once after each epoch
    (fit's own loop with workers=0, its OrderedEnqueuer thread otherwise, once the epoch's batches are consumed), so
    the epoch count lives here."""

    def __init__(self, n, batch_size, make_batch):
        self.n, self.batch_size, self.make_batch = n, batch_size, make_batch
        self.epoch = 0
        self.batches = list(batching.train_batches(n, batch_size, 0))

    def __len__(self):
        return batching.steps_per_epoch(self.n, self.batch_size)

    def __getitem__(self, i):
        return self.make_batch(self.batches[i])

    def on_epoch_end(self):
        self.epoch += 1
        self.batches = list(batching.train_batches(self.n, self.batch_size, self.epoch))


class EpochTimer(keras.callbacks.Callback):
    """The training clock around `model.fit`: one interval per epoch, the end of the first step as the warm-up, and a
    sample per WINDOW_STEPS steps after it, as shared.timing.timed_epochs does, the cores' distance measured at each
    window edge outside the clock.

    Keras 2 builds the training function inside `fit` but before the first epoch begins (`_make_train_function`:
    Theano compiles its C code there, CNTK builds its graph), so the first epoch's clock starts when `fit` is called
    (`start_fit`): the compile shows in the warm-up and the first epoch, as a user waits for it. Every training step
    of Keras 2 returns its loss as numpy (`train_on_batch`), so the step is finished when the batch hook runs: the hooks
    add no host sync of their own (the Keras 3 runner's timer must avoid per-step hooks for that reason). Keras 2's
    batch logs hold the batch's own loss (the progress bar averages them itself): `losses` keeps every step's."""

    def __init__(self):
        super().__init__()
        self.epoch_seconds, self.warmup, self.start, self.windows, self.losses = [], None, None, [], []

    def start_fit(self):
        self.start = time.perf_counter()

    def on_epoch_begin(self, epoch, logs=None):
        if self.epoch_seconds or self.start is None:  # epoch 0 started with `fit`
            self.start = time.perf_counter()
        self.window_start, self.in_window, self.probing = time.perf_counter(), 0, 0.0

    def on_train_batch_end(self, batch, logs=None):
        now = time.perf_counter()
        self.losses.append(float(logs["loss"]))
        if self.warmup is None:
            self.warmup = now - self.start
            self.probing += edge()  # the cores' distance at a window edge, outside the clock
            self.window_start = time.perf_counter()
            return
        self.in_window += 1
        if self.in_window == WINDOW_STEPS:  # one sample per WINDOW_STEPS steps after the first
            self.windows.append((now - self.window_start) / WINDOW_STEPS)
            self.probing += edge()
            self.window_start, self.in_window = time.perf_counter(), 0

    # rosetta: barrier
    def on_epoch_end(self, epoch, logs=None):
        self.epoch_seconds.append(time.perf_counter() - self.start - self.probing)


def fit_steps(model, x, y, steps, read_canonical):
    """`fit` on one batch `steps` times with the model as compiled by its runner (the training-equivalence test,
    tests/fw_probe.py): (each step's loss as the runner's EpochTimer keeps it, the canonical weights after each
    step, read by a batch hook)."""
    timer, after = EpochTimer(), []
    weights = keras.callbacks.LambdaCallback(on_batch_end=lambda batch, logs: after.append(read_canonical(model)))
    timer.start_fit()
    model.fit(
        EpochBatches(steps * len(x), len(x), lambda idx: (x, y)),
        epochs=1,
        shuffle=False,
        workers=0,
        callbacks=[timer, weights],
        verbose=0,
    )
    return timer.losses, after


def keras_kernel(oihw):
    """A canonical conv kernel (OIHW, cross-correlation like PyTorch's and TensorFlow's) → Keras 2's HWIO, which it
    keeps in either data format. Keras 2 on Theano computes a true convolution (T.nnet.conv2d flips the filter), so
    there the kernel is flipped with `convert_kernel`, Keras' own converter between Theano- and TF-trained kernels."""
    hwio = np.asarray(oihw).transpose(2, 3, 1, 0)
    return convert_kernel(hwio) if BACKEND == "theano" else hwio


def canonical_kernel(hwio):
    """keras_kernel's inverse: Keras 2's HWIO (flipped back on Theano; the flip is its own inverse) → OIHW."""
    hwio = convert_kernel(hwio) if BACKEND == "theano" else np.asarray(hwio)
    return hwio.transpose(3, 2, 0, 1)


def count_parameters(model):
    """Trainable parameters, as model.summary() counts them: BatchNorm's moving statistics are non-trainable weights
    to Keras, not parameters."""
    return int(count_params(model.trainable_weights))


def gemm(cfg, n, dtype):
    """The calibration GEMM (shared/calibration.py): `K.dot` compiled by the backend into a function that returns
    numpy (so it has finished when it returns). Keras 2 here computes in float32 only."""
    from keras import backend as K

    if dtype != "float32":
        raise ValueError(f"Keras 2 on {BACKEND} runs float32 only here")
    a = np.ones((n, n), np.float32)
    if BACKEND == "cntk":
        # CNTK caches a graph without inputs between evaluations (a 13 TFLOP/s "GEMM" on two cores): feed one.
        import cntk as C

        rows = C.input_variable(n)
        product = C.times(rows, C.constant(a))
        return (lambda: product.eval({rows: a})), (lambda: None)
    x = K.variable(a)
    product = K.function([], [K.dot(x, x)])
    return (lambda: product([])), (lambda: None)
