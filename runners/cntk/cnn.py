"""CNTK 2.7 · cnn · a VGG-style CNN (`C.layers.Sequential`) trained on CIFAR-10 by a `C.Trainer` with momentum SGD."""

import cntk as C
import numpy as np

from runners.cntk import (
    LOSS_HOST_READ,
    check_precision,
    count_parameters,
    is_gpu,
    one_hot,
    select_device,
    sync,
    train_batches,
)
from shared import batching, canonical, metrics
from shared.datasets import load_cifar10
from shared.runner import resolve_switches
from shared.timing import timed_epochs, train_metrics, train_timing

# ==== Config ====
# Hyperparameters come from shared/params.py through cfg.params (epochs, batch_size, lr, momentum, samples).
SWITCHES = {
    "deterministic": False,  # True = C.cntk_py.force_deterministic_algorithms(): only cuDNN's reproducible conv
    # algorithms; False lets CNTK time them all on the first minibatch and keep the
    # fastest for our fixed shapes (lesson 3)
    "dropout": True,  # off only in the training-equivalence test (its step must be deterministic)
}
# Layout: NCHW, CNTK's only image layout and cuDNN's classic one (lesson 2). Data placement is "host": each NumPy batch
# is copied to the device inside train_minibatch, inside the clock (runners.cntk.train_batches says why).


# ==== Data ====
def load_data(cfg):
    """CIFAR-10 as float32 NCHW arrays; training labels one-hot (CNTK's loss takes a target distribution), test labels
    kept as integers for the shared accuracy."""
    p = cfg.params
    x_train, y_train, x_test, y_test = load_cifar10(cfg.data, p.get("train_samples"), p.get("test_samples"))
    return x_train, one_hot(y_train, p["num_classes"]), x_test, y_test


# ==== Model ====
# rosetta: model
def build_model(cfg=None, num_classes=10, dropout=True):
    """The network as one CNTK Function of the input `features` (3, 32, 32); its output is the logits. Layer names
    (conv1 … fc2) are the canonical ones, so `model.conv1.W` is the canonical `conv1.weight`."""
    features = C.input_variable((3, 32, 32), np.float32, name="features")
    rates = (0.25, 0.25, 0.5) if dropout else (0.0, 0.0, 0.0)
    # Glorot-uniform kernels (lesson 7; CNTK's glorot_uniform uses Keras' fans for conv and dense kernels), zero biases
    # (CNTK's init_bias). Activations are spelled out where they act: C.layers default to none (lesson 11).
    with C.layers.default_options(init=C.glorot_uniform(), init_bias=0):
        model = C.layers.Sequential(
            [
                C.layers.Convolution2D((3, 3), 50, pad=True, activation=C.relu, name="conv1"),  # pad=True: "same"
                C.layers.Convolution2D((3, 3), 50, pad=True, name="conv2"),
                C.layers.MaxPooling((2, 2), strides=(2, 2)),  # (50, 16, 16)
                C.relu,  # ReLU after pooling (lesson 10)
                C.layers.Dropout(rates[0]),  # acts in train_minibatch only (lesson 4)
                C.layers.Convolution2D((3, 3), 100, pad=True, activation=C.relu, name="conv3"),
                C.layers.Convolution2D((3, 3), 100, pad=True, name="conv4"),
                C.layers.MaxPooling((2, 2), strides=(2, 2)),  # (100, 8, 8)
                C.relu,
                C.layers.Dropout(rates[1]),
                C.layers.Dense(512, activation=C.relu, name="fc1"),  # W (100, 8, 8, 512): C·H·W in, no flatten
                C.layers.Dropout(rates[2]),
                C.layers.Dense(num_classes, name="fc2"),  # logits; softmax lives in the loss (lesson 6)
            ]
        )
    return model(features)


# rosetta: init
def load_canonical(model, weights):
    """Canonical conv kernels (OIHW) are CNTK's layout; its conv biases are (O, 1, 1). CNTK's dense kernels are
    (in…, out): fc1's is the transposed canonical (512, 6400) with the input axis unflattened to (100, 8, 8), the same
    C·H·W order as the canonical flatten."""
    for name in ("conv1", "conv2", "conv3", "conv4", "fc1", "fc2"):
        layer = getattr(model, name)
        w, b = weights[f"{name}.weight"], weights[f"{name}.bias"]
        layer.W.value = np.ascontiguousarray(w if w.ndim == 4 else w.T.reshape(layer.W.shape), np.float32)
        layer.b.value = np.asarray(b, np.float32).reshape(layer.b.shape)


def read_canonical(model):
    out = {}
    for name in ("conv1", "conv2", "conv3", "conv4", "fc1", "fc2"):
        layer = getattr(model, name)
        w = layer.W.value
        out[f"{name}.weight"] = w if name.startswith("conv") else w.reshape(-1, w.shape[-1]).T
        out[f"{name}.bias"] = layer.b.value.reshape(-1)
    return out


