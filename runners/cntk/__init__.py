"""CNTK runners (CNTK 2.7, the Microsoft Cognitive Toolkit's last release, a Python 3.6 wheel): device, precision and
provenance shared by the three task modules.

The CNTK idiom in a sentence: declare the inputs (`C.input_variable`, `C.sequence.input_variable`), compose layers
from `C.layers` into a Function (the graph, built once), tie model, criterion and learners (`C.momentum_sgd`,
`C.adam`) together in a `C.Trainer`, and loop `trainer.train_minibatch({input: x, label: y})` over NumPy batches.
What a reader coming from another framework should know:
- the batch is not part of a declared shape: it is a dynamic axis, and sequences add a second one (a NumPy array
  (N, T) fed to a sequence input is N sequences of T steps);
- the criterion is summed over the minibatch, and a learning rate says which minibatch size it refers to (the
  spellings below are checked against mean-loss SGD and Adam);
- `model.parameters` are what learners update; BatchNorm's aggregate mean and variance are `model.constants`;
- `model.eval(...)` runs forward in inference mode (dropout off, BatchNorm on its aggregate statistics), the role
  `chainer.using_config("train", False)` plays in Chainer; only `train_minibatch` runs the training-mode graph.

Importing the CPU wheel prints two warnings of its own (an untested Linux distribution; missing CUDA libraries,
"likely GPU-specific"). They are left alone: on a GPU image the second one is the first sign of a broken install.

This package is `runners.cntk`; `import cntk` inside it is the library (absolute imports), as `runners.jax` imports
JAX.
"""

import glob
import os

import cntk as C
import numpy as np

from shared import batching
from shared.record import GpuMissing, Skip

# Learning rates, checked against NumPy over a few steps (mean-loss SGD with momentum, mean-loss Adam) by
# tests/test_cntk_learners.py, which trains with the runners' own `make_learner`:
# - SGD: C.learning_parameter_schedule(lr) applies lr to the minibatch *mean* gradient whatever the minibatch size,
#   i.e. w -= lr·v with v = μv + mean(g) under unit_gain=False; the per-sample spelling would apply it to the sum
#   (64× the step at batch 64).
# - Adam: CNTK's step m/(√v + ε) does not scale with the gradient, so only the rate's reference size matters:
#   C.learning_parameter_schedule_per_sample(lr) takes steps of lr, where learning_parameter_schedule(lr) would take
#   steps of lr/batch. ε is added to √v of the *summed* gradient, so ε·batch is the mean-gradient ε.
# CNTK's Adam (LearnerAdam → Matrix::AdamUpdate) scales the step by √(1−β₂ᵗ)/(1−β₁ᵗ) and adds ε to √v before that
# correction: Kingma & Ba's "ε-hat" form, as Keras, Chainer and MXNet; PyTorch and optax add ε after it.
# CNTK keeps no device-side value of a past minibatch's loss: the runners read each step's (the loss curve, README)
# on the host right after train_minibatch, which waits for the step's forward pass on a GPU (a sync CNTK imposes).
LOSS_HOST_READ = "CNTK: each step's loss is read on the host (previous_minibatch_loss_average): a per-step sync on GPUs"
ADAM_EPSILON_HAT = "Adam ε added before bias correction (CNTK's, like Keras' epsilon-hat form; PyTorch/optax: after)"


def _bundled_version(library):
    """The version of a CUDA library bundled in cntk/libs by the cntk-gpu wheel, from its file name (libcudnn.so.7 ->
    "7"): CNTK has no runtime query for it. None for the CPU wheel, which bundles none."""
    found = sorted(glob.glob(os.path.join(os.path.dirname(C.__file__), "libs", library + ".so.*")))
    return found[0].split(".so.", 1)[1] if found else None


def _gpus():
    return [d for d in C.device.all_devices() if d.type() == C.device.DeviceKind.GPU]


def framework_info():
    return {
        "framework_version": C.__version__,
        "numpy_version": np.__version__,
        "cuda": _bundled_version("libcudart"),
        "cudnn": _bundled_version("libcudnn"),
        "gpus": [C.device.get_gpu_properties(d).name for d in _gpus()],
    }


