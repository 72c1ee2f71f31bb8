"""Keras 3.15 (TF / JAX / PyTorch backend) · densenet121 · keras.applications.DenseNet121 (with torchvision's
BatchNorm, runners/keras/networks.py) fine-tuned on ChestX-ray14 (14 sigmoid outputs) with `model.fit`, data-parallel
over N devices: the Keras distribution API (DataParallel) on JAX, tf.distribute.MirroredStrategy on TF; one device
only on torch (see `data_parallel`)."""

import contextlib

import keras
import numpy as np

from runners.keras import (
    ADAM_EPSILON_HAT,
    BACKEND,
    FIT_HOST_SYNCS,
    EpochBatches,
    EpochTimer,
    check_device,
    count_parameters,
    input_wait,
    nchw_to,
    set_precision,
)
from runners.keras.networks import densenet121, load_canonical, predict_logits  # noqa: F401 (equivalence interface)
from shared import batching, canonical, metrics, params
from shared.datasets import ChestXray
from shared.record import Skip
from shared.runner import resolve_switches
from shared.timing import InputWait, train_metrics, train_timing, window_steps

# ==== Config ====
# Epochs, batch size per device, lr (× devices), crop and stored sizes come from shared/params.py.
# Layout: keras.applications.DenseNet121 refuses channels_first on every backend (its concatenations assume NHWC),
# so this task runs channels_last and transposes the shared NCHW batches on the host.
SWITCHES = {
    "jit_compile": "auto",  # XLA-compile the train step; Keras' "auto": JAX always, TF on GPU without
    # tf.distribute only, torch never
}
DATA_FORMAT = "channels_last"
# Weights: the canonical ones (ImageNet from the `weights` step with the shared seeded head, else the shared seeded
# init; record field `weights`), not Keras' own ImageNet files, so every framework starts from the same numbers.
# Data placement is "host" (the only choice with `fit` on a PyDataset): each global batch is cropped in host memory and
# copied to the device inside the clock.
# The input rule (README): the PyDataset's worker threads, params' `loader_workers` per device, crop the batches ahead
# of fit's loop; the record says how long the loop waited for them (runners.keras.input_wait). Keras starts its thread
# pool afresh every epoch (its OrderedEnqueuer: threads, which start in microseconds), and with one worker in all it
# starts none and fit crops in its own thread: the record's `input_pipeline` says which.
# Formulation differences from torchvision's DenseNet-121 and PyTorch's Adam (recorded in `differences`):
# - Adam adds ε before the bias correction (runners.keras.ADAM_EPSILON_HAT);
# - Keras updates BatchNorm's moving variance with the biased batch variance, PyTorch with the unbiased one (a factor
#   n / (n - 1), n = batch × height × width: negligible at 224², visible in the tiny scale's 1×1 last block);
# - on JAX over several devices, BatchNorm's batch statistics are those of the global batch (the jitted step reduces
#   over the sharded batch axis), i.e. synchronized BatchNorm; PyTorch's DDP and TF's MirroredStrategy normalize each
#   device's slice on its own.
DIFFERENCES = {
    "adam": ADAM_EPSILON_HAT,
    "biased_var": "BatchNorm moving variance updated with the biased batch variance (Keras); torchvision uses the "
    "unbiased one",
    "sync_bn": "BatchNorm statistics synchronized over devices (global-batch BN under jit); PyTorch DDP normalizes "
    "per device",
}


# ==== Data ====
def load_data(cfg):
    p = cfg.params
    train = ChestXray(cfg.data, "train", p.get("train_samples"), p["stored_size"])
    test = ChestXray(cfg.data, "test", p.get("test_samples"), p["stored_size"])
    return train, test


