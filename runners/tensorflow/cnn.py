"""TensorFlow 2.21 · cnn · a VGG-style CNN trained on CIFAR-10 with SGD + momentum: a tf.Module of tf.nn ops,
a tf.data pipeline and a tf.function/GradientTape train step (optionally XLA-compiled)."""

import numpy as np
import tensorflow as tf

from runners.tensorflow import (
    auto,
    batch_dataset,
    check_placement,
    count_parameters,
    device_tensors,
    epoch_iterator,
    host_tensors,
    index_dataset,
    optimizer_for,
    scaled,
    select_devices,
    set_precision,
    sync,
    train_batches,
)
from shared import batching, canonical, metrics, params
from shared.datasets import load_cifar10
from shared.record import Skip
from shared.runner import resolve_switches
from shared.timing import timed_epochs, train_metrics, train_timing

# ==== Config ====
# Hyperparameters come from shared/params.py through cfg.params (epochs, batch_size, lr, momentum, samples).
SWITCHES = {
    "xla": None,  # jit_compile the train step, fusing elementwise ops; None = GPU only (no gain on 2 CPUs)
    "channels_first": None,  # None = NCHW on GPU (cuDNN's classic layout, lesson 2), NHWC on CPU (its only pool grad)
    "dropout": True,  # off only in the training-equivalence test (its step must be deterministic)
    "data_placement": params.DATA_PLACEMENT,  # host: tf.data gathers each batch and copies it inside the clock (the
    # rule); device: the set copied to the device before it, gathered there
}
# tuning=tuned: TensorFlow's own fast path (docs/tuned.md), same work. Its GRU has none: XLA cannot compile the fused
# cuDNN RNN op that is that GRU's fast path.
TUNED = {
    "xla": True,  # the train step jit_compiled on every device: XLA fuses the ops around the convolutions
}
LAYERS = {  # conv kernels HWIO (TF's filter layout in both data formats), dense (in, out)
    "conv1": (3, 3, 3, 50),
    "conv2": (3, 3, 50, 50),
    "conv3": (3, 3, 50, 100),
    "conv4": (3, 3, 100, 100),
    "fc1": (6400, 512),
    "fc2": (512, 10),
}


# ==== Data ====
def load_data(cfg, data_format):
    """CIFAR-10 as host tensors, converted once to the model's layout (the files are NCHW)."""
    p = cfg.params
    x_train, y_train, x_test, y_test = load_cifar10(cfg.data, p.get("train_samples"), p.get("test_samples"))
    if data_format == "NHWC":
        x_train, x_test = (np.ascontiguousarray(x.transpose(0, 2, 3, 1)) for x in (x_train, x_test))
    return host_tensors(x_train, y_train, x_test, y_test)


# ==== Model ====
def glorot_uniform(shape):
    """Keras' default kernel initializer (lesson 7): U(±sqrt(6 / (fan_in + fan_out))), fans include the 3×3 window."""
    window = int(np.prod(shape[:-2]))
    limit = np.sqrt(6.0 / (window * (shape[-2] + shape[-1])))
    return tf.random.uniform(shape, -limit, limit)


