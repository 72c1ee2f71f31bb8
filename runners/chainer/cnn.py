"""Chainer 7.8 · cnn · a VGG-style CNN (a `chainer.Chain` of links) trained on CIFAR-10 with MomentumSGD."""

import chainer
import chainer.functions as F
import chainer.links as L
import numpy as np
from chainer import initializers, optimizers

from runners.chainer import count_parameters, select_device, set_precision, setup_optimizer, sync, train_batches
from shared import batching, canonical, metrics, params
from shared.datasets import load_cifar10
from shared.runner import resolve_switches
from shared.timing import timed_epochs, train_metrics, train_timing

# ==== Config ====
# Hyperparameters come from shared/params.py through cfg.params (epochs, batch_size, lr, momentum, samples).
SWITCHES = {
    "autotune": True,  # cuDNN benchmarks conv algorithms once per shape and keeps the fastest (lesson 3)
    "type_check": False,  # skip Chainer's per-call shape/dtype checks: pure Python overhead on every function call
    "dropout": True,  # off only in the training-equivalence test (its step must be deterministic)
    "data_placement": params.DATA_PLACEMENT,  # host: send each batch to the device inside the clock (the rule for
    # every framework); device: the whole set on the device before the clock
}
# Layout: NCHW, Chainer's only layout and cuDNN's classic one (lesson 2).


# ==== Data ====
def load_data(cfg, device, placement):
    """CIFAR-10 as float32 NCHW arrays and int32 labels (Chainer's losses take int32), the training set in host memory
    or on `device` (`placement`). The test set stays on the host: evaluation is outside the clock."""
    p = cfg.params
    x_train, y_train, x_test, y_test = load_cifar10(cfg.data, p.get("train_samples"), p.get("test_samples"))
    if placement not in params.DATA_PLACEMENTS:
        raise ValueError(f"data_placement={placement!r}: choose one of {', '.join(params.DATA_PLACEMENTS)}")
    y_train, y_test = y_train.astype(np.int32), y_test.astype(np.int32)
    if placement == "device":
        x_train, y_train = device.send((x_train.astype(chainer.get_dtype()), y_train))
    return x_train, y_train, x_test, y_test


# ==== Model ====
# rosetta: model
class CNN(chainer.Chain):
    def __init__(self, num_classes=10, dropout=True):
        super().__init__()
        self.rates = (0.25, 0.25, 0.5) if dropout else (0.0, 0.0, 0.0)
        glorot = initializers.GlorotUniform()  # Glorot uniform like Keras (lesson 7); biases start at zero
        with self.init_scope():
            self.conv1 = L.Convolution2D(3, 50, 3, pad=1, initialW=glorot)  # pad 1 = "same" for 3×3
            self.conv2 = L.Convolution2D(50, 50, 3, pad=1, initialW=glorot)
            self.conv3 = L.Convolution2D(50, 100, 3, pad=1, initialW=glorot)
            self.conv4 = L.Convolution2D(100, 100, 3, pad=1, initialW=glorot)
            self.fc1 = L.Linear(100 * 8 * 8, 512, initialW=glorot)
            self.fc2 = L.Linear(512, num_classes, initialW=glorot)

    # rosetta: model
    def forward(self, x):  # x: (N, 3, 32, 32)
        h = F.relu(self.conv1(x))
        # cover_all=False: Chainer's pooling defaults to cover_all=True, which can add a row/column (lesson 11)
        h = F.relu(F.max_pooling_2d(self.conv2(h), 2, 2, cover_all=False))  # ReLU after pooling (lesson 10)
        h = F.dropout(h, self.rates[0])  # (N, 50, 16, 16); off when config.train=False
        h = F.relu(self.conv3(h))
        h = F.relu(F.max_pooling_2d(self.conv4(h), 2, 2, cover_all=False))
        h = F.dropout(h, self.rates[1])  # (N, 100, 8, 8)
        h = F.dropout(F.relu(self.fc1(h)), self.rates[2])  # L.Linear flattens C·H·W = 6400 itself
        return self.fc2(h)  # logits; softmax lives in the loss (lesson 6)


def build_model(cfg=None, dropout=True):
    return CNN(dropout=dropout)


# rosetta: init
def load_canonical(model, weights):
    """Canonical conv kernels (OIHW) and dense weights (out, in) are Chainer's own layouts: W and b by name."""
    for name in ("conv1", "conv2", "conv3", "conv4", "fc1", "fc2"):
        link = getattr(model, name)
        link.W.array[...] = weights[f"{name}.weight"]
        link.b.array[...] = weights[f"{name}.bias"]