def train_batches(train, cfg, world, workers):
    """Augmented global batches in the shared order; each rank's slice gets the random crop/flip stream a PyTorch
    DDP rank gets (seeded by epoch, rank and first index), so the two runners train on the same pixels."""
    crop = cfg.params["crop_size"]

    def make_batch(idx, epoch, rank):
        x, y = train.batch(idx, crop, np.random.default_rng([params.SEED, epoch, rank, int(idx[0])]))
        return nchw_to(x, DATA_FORMAT), y

    return EpochBatches(len(train), cfg.params["batch_size"], make_batch, world, workers=workers)


class TestBatches(keras.utils.PyDataset):
    """Every test image once, in order, centre-cropped. The last batch may be smaller; it is padded with copies of
    its last image up to a multiple of the device count, because a data-parallel predict (JAX) splits every batch
    evenly over the devices. `evaluate` drops the padded rows."""

    def __init__(self, test, crop, batch_size, world):
        super().__init__()
        self.test, self.crop, self.world = test, crop, world
        self.batches = list(batching.eval_batches(len(test), batch_size))

    def __len__(self):
        return len(self.batches)

    def __getitem__(self, i):
        x = self.test.batch(self.batches[i], self.crop)[0]
        x = np.concatenate([x, np.repeat(x[-1:], -len(x) % self.world, axis=0)])
        return nchw_to(x, DATA_FORMAT)


# ==== Model ====
def data_parallel(cfg, world):
    """The scope to build and compile the model in, after setting up `world` devices. Must run before the backend
    initializes its devices: on the CPU, TF and JAX are asked for `world` logical CPU devices, so the same code path
    runs in the CPU tests."""
    if world == 1:
        return contextlib.nullcontext(), "none"
    if BACKEND == "torch":
        raise Skip(
            "data-parallel fit is not available on Keras' torch backend: keras.distribution is implemented for "
            "JAX (and TF) only and the torch trainer has no tf.distribute counterpart; torch DDP means a "
            "hand-written loop instead of model.fit, which the pytorch runner already covers"
        )
    check_device(cfg)  # GPU cells only: it leaves the CPU devices unset
    if BACKEND == "jax":
        import jax

        if cfg.device == "cpu":
            jax.config.update("jax_num_cpu_devices", world)  # only before the first jax.devices(), as here
        devices = keras.distribution.list_devices(cfg.device)
        if len(devices) < world:  # a bug here, not an unsupported combination
            raise RuntimeError(
                f"{world} CPU devices asked for, JAX made {len(devices)}: CPU devices can only be "
                "split before JAX initializes"
            )
        # rosetta: data-parallel
        # Replicates the variables and splits every global batch along axis 0 over the devices.
        keras.distribution.set_distribution(keras.distribution.DataParallel(devices=devices[:world]))
        return contextlib.nullcontext(), "keras.distribution.DataParallel"
    import tensorflow as tf

    if cfg.device == "cpu":  # only before TF's runtime starts, as here
        cpu = tf.config.list_physical_devices("CPU")[0]
        tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * world)
    devices = [d.name for d in tf.config.list_logical_devices("CPU" if cfg.device == "cpu" else "GPU")][:world]
    # rosetta: data-parallel
    # Variables are mirrored on every device; gradients are all-reduced (NCCL on GPUs) before the update.
    return tf.distribute.MirroredStrategy(devices).scope(), "tf.distribute.MirroredStrategy"


# rosetta: model
def build_model(cfg=None, num_classes=14):
    """The zoo's DenseNet-121 with torchvision's BatchNorm ε and momentum and a new head of logits, for images of any
    size; main loads the canonical weights into it."""
    return densenet121(num_classes)


