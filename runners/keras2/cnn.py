"""Keras 2.3 (CNTK 2.7 / Theano 1.0 backend) · cnn · a VGG-style CNN trained on CIFAR-10 with SGD + momentum via
`model.fit`, channels_first."""

import keras
import numpy as np
from keras import layers

from runners.keras2 import (
    EpochBatches,
    EpochTimer,
    backend_switches,
    canonical_kernel,
    check_device,
    check_precision,
    count_parameters,
    differences,
    fit_steps,
    keras_kernel,
    nchw_to,
)
from shared import canonical, metrics
from shared.datasets import load_cifar10
from shared.runner import resolve_switches
from shared.timing import train_metrics, train_timing

# ==== Config ====
# Hyperparameters come from shared/params.py through cfg.params (epochs, batch_size, lr, momentum, samples).
SWITCHES = {
    "data_format": "channels_first",  # NCHW, the native layout of CNTK's and Theano's convolutions and of cuDNN
    # (lesson 2); channels_last makes both backends transpose around every conv
    "workers": 0,  # fit's batch-gathering threads; 0 gathers each batch in the training thread
    # like every other runner (Keras 2's OrderedEnqueuer polls its queue with
    # 0.1 s sleeps at each epoch's end)
    "dropout": True,  # off only in the training-equivalence test (its step must be deterministic)
}
# Data placement is "host" (the only choice with `fit` on a Sequence): every batch is gathered in host memory in the
# shared order and fed to the backend inside the clock.


# ==== Data ====
def load_data(cfg, data_format):
    """CIFAR-10 as float32 arrays in the model's layout (the shared files are NCHW), int32 labels."""
    p = cfg.params
    x_train, y_train, x_test, y_test = load_cifar10(cfg.data, p.get("train_samples"), p.get("test_samples"))
    return (
        nchw_to(x_train, data_format),
        y_train.astype(np.int32),
        nchw_to(x_test, data_format),
        y_test.astype(np.int32),
    )


# ==== Model ====
# rosetta: model
def build_model(cfg=None, data_format="channels_first", dropout=True):
    """Keras' defaults are the canonical init: Glorot-uniform kernels (lesson 7), zero biases. Every conv, pool and
    flatten follows the global image_data_format, which Keras 2 users set once (keras.json or this call)."""
    keras.backend.set_image_data_format(data_format)
    shape = (3, 32, 32) if data_format == "channels_first" else (32, 32, 3)
    rates = (0.25, 0.25, 0.5) if dropout else (0.0, 0.0, 0.0)
    return keras.models.Sequential(
        [
            layers.Conv2D(50, 3, padding="same", activation="relu", input_shape=shape, name="conv1"),
            layers.Conv2D(50, 3, padding="same", name="conv2"),
            layers.MaxPooling2D(2),  # Keras' pool stride defaults to the pool size (lesson 11)
            layers.Activation("relu"),  # ReLU after pooling: 4x fewer elements (lesson 10)
            layers.Dropout(rates[0]),  # (N, 50, 16, 16); off in predict/evaluate (lesson 4)
            layers.Conv2D(100, 3, padding="same", activation="relu", name="conv3"),
            layers.Conv2D(100, 3, padding="same", name="conv4"),
            layers.MaxPooling2D(2),
            layers.Activation("relu"),
            layers.Dropout(rates[1]),  # (N, 100, 8, 8)
            layers.Flatten(),  # 6400 in H·W·C order (Keras transposes NCHW first)
            layers.Dense(512, activation="relu", name="fc1"),
            layers.Dropout(rates[2]),
            layers.Dense(10, name="fc2"),  # logits; softmax lives in the loss (lesson 6)
        ],
        name="cnn",
    )


# rosetta: init
def load_canonical(model, weights):
    """Canonical → Keras: conv OIHW → HWIO (flipped on Theano: `keras_kernel`), dense (out, in) → (in, out), and
    fc1's inputs reordered from the canonical C·H·W flatten to Keras' H·W·C."""
    w = {name: np.asarray(a) for name, a in weights.items()}
    for conv in ("conv1", "conv2", "conv3", "conv4"):
        model.get_layer(conv).set_weights([keras_kernel(w[f"{conv}.weight"]), w[f"{conv}.bias"]])
    fc1 = w["fc1.weight"].reshape(512, 100, 8, 8).transpose(2, 3, 1, 0).reshape(6400, 512)  # (C,H,W) → (H,W,C) rows
    model.get_layer("fc1").set_weights([fc1, w["fc1.bias"]])
    model.get_layer("fc2").set_weights([w["fc2.weight"].T, w["fc2.bias"]])