# rosetta: model
class CNN(tf.Module):
    def __init__(self, data_format="NHWC", dropout=True):
        super().__init__(name="cnn")
        self.data_format, self.dropout = data_format, dropout
        # Variables stay float32; under amp/bf16 they are cast to the policy's compute dtype in the forward pass,
        # which is what a Keras layer does under a mixed-precision policy.
        self.dtype = tf.keras.mixed_precision.global_policy().compute_dtype
        self.kernels = {
            name: tf.Variable(glorot_uniform(shape), name=name + "_kernel") for name, shape in LAYERS.items()
        }
        self.biases = {name: tf.Variable(tf.zeros(shape[-1]), name=name + "_bias") for name, shape in LAYERS.items()}

    def conv(self, x, name):
        x = tf.nn.conv2d(x, tf.cast(self.kernels[name], self.dtype), 1, "SAME", data_format=self.data_format)
        return tf.nn.bias_add(x, tf.cast(self.biases[name], self.dtype), data_format=self.data_format)

    def pool(self, x):
        return tf.nn.max_pool2d(x, 2, 2, "VALID", data_format=self.data_format)

    def dense(self, x, name):
        return tf.matmul(x, tf.cast(self.kernels[name], self.dtype)) + tf.cast(self.biases[name], self.dtype)

    # rosetta: model
    def __call__(self, x, training=False):  # x: (N, 32, 32, 3) NHWC or (N, 3, 32, 32) NCHW
        dropout = tf.nn.dropout if training and self.dropout else (lambda x, rate: x)  # off in evaluation (lesson 4)
        x = tf.nn.relu(self.conv(tf.cast(x, self.dtype), "conv1"))
        x = tf.nn.relu(self.pool(self.conv(x, "conv2")))  # ReLU after pooling: 4x fewer elements (lesson 10)
        x = dropout(x, 0.25)  # (N, 16, 16, 50)
        x = tf.nn.relu(self.conv(x, "conv3"))
        x = tf.nn.relu(self.pool(self.conv(x, "conv4")))
        x = dropout(x, 0.25)  # (N, 8, 8, 100)
        if self.data_format == "NHWC":
            x = tf.transpose(x, [0, 3, 1, 2])  # flatten C·H·W, the canonical fc1 row order
        x = tf.nn.relu(self.dense(tf.reshape(x, [-1, 6400]), "fc1"))
        x = dropout(x, 0.5)
        return tf.cast(self.dense(x, "fc2"), tf.float32)  # float32 logits; softmax is in the loss (lesson 6)


def build_model(data_format="NHWC", dropout=True):
    return CNN(data_format, dropout)


# rosetta: init
def load_canonical(model, weights):
    """Canonical conv OIHW -> TF's HWIO; canonical dense (out, in) -> (in, out)."""
    for name in LAYERS:
        w = np.asarray(weights[name + ".weight"])
        model.kernels[name].assign(w.transpose(2, 3, 1, 0) if w.ndim == 4 else w.T)
        model.biases[name].assign(weights[name + ".bias"])


def read_canonical(model):
    out = {}
    for name in LAYERS:
        w = model.kernels[name].numpy()
        out[name + ".weight"], out[name + ".bias"] = (
            w.transpose(3, 2, 0, 1) if w.ndim == 4 else w.T,
            model.biases[name].numpy(),
        )
    return out


def predict_logits(model, x):
    """x: canonical NCHW float32."""
    x = tf.constant(x, tf.float32)
    return model(tf.transpose(x, [0, 2, 3, 1]) if model.data_format == "NHWC" else x, training=False).numpy()


# ==== Train step ====
# rosetta: optimizer
def make_optimizer(model, p, precision):
    return optimizer_for(
        tf.keras.optimizers.SGD(p["lr"], momentum=p["momentum"]),
        precision,  # lesson 8
        model.trainable_variables,
    )


# rosetta: train-step
def make_train_step(model, optimizer, jit_compile):
    @tf.function(jit_compile=jit_compile)  # one graph per shape: no Python per step
    def train_step(x, y):
        with tf.GradientTape() as tape:
            logits = model(x, training=True)
            # rosetta: loss
            # Integer labels, no one-hot (lesson 11).
            loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(y, logits))
        grads = tape.gradient(scaled(optimizer, loss), model.trainable_variables)
        optimizer.apply(grads, model.trainable_variables)  # amp: unscales, skips the step on inf/nan
        return loss  # a device tensor: no host sync inside the step

    return train_step