# ==== Train step ====
# rosetta: train-step
# Keras owns the training loop: `compile()` fixes loss and optimizer and `fit()` runs the step (and, under a
# distribution or strategy, the gradient all-reduce). This function is the whole of what a Keras user writes for it.
def train_step(model, batches, cfg, switches, timer, world):
    p = cfg.params
    # rosetta: optimizer
    model.compile(
        optimizer=keras.optimizers.Adam(
            learning_rate=p["lr"] * world,  # linear scaling with the batch
            beta_1=p["beta1"],
            beta_2=p["beta2"],
            epsilon=p["eps"],
        ),
        # rosetta: loss
        loss=keras.losses.BinaryCrossentropy(from_logits=True),  # sigmoid inside the loss (lesson 6)
        jit_compile=switches["jit_compile"],
    )
    # rosetta: end
    # Build the compiled loss here: else fit first peeks a batch through the PyDataset's worker queue to build it, and
    # on JAX Keras 3.15 then serves the batches its workers made for that peek first, out of the shared order.
    labels = np.zeros((1, p["num_classes"]), np.float32)
    model.compute_loss(y=labels, y_pred=labels)
    model.fit(batches, epochs=p["epochs"], shuffle=False, callbacks=[batches.callback, timer], verbose=0)


# ==== Evaluate ====
# rosetta: evaluate
def evaluate(model, test, crop, batch_size, world):
    """Mean AUC over the 14 findings on every test image (centre crop, no flip)."""
    logits = np.asarray(model.predict(TestBatches(test, crop, batch_size, world), verbose=0), np.float32)[: len(test)]
    return metrics.mean_auc(1 / (1 + np.exp(-logits)), test.labels)


# ==== Main ====
def main(cfg):
    p, switches = cfg.params, resolve_switches(SWITCHES, cfg)
    world = max(cfg.gpus, 1)
    scope, parallel = data_parallel(cfg, world)  # first: before anything touches the devices
    check_device(cfg)
    policy = set_precision(cfg.precision, cfg.device)
    keras.utils.set_random_seed(0)
    workers = p["loader_workers"] * world
    train, test = load_data(cfg)
    batches = train_batches(train, cfg, world, workers)
    timer = EpochTimer(window_steps("densenet121"))
    with scope:
        model = build_model(num_classes=p["num_classes"])
        # rosetta: init
        weights, source = canonical.load(cfg.data, "densenet121")  # ImageNet + seeded head, else the seeded init
        load_canonical(model, weights)
        # rosetta: end
        with input_wait(InputWait()) as wait:
            train_step(model, batches, cfg, switches, timer, world)

    auc, classes = evaluate(model, test, p["crop_size"], p["batch_size"] * world, world)
    samples = len(batches) * p["batch_size"] * world
    differences = (
        [DIFFERENCES["adam"], DIFFERENCES["biased_var"]]
        + ([DIFFERENCES["sync_bn"]] if BACKEND == "jax" and world > 1 else [])
        + [*FIT_HOST_SYNCS]
    )
    return {
        "metrics": train_metrics(
            timer.epoch_seconds,
            samples,
            warmup=timer.warmup,
            steps=len(batches),
            windows=timer.windows,
            auc=auc,
            auc_classes=classes,
            train_minutes=sum(timer.epoch_seconds) / 60,
            final_loss=timer.final_loss,
            devices=world,
            weights=source,
            parameters=count_parameters(model),
            global_batch=p["batch_size"] * world,
            train_samples=len(train),
            test_samples=len(test),
            crop_size=p["crop_size"],
            epochs=p["epochs"],
            data_placement="host",
            differences=differences,
            input_pipeline=(
                f"keras PyDataset, {workers} worker threads ({p['loader_workers']} per device), a new pool each epoch"
                if workers > 1
                else "keras PyDataset in fit's own thread (1 worker in all: Keras starts no pool for one)"
            ),
            loader_workers=p["loader_workers"],
            input_wait_seconds=wait.seconds,
            input_wait_fraction=wait.fraction(sum(timer.epoch_seconds)),
        ),
        "timing": train_timing(timer.windows, warmup=timer.warmup, window=timer.window),
        "switches": {
            **switches,
            "data_parallel": parallel,
            "data_format": DATA_FORMAT,
            "dtype_policy": policy,
            "jit_compile_resolved": model.jit_compile,
            "backend": BACKEND,
            "adam_epsilon": f"{p['eps']:g}, before bias correction (Keras)",
        },
    }
