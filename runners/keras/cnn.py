"""Keras 3.15 (TF / JAX / PyTorch backend) · cnn · a VGG-style CNN trained on CIFAR-10 with SGD + momentum via
`model.fit`."""

import keras
import numpy as np
from keras import layers

from runners.keras import (
    FAST_PATH,
    FIT_HOST_SYNCS,
    EpochBatches,
    EpochTimer,
    check_device,
    count_parameters,
    data_format_of,
    fit_steps,
    nchw_to,
    set_precision,
)
from shared import canonical, metrics
from shared.datasets import load_cifar10
from shared.runner import resolve_switches
from shared.timing import train_metrics, train_timing

# ==== Config ====
# Hyperparameters come from shared/params.py through cfg.params (epochs, batch_size, lr, momentum, samples).
SWITCHES = {
    "channels_first": None,  # NCHW; None = on a GPU (cuDNN's classic layout, lesson 2) and on the torch backend
    # (its CPU kernels are NCHW: Keras copies NHWC tensors around every conv and pool),
    # else NHWC (oneDNN/XLA CPU kernels)
    "jit_compile": "auto",  # XLA-compile the train step; Keras' "auto": JAX always, TF on GPU only, torch never
    "steps_per_execution": 1,  # batches per compiled call; >1 saves Python overhead but coarsens the warm-up timing
    "dropout": True,  # off only in the training-equivalence test (its step must be deterministic)
}
TUNED = FAST_PATH  # tuning=tuned: jit_compile, steps_per_execution 5 but on torch (runners.keras)
# Data placement is "host" (the only choice with `fit` on a PyDataset): every batch is gathered in host memory in the
# shared order and copied to the device inside the clock.


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
def build_model(cfg=None, data_format="channels_last", dropout=True):
    """Keras' defaults draw the canonical init's distribution (Glorot-uniform kernels, zero biases; lesson 7); main
    then loads the shared canonical numbers (shared.canonical.init_weights). The default layout is
    NHWC, which every backend runs on a CPU: TensorFlow's CPU Conv2D takes NCHW only through oneDNN, which TensorFlow
    turns on by default only on CPUs with AVX-512 VNNI/BF16 or AMX."""
    fmt = {"data_format": data_format}
    rates = (0.25, 0.25, 0.5) if dropout else (0.0, 0.0, 0.0)
    shape = (3, 32, 32) if data_format == "channels_first" else (32, 32, 3)
    return keras.Sequential(
        [
            keras.Input(shape),
            layers.Conv2D(50, 3, padding="same", activation="relu", name="conv1", **fmt),
            layers.Conv2D(50, 3, padding="same", name="conv2", **fmt),
            layers.MaxPooling2D(2, **fmt),  # Keras' pool stride defaults to the pool size (lesson 11)
            layers.Activation("relu"),  # ReLU after pooling: 4x fewer elements (lesson 10)
            layers.Dropout(rates[0]),  # (N, 50, 16, 16) or (N, 16, 16, 50)
            layers.Conv2D(100, 3, padding="same", activation="relu", name="conv3", **fmt),
            layers.Conv2D(100, 3, padding="same", name="conv4", **fmt),
            layers.MaxPooling2D(2, **fmt),
            layers.Activation("relu"),
            layers.Dropout(rates[1]),
            layers.Flatten(**fmt),  # 6400, always in H·W·C order (Keras transposes NCHW first)
            layers.Dense(512, activation="relu", name="fc1"),
            layers.Dropout(rates[2]),
            layers.Dense(10, name="fc2", dtype="float32"),  # logits; float32 under mixed precision (Keras guide)
        ],
        name="cnn",
    )


# rosetta: init
def load_canonical(model, weights):
    """Canonical → Keras: conv OIHW → HWIO, dense (out, in) → (in, out), and fc1's inputs reordered from the
    canonical C·H·W flatten to Keras' H·W·C."""
    w = {name: np.asarray(a) for name, a in weights.items()}
    for conv in ("conv1", "conv2", "conv3", "conv4"):
        model.get_layer(conv).set_weights([w[f"{conv}.weight"].transpose(2, 3, 1, 0), w[f"{conv}.bias"]])
    fc1 = w["fc1.weight"].reshape(512, 100, 8, 8).transpose(2, 3, 1, 0).reshape(6400, 512)  # (C,H,W) → (H,W,C) rows
    model.get_layer("fc1").set_weights([fc1, w["fc1.bias"]])
    model.get_layer("fc2").set_weights([w["fc2.weight"].T, w["fc2.bias"]])


