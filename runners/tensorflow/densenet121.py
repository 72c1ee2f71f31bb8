"""TensorFlow 2.21 · densenet121 · tf.keras.applications DenseNet-121 (with torchvision's BatchNorm,
runners/keras/networks.py) fine-tuned on ChestX-ray14 (14 sigmoid outputs), data-parallel over N devices with
tf.distribute.MirroredStrategy in one process (N logical CPUs on a CPU)."""

import numpy as np
import tensorflow as tf

from runners.keras import ADAM_EPSILON_HAT
from runners.keras.networks import densenet121, load_canonical, predict_logits  # noqa: F401 (equivalence interface)
from runners.tensorflow import (
    count_parameters,
    epoch_iterator,
    optimizer_for,
    scaled,
    select_devices,
    set_precision,
    sync,
)
from shared import batching, canonical, metrics, params
from shared.datasets import ChestXray
from shared.runner import resolve_switches
from shared.timing import InputWait, timed_epochs, train_metrics, train_timing, window_steps

# ==== Config ====
# Epochs, batch size per device, lr (× devices), crop and stored sizes come from shared/params.py.
# No channels_first switch: Keras 3's DenseNet refuses channels_first on every backend, so the pipeline feeds NHWC
# (on a GPU, Grappler's layout optimizer may still run the convolutions in NCHW internally).
SWITCHES = {
    "xla": False,  # jit_compile each replica's step; off: not yet measured on GPUs against plain graphs
}
# Weights: the canonical ones (ImageNet from the `weights` step with the shared seeded head, else the shared seeded
# init; record field `weights`), not Keras' own ImageNet files, so every framework starts from the same numbers.
# Data placement is "host" by the nature of the task: each global batch is cropped in host memory by tf.data's threads
# and copied to the devices inside the clock, prefetched.
# The input rule (README): one tf.data pipeline for the whole run, built before the clock, its map running params'
# `loader_workers` parallel calls per device (tf.data's own threads, kept across epochs; the NumPy crop holds the GIL
# part of the time, which threads share); the record says how long the loop waited for them.
# Formulation differences from torchvision's DenseNet-121 and PyTorch's Adam (recorded in `differences`):
# - TF's Adam (Keras 3's) adds ε before the bias correction (runners.keras.ADAM_EPSILON_HAT);
# - Keras' BatchNorm updates its moving variance with the biased batch variance, PyTorch with the unbiased one (a
#   factor n / (n - 1), n = batch × height × width: negligible at 224², visible in the tiny scale's 1×1 last block).
# MirroredStrategy normalizes each replica's slice on its own, as PyTorch's DDP does.
DIFFERENCES = [
    ADAM_EPSILON_HAT,
    "BatchNorm moving variance updated with the biased batch variance (Keras); torchvision uses the unbiased one",
]


# ==== Data ====
def load_data(cfg):
    p = cfg.params
    train = ChestXray(cfg.data, "train", p.get("train_samples"), p["stored_size"])
    test = ChestXray(cfg.data, "test", p.get("test_samples"), p["stored_size"])
    return train, test


def train_dataset(train, crop, batch_size, world, epochs, parallel):
    """Every epoch's global batches (batch_size × world) in the shared order; the strategy later cuts each into the
    replicas' slices in order, so replica r trains on exactly rank r's batch of shared.batching (as PyTorch's DDP rank
    r does), randomly cropped and flipped with that rank's seed."""
    steps = [
        (epoch, ranks)
        for epoch in range(epochs)
        for ranks in zip(*(batching.train_batches(len(train), batch_size, epoch, r, world) for r in range(world)))
    ]

    def load(step):  # NumPy, run by tf.data's threads
        epoch, ranks = steps[step]
        xs, ys = zip(
            *(
                train.batch(idx, crop, np.random.default_rng([params.SEED, epoch, r, int(idx[0])]))
                for r, idx in enumerate(ranks)
            )
        )
        x = np.concatenate(xs).transpose(0, 2, 3, 1)  # NCHW files -> NHWC, the only layout DenseNet takes
        return np.ascontiguousarray(x), np.concatenate(ys).astype(np.float32)

    shapes = ([batch_size * world, crop, crop, 3], [batch_size * world, params.DENSENET121["num_classes"]])

    def load_tf(step):
        return [tf.ensure_shape(t, s) for t, s in zip(tf.numpy_function(load, [step], (tf.float32,) * 2), shapes)]

    ds = tf.data.Dataset.range(len(steps)).map(load_tf, num_parallel_calls=parallel)  # deterministic: keeps order
    return ds.prefetch(tf.data.AUTOTUNE)


# ==== Model ====
# rosetta: model
def build_model(cfg=None):
    """The zoo's DenseNet-121 (channels_last only in Keras 3) with torchvision's BatchNorm ε and momentum and a new
    14-way head whose logits stay float32 under mixed precision; main loads the canonical weights into it."""
    return densenet121(params.DENSENET121["num_classes"])