def read_canonical(model):
    return {
        f"{name}.{kind}": chainer.backends.cuda.to_cpu(getattr(getattr(model, name), attr).array).copy()
        for name in ("conv1", "conv2", "conv3", "conv4", "fc1", "fc2")
        for kind, attr in (("weight", "W"), ("bias", "b"))
    }


def predict_logits(model, x):
    with chainer.using_config("train", False), chainer.using_config("enable_backprop", False):
        return model(np.asarray(x, np.float32)).array


# ==== Train step ====
# rosetta: optimizer
def make_optimizer(classifier, p, loss_scaling):
    return setup_optimizer(
        optimizers.MomentumSGD(lr=p["lr"], momentum=p["momentum"]),  # plain momentum:
        classifier,
        loss_scaling,
    )  # v = μv - lr·g, no unit gain (lesson 8)


# rosetta: train-step
def make_train_step(classifier, optimizer):
    """L.Classifier computes the predictor's loss (softmax cross-entropy on integer labels, lesson 11);
    optimizer.update clears the gradients, runs forward and backward (with the loss scale under amp) and updates."""

    def train_step(x, y):
        optimizer.update(classifier, x, y)
        return classifier.loss.array  # its array only (holding the Variable would
        # keep every step's graph alive); no host sync

    return train_step


def train_steps(cfg, weights, x, y, steps):
    """The training-equivalence test's entry (tests/test_training_equivalence.py): from canonical `weights`, `steps`
    steps on the one batch (x, y) with main's model, optimizer and step; (each step's loss, weights after each)."""
    switches = resolve_switches(SWITCHES, cfg)
    model = build_model(dropout=switches["dropout"])
    load_canonical(model, weights)
    classifier = L.Classifier(model, lossfun=F.softmax_cross_entropy)
    classifier.compute_accuracy = False
    train_step = make_train_step(classifier, make_optimizer(classifier, cfg.params, False))
    x, y = np.asarray(x, np.float32), np.asarray(y, np.int32)
    losses, after = [], []
    for _ in range(steps):
        losses.append(float(train_step(x, y)))
        after.append(read_canonical(model))
    return losses, after


# ==== Evaluate ====
# rosetta: evaluate
def evaluate(model, x_test, y_test, batch_size, device):
    logits = []
    # Inference mode: dropout off (lesson 4), and no graph is recorded for backprop (lesson 11's last check).
    with chainer.using_config("train", False), chainer.using_config("enable_backprop", False):
        for idx in batching.eval_batches(len(x_test), batch_size):
            x = device.send(x_test[idx].astype(chainer.get_dtype()))
            logits.append(chainer.backends.cuda.to_cpu(model(x).array).astype(np.float32))
    return metrics.accuracy(np.concatenate(logits), y_test)


# ==== Main ====
def main(cfg):
    p, switches = cfg.params, resolve_switches(SWITCHES, cfg)
    device = select_device(cfg)
    loss_scaling = set_precision(cfg.precision, device)
    chainer.global_config.autotune = switches["autotune"]
    chainer.global_config.type_check = switches["type_check"]
    np.random.seed(0)  # Chainer's initializers draw from NumPy
    x_train, y_train, x_test, y_test = load_data(cfg, device, switches["data_placement"])
    model = build_model(dropout=switches["dropout"])
    load_canonical(model, canonical.init_weights("cnn"))  # the same start in every framework (docs/design.md)
    model.to_device(device)
    # rosetta: loss
    classifier = L.Classifier(model, lossfun=F.softmax_cross_entropy)
    classifier.compute_accuracy = False  # accuracy is measured after training
    # rosetta: end
    optimizer = make_optimizer(classifier, p, loss_scaling)
    train_step = make_train_step(classifier, optimizer)

    losses = []  # every step's loss, on the device
    epoch_seconds, warmup, _, windows = timed_epochs(
        p["epochs"],
        lambda epoch: train_batches(x_train, y_train, p["batch_size"], epoch, device, chainer.get_dtype()),
        lambda batch: train_step(*batch),
        sync(device),
        outputs=losses,
    )

    accuracy = evaluate(model, x_test, y_test, p["batch_size"], device)
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
            "memory_format": "NCHW",
            "dtype": "mixed16" if loss_scaling else "float32",
            "loss_scaling": "dynamic" if loss_scaling else None,
            "device": str(device),
        },
    }