# rosetta: device
def select_device(cfg):
    """Make the cell's device CNTK's default: the CPU, or GPU 0 for a GPU cell. A GPU cell that finds no GPU (the CPU
    wheel never sees one) is a broken install or launch (status failed, so `--resume` retries it)."""
    if cfg.device == "cpu":
        device = C.device.cpu()
    else:
        visible = _gpus()
        if len(visible) < max(cfg.gpus, 1):
            cuda = _bundled_version("libcudart")
            wheel = f"cntk-gpu, CUDA {cuda} bundled" if cuda else "the CPU-only `cntk` wheel; GPUs need `cntk-gpu`"
            raise GpuMissing(max(cfg.gpus, 1), len(visible), f"CNTK {C.__version__} ({wheel})")
        device = C.device.gpu(0)
    if not C.device.try_set_default_device(device):
        raise RuntimeError(f"CNTK could not make {device} its default device (another process holds its lock?)")
    return device


def is_gpu(device):
    return device.type() == C.device.DeviceKind.GPU


# rosetta: barrier
def sync(trainer):
    """The training clock's barrier: read back a value computed from the step's last operation. CNTK launches GPU
    kernels asynchronously and has no public synchronize. train_minibatch runs forward, backward, then the learners,
    and a learner updates its parameters in the order it was given them (Trainer::TrainLocalMinibatch,
    LearnerBase::Update), so a step's last write is the update of the last learner's last parameter; the barrier
    evaluates that parameter's sum and copies the scalar to the host, which cannot finish before the update it reads
    has (4 bytes, not the parameter: the GRU's last is its 15 MB embedding). Returns the scalar (the test checks it)."""
    total = C.reduce_sum(trainer.parameter_learners[-1].parameters[-1])
    return lambda: float(total.eval())


# rosetta: precision
def check_precision(precision):
    """CNTK cells run float32 only (matrix.yaml): its float16 needs a hand-cast graph (`C.cast`, fp32 BatchNorm
    statistics, a loss scale by hand), which the seed's notebooks never did, and it has no TF32 or bfloat16 mode."""
    if precision != "fp32":
        raise Skip(f"cntk runs fp32 only; CNTK {C.__version__} has no {precision} mode its users could switch on")


def count_parameters(model):
    """Trainable parameters: `model.parameters` (weights, biases, BatchNorm scale and bias), not its constants
    (BatchNorm's aggregate mean, variance and count)."""
    return sum(int(np.prod(p.shape)) for p in model.parameters)


def one_hot(labels, num_classes):
    """Integer labels -> float32 one-hot rows: CNTK's cross_entropy_with_softmax takes a target distribution, not
    class indices (the seed's CNTK notebooks one-hot encoded their labels the same way)."""
    return np.eye(num_classes, dtype=np.float32)[labels]


def train_batches(x_train, y_train, batch_size, epoch):
    """One epoch of NumPy (x, y) batches in the shared order; `train_minibatch` copies each to the device inside the
    clock. Data placement is "host" only: CNTK feeds a graph's inputs from host arrays or its readers, and a training
    set kept on the device would have to live inside the graph (a constant gathered by index), not CNTK's idiom."""
    for idx in batching.train_batches(len(x_train), batch_size, epoch):
        yield x_train[idx], y_train[idx]


def gemm(cfg, n, dtype):
    """The calibration GEMM (shared/calibration.py): `C.times` of a batch of n rows by a constant n×n matrix,
    evaluated to numpy (so finished when it returns). CNTK's Python API computes in float32 here."""
    if dtype != "float32":
        raise ValueError("CNTK runs float32 only here")
    select_device(cfg)
    # An input, not two constants: CNTK folds a constant-only graph once and returns the cached value.
    rows, a = C.input_variable(n), np.ones((n, n), np.float32)
    product = C.times(rows, C.constant(a))
    return (lambda: product.eval({rows: a})), (lambda: None)
