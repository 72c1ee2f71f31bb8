"""TensorFlow 2.21 · gru · embedding → GRU(100) → dense 2 on IMDB sentiment with Adam, in a tf.function/GradientTape
loop; the recurrence is tf.keras.layers.GRU, which runs cuDNN's fused GRU kernel on a GPU."""

import numpy as np
import tensorflow as tf

from runners.keras import ADAM_EPSILON_HAT, ADAM_SPARSE_SQUARES
from runners.tensorflow import (
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
from shared.datasets import load_imdb
from shared.runner import resolve_switches
from shared.timing import timed_epochs, train_metrics, train_timing

# ==== Config ====
# Hyperparameters come from shared/params.py through cfg.params (max_features, maxlen, hidden, epochs, lr, …).
SWITCHES = {
    "xla": False,  # off: XLA has no kernel for the fused cuDNN RNN op (CudnnRNNV3), the GRU's fast path
    "data_placement": params.DATA_PLACEMENT,  # host: tf.data gathers each batch and copies it inside the clock (the
    # rule); device: the set copied to the device before it, gathered there
}
# Adam: ε = 1e-8 as everywhere, but TF's Adam (Keras 3's) adds it before the bias correction
# (runners.keras.ADAM_EPSILON_HAT; recorded in `differences`).


# ==== Data ====
def load_data(cfg):
    """IMDB as int32 token ids (N, maxlen), Keras convention, front-padded; host tensors for tf.data."""
    p = cfg.params
    return host_tensors(
        *load_imdb(cfg.data, p["max_features"], p["maxlen"], p.get("train_samples"), p.get("test_samples"))
    )


# ==== Model ====
def build_model(cfg=None):
    """TF 2 ships its RNN layers through Keras only; the layer is used as a plain callable inside our own loop.

    tf.keras.layers.GRU is the cuDNN formulation (reset_after=True: reset gate after the recurrent matmul, separate
    input and recurrent biases) and dispatches to the fused CudnnRNNV3 kernel when a GPU is visible and its arguments
    are cuDNN's (tanh, sigmoid, no recurrent dropout, not unrolled, no mask); on the CPU it runs a tf.while_loop.
    Keras' default initializers are the canonical ones: embedding U(±0.05), Glorot kernels, orthogonal recurrent.
    """
    # rosetta: model
    p = params.GRU
    return tf.keras.Sequential(
        [
            tf.keras.Input(shape=(None,), dtype="int32"),  # (N, T) token ids
            tf.keras.layers.Embedding(p["max_features"], p["embedding_dim"]),
            tf.keras.layers.GRU(p["hidden"]),  # last output only: (N, hidden)
            tf.keras.layers.Dense(p["num_classes"], dtype="float32"),  # float32 logits under mixed precision
        ]
    )


# rosetta: init
def keras_gates(w):
    """Canonical gate blocks (r, z, n) stacked on axis 0 -> Keras' order (z, r, h)."""
    r, z, n = np.split(np.asarray(w), 3, axis=0)
    return np.concatenate([z, r, n], axis=0)


# rosetta: init
def load_canonical(model, weights):
    """Keras keeps kernels as (in, 3·units), gates (z, r, h), and both biases in one (2, 3·units) array."""
    embedding, gru, fc = model.layers
    embedding.set_weights([weights["embedding.weight"]])
    gru.set_weights(
        [
            keras_gates(weights["gru.weight_ih"]).T,
            keras_gates(weights["gru.weight_hh"]).T,
            np.stack([keras_gates(weights["gru.bias_ih"]), keras_gates(weights["gru.bias_hh"])]),
        ]
    )
    fc.set_weights([np.asarray(weights["fc.weight"]).T, weights["fc.bias"]])


def canonical_gates(w):
    """Keras' gate blocks (z, r, h) on axis 0 -> canonical (r, z, n)."""
    z, r, n = np.split(np.asarray(w), 3, axis=0)
    return np.concatenate([r, z, n], axis=0)


def read_canonical(model):
    embedding, gru, fc = model.layers
    kernel, recurrent, bias = gru.get_weights()
    return {
        "embedding.weight": embedding.get_weights()[0],
        "gru.weight_ih": canonical_gates(kernel.T),
        "gru.weight_hh": canonical_gates(recurrent.T),
        "gru.bias_ih": canonical_gates(bias[0]),
        "gru.bias_hh": canonical_gates(bias[1]),
        "fc.weight": fc.get_weights()[0].T,
        "fc.bias": fc.get_weights()[1],
    }


def predict_logits(model, x):
    return model(tf.constant(x, tf.int32), training=False).numpy()


# ==== Train step ====
# rosetta: optimizer
def make_optimizer(model, p, precision):
    return optimizer_for(
        tf.keras.optimizers.Adam(p["lr"], beta_1=p["beta1"], beta_2=p["beta2"], epsilon=p["eps"]),
        precision,
        model.trainable_variables,
    )


# rosetta: train-step
def make_train_step(model, optimizer, jit_compile):
    @tf.function(jit_compile=jit_compile)
    def train_step(x, y):
        with tf.GradientTape() as tape:
            logits = model(x, training=True)
            # rosetta: loss
            loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(y, logits))
        grads = tape.gradient(scaled(optimizer, loss), model.trainable_variables)
        optimizer.apply(grads, model.trainable_variables)  # the embedding's gradient is sparse (IndexedSlices)
        return loss  # no .numpy(): the step never waits for the device

    return train_step


def train_steps(cfg, weights, x, y, steps):
    """The training-equivalence test's entry (tests/test_training_equivalence.py): from canonical `weights`, `steps`
    steps on the one batch (x, y) with main's model, optimizer and step; (each step's loss, weights after each)."""
    model = build_model()
    load_canonical(model, weights)
    train_step = make_train_step(model, make_optimizer(model, cfg.params, cfg.precision), False)
    x, y = tf.constant(x, tf.int32), tf.constant(y, tf.int32)
    losses, after = [], []
    for _ in range(steps):
        losses.append(float(train_step(x, y)))
        after.append(read_canonical(model))
    return losses, after


# ==== Evaluate ====
# rosetta: evaluate
def evaluate(model, x_test, y_test, batch_size):
    predict = tf.function(lambda x: model(x, training=False))
    logits = [predict(x).numpy() for (x,) in batch_dataset((x_test,), batching.eval_batches(len(x_test), batch_size))]
    return metrics.accuracy(np.concatenate(logits), y_test.numpy())


# ==== Main ====
def main(cfg):
    p, switches = cfg.params, resolve_switches(SWITCHES, cfg)
    device = select_devices(cfg)[0]
    set_precision(cfg.precision, cfg.device == "gpu")
    tf.keras.utils.set_random_seed(0)
    x_train, y_train, x_test, y_test = load_data(cfg)
    model = build_model()
    load_canonical(model, canonical.init_weights("gru"))  # the same start in every framework (docs/design.md)
    # rosetta: end
    optimizer = make_optimizer(model, p, cfg.precision)
    train_step = make_train_step(model, optimizer, switches["xla"])

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
            differences=[ADAM_EPSILON_HAT, ADAM_SPARSE_SQUARES],
        ),
        "timing": train_timing(windows, warmup=warmup),
        "switches": {
            **switches,
            "cudnn_rnn": bool(tf.config.list_logical_devices("GPU")),
            "device": device,
            "policy": tf.keras.mixed_precision.global_policy().name,
            "tensor_float_32": tf.config.experimental.tensor_float_32_execution_enabled(),
            "adam_epsilon": f"{p['eps']:g}, before bias correction (Keras)",
        },
    }