def train_steps(cfg, weights, x, y, steps):
    """The training-equivalence test's entry (tests/test_training_equivalence.py): from canonical `weights`, `steps`
    steps on the one batch (x, y: NCHW) with main's model, optimizer and step; (each step's loss, weights after
    each)."""
    switches = resolve_switches(SWITCHES, cfg, TUNED)
    model = build_model("NHWC", switches["dropout"])
    load_canonical(model, weights)
    train_step = make_train_step(model, make_optimizer(model, cfg.params, cfg.precision), bool(switches["xla"]))
    x, y = tf.constant(np.asarray(x, np.float32).transpose(0, 2, 3, 1)), tf.constant(y, tf.int32)
    losses, after = [], []
    for _ in range(steps):
        losses.append(float(train_step(x, y)))
        after.append(read_canonical(model))
    return losses, after


# ==== Evaluate ====
# rosetta: evaluate
def evaluate(model, x_test, y_test, batch_size):
    predict = tf.function(lambda x: model(x, training=False))  # dropout off in evaluation (lesson 4)
    logits = [predict(x).numpy() for (x,) in batch_dataset((x_test,), batching.eval_batches(len(x_test), batch_size))]
    return metrics.accuracy(np.concatenate(logits), y_test.numpy())


# ==== Main ====
def data_format(switches, on_gpu):
    first = auto(switches["channels_first"], on_gpu)
    if first and not on_gpu:
        raise Skip("channels_first on the CPU: TensorFlow's CPU MaxPoolGrad kernel supports NHWC only")
    return "NCHW" if first else "NHWC"


def main(cfg):
    p, switches = cfg.params, resolve_switches(SWITCHES, cfg, TUNED)
    device = select_devices(cfg)[0]
    on_gpu = cfg.device == "gpu"
    set_precision(cfg.precision, on_gpu)
    fmt = data_format(switches, on_gpu)
    tf.keras.utils.set_random_seed(0)  # Python, NumPy and TF seeds: weights, dropout
    x_train, y_train, x_test, y_test = load_data(cfg, fmt)
    model = build_model(fmt, switches["dropout"])
    load_canonical(model, canonical.init_weights("cnn"))  # the same start in every framework (docs/design.md)
    # rosetta: end
    optimizer = make_optimizer(model, p, cfg.precision)
    train_step = make_train_step(model, optimizer, auto(switches["xla"], on_gpu))

    steps = batching.steps_per_epoch(len(x_train), p["batch_size"])
    index_batches = train_batches(len(x_train), p["batch_size"], p["epochs"])
    if check_placement(switches["data_placement"]) == "device":
        x_device, y_device = device_tensors(device, x_train, y_train)
        dataset = index_dataset(index_batches)
        step = tf.function(lambda idx: train_step(tf.gather(x_device, idx), tf.gather(y_device, idx)))
    else:
        dataset, step = batch_dataset((x_train, y_train), index_batches, device), lambda batch: train_step(*batch)
    losses = []  # every step's loss, left on the device
    epoch_seconds, warmup, _, windows = timed_epochs(
        p["epochs"], epoch_iterator(dataset, steps), step, sync, outputs=losses
    )

    accuracy = evaluate(model, x_test, y_test, p["batch_size"])
    samples = steps * p["batch_size"]
    return {
        "metrics": train_metrics(
            epoch_seconds,
            samples,
            warmup=warmup,
            steps=steps,
            windows=windows,
            accuracy=accuracy,
            init="canonical",
            parameters=count_parameters(model),
            **metrics.loss_metrics([float(loss) for loss in losses], steps),
            epochs=p["epochs"],
            train_samples=len(x_train),
            test_samples=len(x_test),
            data_placement=switches["data_placement"],
            differences=[],
        ),
        "timing": train_timing(windows, warmup=warmup),
        "switches": {
            **switches,
            "xla": auto(switches["xla"], on_gpu),
            "memory_format": fmt,
            "device": device,
            "policy": tf.keras.mixed_precision.global_policy().name,
            "tensor_float_32": tf.config.experimental.tensor_float_32_execution_enabled(),
        },
    }
