"""Lasagne runners (Lasagne 0.1 on Theano 1.0.5): Theano's flags, device, precision and provenance for the task module.

The Lasagne idiom in a sentence: stack layers from an `InputLayer` (each layer object holds its Theano shared
parameters), ask `lasagne.layers.get_output` for a symbolic expression of the network on a symbolic input
(`T.tensor4`), build the loss and `lasagne.updates` on it, and compile the step with `theano.function`. What a reader
of the other runners should know:
- nothing runs until `theano.function(...)` compiles the graph: Theano optimizes it (fusing elementwise ops,
  softmax with the cross-entropy) and generates, compiles and caches C code with g++ (42-45 s cold, ~6 s from the
  cache, MACHINE-NOTES), so the runner reports that compile as warm-up;
- training and inference mode are two *graphs*: `get_output(..., deterministic=True)` builds one without dropout,
  compiled into its own function (seed lesson 4);
- Lasagne's layers have defaults that differ from other frameworks' (a ReLU inside every Conv2DLayer and DenseLayer,
  true convolution with flipped filters): the task module spells each one out (seed lesson 11).
"""

import os

# Theano reads THEANO_FLAGS once, at import: set the defaults here, before the first `import theano`. They go first
# because Theano lets a later entry win (theano/configparser.py), so whatever the user's THEANO_FLAGS sets stays.
# NB Theano 1.0 spells flags with dots (blas.ldflags); the `blas__ldflags` spelling is Aesara/PyTensor's and Theano
# ignores it with a warning.
_DEFAULT_FLAGS = {
    "floatX": "float32",  # Python floats and new shared variables in float32 (Theano's default: float64)
    "blas.ldflags": "-lopenblas",  # link Theano's C ops (CorrMM conv, Gemm) against OpenBLAS (libopenblas-dev)
}
# Without BLAS flags Theano calls the BLAS through NumPy's C API (measured: 650 vs 760-910 ms per cnn step of 32 on 2
# shared cores); with a BLAS flag the linker must find the library, else the compile fails and says so.
if os.environ.get("ROSETTA_CACHE_DIR"):  # a container's own compile cache (compose.yaml: a tmpfs per cell)
    _DEFAULT_FLAGS["base_compiledir"] = os.path.join(os.environ["ROSETTA_CACHE_DIR"], "theano")
os.environ["THEANO_FLAGS"] = ",".join(
    [f"{k}={v}" for k, v in _DEFAULT_FLAGS.items()]
    + ([os.environ["THEANO_FLAGS"]] if os.environ.get("THEANO_FLAGS") else [])
)

import lasagne  # noqa: E402
import numpy as np  # noqa: E402
import theano  # noqa: E402

from shared import batching  # noqa: E402
from shared.record import GpuMissing, Skip  # noqa: E402


def _gpuarray():
    """Theano's GPU backend (theano.gpuarray over libgpuarray/pygpu), or None where pygpu is not importable. pygpu is
    not on PyPI: it comes from conda or Debian's python3-pygpu, never from this project's CPU environment."""
    import theano.gpuarray

    return theano.gpuarray if theano.gpuarray.pygpu is not None else None


def framework_info():
    gpuarray = _gpuarray()
    context = gpuarray.get_context(None) if gpuarray is not None and gpuarray.pygpu_activated else None
    return {
        "framework_version": lasagne.__version__,
        "theano_version": theano.__version__,
        "numpy_version": np.__version__,
        "pygpu_version": gpuarray.pygpu.__version__ if gpuarray is not None else None,
        "blas_ldflags": theano.config.blas.ldflags,  # what Theano links its C ops against
        "cxx": theano.config.cxx or None,  # None: no compiler, Theano cannot build its C ops
        "compiledir": theano.config.compiledir,
        "cuda": None,  # libgpuarray loads libcuda/libnvrtc at run time: no version query
        "cudnn": str(gpuarray.dnn.version()) if context is not None and gpuarray.dnn.dnn_present() else None,
        "gpus": [context.devname] if context is not None else [],
    }


# rosetta: device
def select_device(cfg, rank=0):
    """'cpu', or 'cudaN' after starting Theano's GPU backend. `THEANO_FLAGS=device=cuda` starts it at import;
    without that flag, `theano.gpuarray.use` is the same switch made after import, which must happen before the model
    creates its shared variables (they are placed where the backend is at creation). A GPU cell without pygpu or a
    visible GPU is a broken install or launch (status failed), never an unsupported combination."""
    if cfg.device == "cpu":
        return "cpu"
    asked = max(cfg.gpus, 1)
    gpuarray = _gpuarray()
    if gpuarray is None:
        raise GpuMissing(
            asked,
            0,
            f"Theano {theano.__version__} (pygpu is not importable: Theano's GPU backend, "
            "device=cuda, needs libgpuarray and pygpu, which are not on PyPI; use an image "
            "with conda's pygpu or Debian's python3-pygpu)",
        )
    try:
        visible = gpuarray.pygpu.gpuarray.count_devices("cuda", 0)
    except gpuarray.pygpu.gpuarray.GpuArrayException:  # no driver behind libgpuarray
        visible = 0
    if visible < asked:
        raise GpuMissing(asked, visible, f"Theano {theano.__version__} with pygpu {gpuarray.pygpu.__version__}")
    if not gpuarray.pygpu_activated:
        gpuarray.use(f"cuda{rank}")
    return f"cuda{rank}"


# rosetta: precision
def check_precision(precision):
    """float32 only: Theano's float16 exists on the GPU backend alone (no loss scaling, no tensor-core switch), and
    Lasagne 0.1 predates mixed precision."""
    if precision != "fp32":
        raise Skip(f"lasagne runs fp32 only: Theano {theano.__version__} has no {precision} training mode")


def count_parameters(model):
    """Trainable parameters of every layer below the output layer `model` (Lasagne's own count)."""
    return int(lasagne.layers.count_params(model, trainable=True))  # a NumPy integer: JSON needs int


def layers_by_name(model):
    """The named layers of the network that ends in `model`: canonical weights are loaded by layer name."""
    return {layer.name: layer for layer in lasagne.layers.get_all_layers(model) if layer.name}


def train_batches(x_train, y_train, batch_size, epoch, by_index=False):
    """One epoch of a compiled train step's arguments in the shared order: the NumPy (x, y) batches, which the function
    takes as they are (on the GPU backend it copies them to the device inside the call), or with `by_index` only the
    index vector, for a function that gathers the batch from shared variables itself (`givens`)."""
    for idx in batching.train_batches(len(x_train), batch_size, epoch):
        yield (idx,) if by_index else (x_train[idx], y_train[idx])


def gemm(cfg, n, dtype):
    """The calibration GEMM (shared/calibration.py): Theano's `T.dot` of a shared variable, compiled once; the
    compiled function returns numpy, so it has finished when it returns."""
    x = theano.shared(np.ones((n, n), dtype=dtype))
    return theano.function([], theano.tensor.dot(x, x)), (lambda: None)