def read_canonical(model):
    out = {}
    for conv in ("conv1", "conv2", "conv3", "conv4"):
        kernel, bias = model.get_layer(conv).get_weights()
        out[f"{conv}.weight"], out[f"{conv}.bias"] = canonical_kernel(kernel), bias
    kernel, out["fc1.bias"] = model.get_layer("fc1").get_weights()
    out["fc1.weight"] = kernel.reshape(8, 8, 100, 512).transpose(3, 2, 0, 1).reshape(512, 6400)  # H·W·C → C·H·W
    kernel, out["fc2.bias"] = model.get_layer("fc2").get_weights()
    out["fc2.weight"] = kernel.T
    return out


def predict_logits(model, x):
    """Logits in inference mode (predict feeds learning phase 0: dropout off) for NCHW input `x`."""
    x = nchw_to(np.asarray(x, np.float32), model.get_layer("conv1").data_format)
    return model.predict(x, batch_size=len(x))


# ==== Train step ====
# rosetta: train-step
# Keras owns the training loop: `compile()` fixes loss and optimizer and `fit()` runs the step. This function is the
# whole of what a Keras user writes for it.
def compile_model(model, cfg):
    p = cfg.params
    # rosetta: optimizer
    # Keras' SGD is plain momentum, v = μv − lr·g (lesson 8); on CNTK Keras runs its own update expressions through
    # a universal learner, so CNTK's unit-gain momentum never applies.
    model.compile(
        optimizer=keras.optimizers.SGD(learning_rate=p["lr"], momentum=p["momentum"]),
        # rosetta: loss
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    )  # integer labels (6, 11)


def train_step(model, batches, cfg, switches, timer):
    compile_model(model, cfg)
    # rosetta: end
    timer.start_fit()  # the train function is built (compiled) inside fit
    model.fit(
        batches,
        epochs=cfg.params["epochs"],
        shuffle=False,
        workers=int(switches["workers"]),
        callbacks=[timer],
        verbose=0,
    )


def train_steps(cfg, weights, x, y, steps):
    """The training-equivalence test's entry (tests/test_training_equivalence.py): from canonical `weights`, `steps`
    steps of `fit` on the one batch (x, y) as main compiles the model; (each step's loss, weights after each)."""
    switches = resolve_switches(SWITCHES, cfg)
    model = build_model(data_format=switches["data_format"], dropout=switches["dropout"])
    load_canonical(model, weights)
    compile_model(model, cfg)
    x = nchw_to(np.asarray(x, np.float32), switches["data_format"])
    return fit_steps(model, x, np.asarray(y, np.int32), steps, read_canonical)


# ==== Evaluate ====
# rosetta: evaluate
def evaluate(model, x_test, y_test, batch_size):
    """predict() runs in inference mode (learning phase 0: dropout off, lesson 4) over every test sample, the last
    partial batch too."""
    logits = model.predict(x_test, batch_size=batch_size)
    return metrics.accuracy(np.asarray(logits, np.float32), y_test)


# ==== Main ====
def main(cfg):
    p, switches = cfg.params, resolve_switches(SWITCHES, cfg)
    check_device(cfg)
    check_precision(cfg.precision)
    np.random.seed(0)  # Keras 2's initializers and dropout seed from NumPy
    x_train, y_train, x_test, y_test = load_data(cfg, switches["data_format"])
    model = build_model(data_format=switches["data_format"], dropout=switches["dropout"])
    load_canonical(model, canonical.init_weights("cnn"))  # the same start in every framework (docs/design.md)
    batches = EpochBatches(len(x_train), p["batch_size"], lambda idx: (x_train[idx], y_train[idx]))
    timer = EpochTimer()
    train_step(model, batches, cfg, switches, timer)

    accuracy = evaluate(model, x_test, y_test, p["batch_size"])
    samples = len(batches) * p["batch_size"]
    return {
        "metrics": train_metrics(
            timer.epoch_seconds,
            samples,
            warmup=timer.warmup,
            steps=len(batches),
            windows=timer.windows,
            accuracy=accuracy,
            init="canonical",
            parameters=count_parameters(model),
            **metrics.loss_metrics(timer.losses, len(batches)),
            epochs=p["epochs"],
            train_samples=len(x_train),
            test_samples=len(x_test),
            data_placement="host",
            differences=differences(),
        ),
        "timing": train_timing(timer.windows, warmup=timer.warmup),
        "switches": {
            **switches,
            "image_data_format": keras.backend.image_data_format(),
            "backend": keras.backend.backend(),
            "floatx": keras.backend.floatx(),
            **backend_switches(),
        },
    }