def predict_logits(model, x):
    return model.eval({model.arguments[0]: np.asarray(x, np.float32)})  # eval: inference mode, dropout off


# ==== Train step ====
# rosetta: optimizer
def make_learner(parameters, p):
    """Plain momentum, v = μv + g, w -= lr·v (lesson 8): unit_gain=False, because CNTK's default unit gain would scale
    the gradient by (1 − μ). learning_parameter_schedule(lr) applies lr to the minibatch's mean gradient although
    CNTK's criterion is the minibatch sum (tests/test_cntk_learners.py checks the steps against NumPy)."""
    return C.momentum_sgd(
        parameters,
        lr=C.learning_parameter_schedule(p["lr"]),
        momentum=C.momentum_schedule(p["momentum"]),
        unit_gain=False,
    )


# rosetta: train-step
def make_train_step(trainer, features, labels):
    """train_minibatch copies the batch to the device, runs forward in training mode (dropout on) and backward, and
    lets the learner update the parameters: the whole step. It returns the step's loss, which CNTK hands over only
    on the host (LOSS_HOST_READ)."""

    def train_step(x, y):
        trainer.train_minibatch({features: x, labels: y})
        return trainer.previous_minibatch_loss_average

    return train_step


def train_steps(cfg, weights, x, y, steps):
    """The training-equivalence test's entry (tests/test_training_equivalence.py): from canonical `weights`, `steps`
    steps on the one batch (x, y) with main's model, learner and step; (each step's loss, weights after each)."""
    p, switches = cfg.params, resolve_switches(SWITCHES, cfg)
    model = build_model(num_classes=p["num_classes"], dropout=switches["dropout"])
    load_canonical(model, weights)
    labels = C.input_variable(p["num_classes"], np.float32, name="labels")
    trainer = C.Trainer(model, C.cross_entropy_with_softmax(model, labels), [make_learner(model.parameters, p)])
    train_step = make_train_step(trainer, model.arguments[0], labels)
    x, y = np.asarray(x, np.float32), one_hot(np.asarray(y), p["num_classes"])
    losses, after = [], []
    for _ in range(steps):
        losses.append(float(train_step(x, y)))
        after.append(read_canonical(model))
    return losses, after


# ==== Evaluate ====
# rosetta: evaluate
def evaluate(model, x_test, y_test, batch_size):
    """Test accuracy outside the clock. `model.eval` runs the graph in inference mode: dropout is off (lesson 4)."""
    features = model.arguments[0]
    logits = [model.eval({features: x_test[idx]}) for idx in batching.eval_batches(len(x_test), batch_size)]
    return metrics.accuracy(np.concatenate(logits), y_test)


# ==== Main ====
def main(cfg):
    p, switches = cfg.params, resolve_switches(SWITCHES, cfg)
    check_precision(cfg.precision)
    device = select_device(cfg)
    if switches["deterministic"]:
        C.cntk_py.force_deterministic_algorithms()
    C.cntk_py.set_fixed_random_seed(0)  # CNTK's initializers and dropout masks draw from it
    x_train, y_train, x_test, y_test = load_data(cfg)
    model = build_model(num_classes=p["num_classes"], dropout=switches["dropout"])
    load_canonical(model, canonical.init_weights("cnn"))  # the same start in every framework (docs/design.md)
    # rosetta: loss
    labels = C.input_variable(p["num_classes"], np.float32, name="labels")
    loss = C.cross_entropy_with_softmax(model, labels)  # softmax + cross-entropy in one op (lesson 6)
    # rosetta: end
    learner = make_learner(model.parameters, p)
    trainer = C.Trainer(model, loss, [learner])  # no metric: accuracy is measured after training
    train_step = make_train_step(trainer, model.arguments[0], labels)

    losses = []  # every step's loss
    epoch_seconds, warmup, _, windows = timed_epochs(
        p["epochs"],
        lambda epoch: train_batches(x_train, y_train, p["batch_size"], epoch),
        lambda batch: train_step(*batch),
        sync(trainer),
        outputs=losses,
    )

    accuracy = evaluate(model, x_test, y_test, p["batch_size"])
    steps = batching.steps_per_epoch(len(x_train), p["batch_size"])
    return {
        "metrics": train_metrics(
            epoch_seconds,
            steps * p["batch_size"],
            warmup=warmup,
            steps=steps,
            windows=windows,
            accuracy=accuracy,
            init="canonical",
            **metrics.loss_metrics(losses, steps),
            parameters=count_parameters(model),
            epochs=p["epochs"],
            train_samples=len(x_train),
            test_samples=len(x_test),
            data_placement="host",
            differences=[LOSS_HOST_READ],
        ),
        "timing": train_timing(windows, warmup=warmup),
        "switches": {
            **switches,
            "memory_format": "NCHW",
            "dtype": "float32",
            "unit_gain": False,
            "device": "gpu(0)" if is_gpu(device) else "cpu",
        },
    }
