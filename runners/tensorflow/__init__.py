"""TensorFlow runners (TF 2.21 with its bundled Keras 3.15): devices, precision, the tf.data pipeline and provenance
shared by the four task modules.

The loop is TensorFlow's own: tf.data feeds a `tf.function` train step that takes gradients with `tf.GradientTape`.
Keras supplies what TF 2 only ships through it (optimizers, the GRU layer, the applications, mixed-precision
policies); Keras `fit` is the `keras-tf` runner's idiom, not this one's.
"""

import itertools
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # TF's C++ INFO/WARNING lines would crowd the record's log_tail

import numpy as np
import tensorflow as tf

from shared import batching, params
from shared.record import GpuMissing, Skip

POLICIES = {"fp32": "float32", "tf32": "float32", "amp": "mixed_float16", "bf16": "mixed_bfloat16"}


def framework_info():
    build = tf.sysconfig.get_build_info()
    gpus = tf.config.list_physical_devices("GPU")  # physical: does not start the runtime (devices are set up later)
    return {
        "framework_version": tf.__version__,
        "keras_version": tf.keras.__version__,
        "cuda": build.get("cuda_version"),
        "cudnn": build.get("cudnn_version"),
        "gpus": [tf.config.experimental.get_device_details(g).get("device_name", g.name) for g in gpus],
    }


def select_devices(cfg, count=1):
    """The `count` logical devices a cell runs on (names like '/device:GPU:0').

    A CPU cell hides the GPUs. On the CPU, count > 1 splits the processor into `count` logical devices, so
    MirroredStrategy runs (and the tests exercise) the same data-parallel code as on GPUs. TF allows this only before
    its runtime starts, so call it first in `main`.
    """
    # rosetta: device
    if cfg.device == "cpu":
        tf.config.set_visible_devices([], "GPU")
        if count > 1:
            cpu = tf.config.list_physical_devices("CPU")[0]
            tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * count)
        return [d.name for d in tf.config.list_logical_devices("CPU")][:count]
    gpus = tf.config.list_physical_devices("GPU")
    if len(gpus) < count:  # a broken install or launch, never an unsupported combination
        raise GpuMissing(count, len(gpus), "TensorFlow")
    return [d.name for d in tf.config.list_logical_devices("GPU")][:count]


def auto(switch, on_gpu):
    """A switch left at None means "on for a GPU cell, off for a CPU cell"."""
    return on_gpu if switch is None else switch


def compute_capability():
    gpus = tf.config.list_physical_devices("GPU")
    return tf.config.experimental.get_device_details(gpus[0]).get("compute_capability", (0, 0)) if gpus else None


def set_precision(precision, on_gpu):
    """Set TF32 and the Keras mixed-precision policy; returns the policy name.

    TensorFlow enables TF32 on Ampere+ by default (since 2.4), so fp32 turns it off explicitly and only tf32 turns it
    on. amp is the mixed_float16 policy (fp16 compute, fp32 variables) whose optimizer needs loss scaling
    (`optimizer_for`); bf16 is mixed_bfloat16, which needs none (bf16 has fp32's exponent range).
    """
    if precision in ("tf32", "amp") and not on_gpu:
        raise Skip(f"{precision} needs an NVIDIA GPU (tensor cores); this cell runs on the CPU")
    if precision in ("tf32", "bf16") and on_gpu and compute_capability() < (8, 0):
        raise Skip(f"{precision} needs an Ampere or newer GPU (compute capability 8.0+)")
    # rosetta: precision
    tf.config.experimental.enable_tensor_float_32_execution(precision == "tf32")
    tf.keras.mixed_precision.set_global_policy(POLICIES[precision])  # applies to layers built after this call
    return POLICIES[precision]


def optimizer_for(optimizer, precision, variables):
    """The optimizer, built for `variables` now: a tf.function that creates variables (the optimizer's slots) on its
    first call is traced twice, which costs DenseNet-121 tens of seconds. amp wraps it in dynamic loss scaling, so
    small fp16 gradients do not flush to zero."""
    if precision == "amp":
        optimizer = tf.keras.mixed_precision.LossScaleOptimizer(optimizer)
    optimizer.build(variables)
    return optimizer