def read_canonical(model):
    out = {}
    for conv in ("conv1", "conv2", "conv3", "conv4"):
        kernel, bias = model.get_layer(conv).get_weights()
        out[f"{conv}.weight"], out[f"{conv}.bias"] = kernel.transpose(3, 2, 0, 1), bias
    kernel, out["fc1.bias"] = model.get_layer("fc1").get_weights()
    out["fc1.weight"] = kernel.reshape(8, 8, 100, 512).transpose(3, 2, 0, 1).reshape(512, 6400)  # H·W·C → C·H·W
    kernel, out["fc2.bias"] = model.get_layer("fc2").get_weights()
    out["fc2.weight"] = kernel.T
    return out


def predict_logits(model, x):
    """Logits in inference mode (dropout off) for NCHW input `x`."""
    x = nchw_to(np.asarray(x, np.float32), model.get_layer("conv1").data_format)
    return keras.ops.convert_to_numpy(model(x, training=False))


# ==== Train step ====
# rosetta: train-step
# Keras owns the training loop: `compile()` fixes loss and optimizer and `fit()` runs the step. This function is the
# whole of what a Keras user writes for it.
def compile_model(model, cfg, switches):
    p = cfg.params
    model.compile(
        # rosetta: optimizer
        optimizer=keras.optimizers.SGD(learning_rate=p["lr"], momentum=p["momentum"]),  # plain momentum (lesson 8)
        # rosetta: loss
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),  # integer labels, softmax inside (6, 11)
        jit_compile=switches["jit_compile"],
        steps_per_execution=switches["steps_per_execution"],
    )


def train_step(model, batches, cfg, switches, timer):
    compile_model(model, cfg, switches)
    model.fit(batches, epochs=cfg.params["epochs"], shuffle=False, callbacks=[batches.callback, timer], verbose=0)


def train_steps(cfg, weights, x, y, steps):
    """The training-equivalence test's entry (tests/test_training_equivalence.py): from canonical `weights`, `steps`
    steps of `fit` on the one batch (x: NCHW, y) as main compiles the model; (each step's loss, weights after each). A
    tuned cell's step is compiled as main compiles it, one step per call: its steps_per_execution loop repeats that
    step and would hide the steps in between."""
    switches = {**resolve_switches(SWITCHES, cfg, TUNED), "steps_per_execution": 1}
    model = build_model(dropout=switches["dropout"])
    load_canonical(model, weights)
    compile_model(model, cfg, switches)
    return fit_steps(
        model, nchw_to(np.asarray(x, np.float32), "channels_last"), np.asarray(y, np.int32), steps, read_canonical
    )


# ==== Evaluate ====
# rosetta: evaluate
def evaluate(model, x_test, y_test, batch_size):
    """predict() runs in inference mode (dropout off, lesson 4) over every test sample, the last partial batch too."""
    logits = model.predict(x_test, batch_size=batch_size, verbose=0)
    return metrics.accuracy(np.asarray(logits, np.float32), y_test)


# ==== Main ====
def main(cfg):
    p, switches = cfg.params, resolve_switches(SWITCHES, cfg, TUNED)
    check_device(cfg)
    policy = set_precision(cfg.precision, cfg.device)
    data_format = data_format_of(switches, cfg)
    keras.utils.set_random_seed(0)
    x_train, y_train, x_test, y_test = load_data(cfg, data_format)
    model = build_model(data_format=data_format, dropout=switches["dropout"])
    load_canonical(model, canonical.init_weights("cnn"))  # the same start in every framework (docs/design.md)
    batches = EpochBatches(len(x_train), p["batch_size"], lambda idx, epoch, rank: (x_train[idx], y_train[idx]))
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
            **metrics.loss_metrics(timer.step_losses(), len(batches)),
            epochs=p["epochs"],
            train_samples=len(x_train),
            test_samples=len(x_test),
            data_placement="host",
            differences=[*FIT_HOST_SYNCS],
        ),
        "timing": train_timing(timer.windows, warmup=timer.warmup),
        "switches": {
            **switches,
            "data_format": data_format,
            "dtype_policy": policy,
            "jit_compile_resolved": model.jit_compile,
            "backend": keras.backend.backend(),
        },
    }