# ==== Train step ====
# rosetta: train-step
def make_train_step(model, optimizer, strategy, global_batch, jit_compile):
    @tf.function(jit_compile=jit_compile)
    def replica_step(x, y):  # runs once per device on its slice of the batch
        with tf.GradientTape() as tape:
            logits = model(x, training=True)
            # rosetta: loss
            per_example = tf.reduce_mean(tf.nn.sigmoid_cross_entropy_with_logits(y, logits), axis=1)  # lesson 6
            # Sum / global batch: the replicas' gradients, summed by the all-reduce, give the global mean's gradient.
            loss = tf.nn.compute_average_loss(per_example, global_batch_size=global_batch)
        grads = tape.gradient(scaled(optimizer, loss), model.trainable_variables)
        optimizer.apply(grads, model.trainable_variables)  # all-reduces the gradients across replicas
        return loss

    @tf.function
    def train_step(batch):
        return strategy.reduce(tf.distribute.ReduceOp.SUM, strategy.run(replica_step, args=batch), axis=None)

    return train_step


# ==== Evaluate ====
# rosetta: evaluate
def evaluate(model, test, crop, batch_size):
    """Mean AUC over the 14 findings on every test image (centre crop, no flip), on the first device."""
    predict = tf.function(lambda x: tf.sigmoid(model(x, training=False)))
    scores = []
    for idx in batching.eval_batches(len(test), batch_size):
        x, _ = test.batch(idx, crop)
        scores.append(predict(np.ascontiguousarray(x.transpose(0, 2, 3, 1))).numpy())
    return metrics.mean_auc(np.concatenate(scores), test.labels)


# ==== Main ====
def main(cfg):
    p, switches = cfg.params, resolve_switches(SWITCHES, cfg)
    world = max(cfg.gpus, 1)
    devices = select_devices(cfg, world)  # before anything starts TF's runtime
    on_gpu = cfg.device == "gpu"
    set_precision(cfg.precision, on_gpu)
    # rosetta: data-parallel
    # One process drives every device. NCCL all-reduces between GPUs; logical CPUs have no NCCL, so gradients are
    # summed on one device instead.
    cross_device_ops = None if on_gpu else tf.distribute.ReductionToOneDevice()
    strategy = (
        tf.distribute.MirroredStrategy(devices, cross_device_ops=cross_device_ops)
        if world > 1
        else tf.distribute.OneDeviceStrategy(devices[0])
    )
    # rosetta: end
    tf.keras.utils.set_random_seed(0)
    train, test = load_data(cfg)
    with strategy.scope():  # variables mirrored on every device
        model = build_model()
        # rosetta: init
        weights, source = canonical.load(cfg.data, "densenet121")  # ImageNet + seeded head, else the seeded init
        load_canonical(model, weights)
        # rosetta: optimizer
        adam = tf.keras.optimizers.Adam(
            p["lr"] * world,
            beta_1=p["beta1"],
            beta_2=p["beta2"],  # linear lr scaling
            epsilon=p["eps"],
        )
        optimizer = optimizer_for(adam, cfg.precision, model.trainable_variables)
    train_step = make_train_step(model, optimizer, strategy, p["batch_size"] * world, switches["xla"])
    parallel = p["loader_workers"] * world  # the same workers per device as every framework

    steps = batching.steps_per_epoch(len(train), p["batch_size"], world)
    dataset = train_dataset(train, p["crop_size"], p["batch_size"], world, p["epochs"], parallel)
    batches = strategy.experimental_distribute_dataset(dataset)  # splits each global batch across the replicas
    epoch_batches, wait = epoch_iterator(batches, steps), InputWait()
    losses = []  # every step's loss, left on the device
    epoch_seconds, warmup, _, windows = timed_epochs(
        p["epochs"],
        lambda epoch: wait(epoch_batches(epoch)),
        train_step,
        sync,
        outputs=losses,
        window=window_steps("densenet121"),
    )

    auc, classes = evaluate(model, test, p["crop_size"], p["batch_size"])
    samples = steps * p["batch_size"] * world
    return {
        "metrics": train_metrics(
            epoch_seconds,
            samples,
            warmup=warmup,
            steps=steps,
            windows=windows,
            auc=auc,
            auc_classes=classes,
            **metrics.loss_metrics([float(loss) for loss in losses], steps),
            train_minutes=sum(epoch_seconds) / 60,
            devices=strategy.num_replicas_in_sync,
            weights=source,
            parameters=count_parameters(model),
            global_batch=p["batch_size"] * world,
            train_samples=len(train),
            test_samples=len(test),
            crop_size=p["crop_size"],
            epochs=p["epochs"],
            data_placement="host",
            differences=DIFFERENCES,
            input_pipeline=f"tf.data map, {parallel} parallel calls ({p['loader_workers']} per "
            f"device), one iterator for all epochs",
            loader_workers=p["loader_workers"],
            input_wait_seconds=wait.seconds,
            input_wait_fraction=wait.fraction(sum(epoch_seconds)),
        ),
        "timing": train_timing(windows, warmup=warmup, window=window_steps("densenet121")),
        "switches": {
            **switches,
            "strategy": type(strategy).__name__,
            "devices": list(strategy.extended.worker_devices),
            "cross_device_ops": (type(cross_device_ops).__name__ if cross_device_ops else "NcclAllReduce")
            if world > 1
            else None,
            "memory_format": "NHWC",
            "policy": tf.keras.mixed_precision.global_policy().name,
            "adam_epsilon": f"{p['eps']:g}, before bias correction (Keras)",
            "tensor_float_32": tf.config.experimental.tensor_float_32_execution_enabled(),
        },
    }