def scaled(optimizer, loss):
    """The loss the tape differentiates: multiplied by the loss scale under amp (the optimizer divides it out)."""
    return optimizer.scale_loss(loss) if isinstance(optimizer, tf.keras.mixed_precision.LossScaleOptimizer) else loss


def host_tensors(*arrays):
    """In-memory data as host tensors, created once: tf.data runs on the host and gathers batches from them."""
    with tf.device("/cpu:0"):
        return tuple(tf.constant(a) for a in arrays)


def train_batches(n, batch_size, epochs):
    """Every epoch's index batches in the shared order (shared.batching, the same in every framework), in sequence."""
    return itertools.chain.from_iterable(batching.train_batches(n, batch_size, epoch) for epoch in range(epochs))


def check_placement(placement):
    if placement not in params.DATA_PLACEMENTS:
        raise ValueError(f"data_placement={placement!r}: choose one of {', '.join(params.DATA_PLACEMENTS)}")
    return placement


def device_tensors(device, *tensors):
    """data_placement=device: the tensors copied to `device` once, before the clock; the steps gather batches there."""
    with tf.device(device):
        return tuple(tf.identity(t) for t in tensors)


def index_dataset(index_batches):
    """The index batches in the shared order (`train_batches`, shared.batching.eval_batches) as a tf.data pipeline."""
    batches = list(index_batches)
    full = [b for b in batches if len(b) == len(batches[0])]
    ds = tf.data.Dataset.from_tensor_slices(np.stack(full))  # (steps, batch) int64
    if len(full) < len(batches):  # evaluation's last, smaller batch
        ds = ds.concatenate(tf.data.Dataset.from_tensors(batches[-1]))
    return ds


def batch_dataset(tensors, index_batches, device=None, repeat=False):
    """data_placement=host: batches gathered from host `tensors` in the shared order by tf.data's threads (`repeat`:
    the same batches again without end, for one iterator over every pass; see `epoch_iterator`).

    Batches are gathered in parallel and prefetched, so the next batch is ready while the step runs; on a GPU
    `prefetch_to_device` also overlaps the host→device copy with compute (seed lesson 13: the GPU must never wait for
    per-batch copies).
    """
    ds = index_dataset(index_batches)
    if repeat:
        ds = ds.repeat()
    ds = ds.map(lambda idx: tuple(tf.gather(t, idx) for t in tensors), num_parallel_calls=tf.data.AUTOTUNE)
    ds = ds.prefetch(tf.data.AUTOTUNE)  # map keeps order (deterministic)
    if device and "GPU" in device:
        ds = ds.apply(tf.data.experimental.prefetch_to_device(device))
    return ds


def epoch_iterator(dataset, steps):
    """`epoch_batches(epoch)` for shared.timing over one iterator of the whole run (`dataset` holds every epoch's
    batches): deleting a tf.data iterator after a large tf.function has run can take seconds (tens for DenseNet-121),
    which a per-epoch iterator would put inside the clock."""
    batches = iter(dataset)
    return lambda epoch: itertools.islice(batches, steps)


# rosetta: barrier
def sync():
    """The clock's barrier: GPU kernels run asynchronously after a tf.function returns; wait for all of them."""
    tf.test.experimental.sync_devices()


def count_parameters(model):
    return sum(int(np.prod(v.shape)) for v in model.trainable_variables)


def gemm(cfg, n, dtype):
    """The calibration GEMM (shared/calibration.py) on the cell's first device; the barrier reads the last product
    back, which waits for everything queued before it."""
    device = select_devices(cfg)[0]
    with tf.device(device):
        a = tf.cast(tf.random.normal((n, n)), dtype)
    last = []

    def matmul():
        with tf.device(device):
            last[:] = [tf.linalg.matmul(a, a)]

    return matmul, lambda: last and last[0].numpy()
