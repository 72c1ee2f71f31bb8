"""PaddlePaddle 3.3 · cnn · a VGG-style CNN trained on CIFAR-10 with Momentum, dygraph (to_static optional)."""

import contextlib

import numpy as np
import paddle
import paddle.nn.functional as F
from paddle import nn

from runners.paddle import (
    AMP_HOST_SYNC,
    count_parameters,
    load_state,
    read_state,
    same_name,
    select_device,
    set_precision,
    sync,
    train_batches,
)
from shared import batching, canonical, metrics, params
from shared.datasets import load_cifar10
from shared.runner import resolve_switches
from shared.timing import timed_epochs, train_metrics, train_timing

# ==== Config ====
# Hyperparameters come from shared/params.py through cfg.params (epochs, batch_size, lr, momentum, samples).
SWITCHES = {
    "to_static": False,  # paddle.jit.to_static on the model: forward and backward run as one static program
    "multi_tensor": False,  # the Momentum update of every parameter in one fused call (use_multi_tensor=True)
    "dropout": True,  # off only in the training-equivalence test (its step must be deterministic)
    "data_placement": params.DATA_PLACEMENT,  # host: copy each batch inside the clock (the rule for every framework);
    # device: the whole set on the device before the clock (lesson 13)
}
TUNED = {  # tuning=tuned: Paddle's own documented fast path (docs/tuned.md), same work
    "to_static": True,  # dynamic-to-static: the program is built once and run by Paddle's executor (warm-up)
    "multi_tensor": True,  # one fused optimizer call instead of one per parameter
}


# ==== Data ====
def load_data(cfg, placement):
    """CIFAR-10 as float32 NCHW arrays and int64 labels, training set in host memory (NumPy, copied batch by batch)
    or as tensors on the current place (`placement`). The test set stays on the host: evaluation is outside the
    clock."""
    p = cfg.params
    x_train, y_train, x_test, y_test = load_cifar10(cfg.data, p.get("train_samples"), p.get("test_samples"))
    if placement not in params.DATA_PLACEMENTS:
        raise ValueError(f"data_placement={placement!r}: choose one of {', '.join(params.DATA_PLACEMENTS)}")
    y_train, y_test = y_train.astype(np.int64), y_test.astype(np.int64)
    if placement == "device":
        x_train, y_train = paddle.to_tensor(x_train), paddle.to_tensor(y_train)
    return x_train, y_train, x_test, y_test


# ==== Model ====
# rosetta: model
class CNN(nn.Layer):
    def __init__(self, num_classes=10, dropout=True):
        super().__init__()
        self.rates = (0.25, 0.25, 0.5) if dropout else (0.0, 0.0, 0.0)
        self.conv1 = nn.Conv2D(3, 50, 3, padding="same")
        self.conv2 = nn.Conv2D(50, 50, 3, padding="same")
        self.conv3 = nn.Conv2D(50, 100, 3, padding="same")
        self.conv4 = nn.Conv2D(100, 100, 3, padding="same")
        self.fc1 = nn.Linear(100 * 8 * 8, 512)
        self.fc2 = nn.Linear(512, num_classes)
        # No init here: main loads the shared canonical start (Glorot uniform, zero biases; lesson 7), drawn in NumPy.

    # rosetta: model
    def forward(self, x):  # x: (N, 3, 32, 32)
        x = F.relu(self.conv1(x))
        x = F.relu(F.max_pool2d(self.conv2(x), 2))  # ReLU after pooling: 4x fewer elements (lesson 10)
        x = F.dropout(x, self.rates[0], training=self.training)  # (N, 50, 16, 16)
        x = F.relu(self.conv3(x))
        x = F.relu(F.max_pool2d(self.conv4(x), 2))
        x = F.dropout(x, self.rates[1], training=self.training)  # (N, 100, 8, 8)
        x = F.relu(self.fc1(paddle.flatten(x, 1)))  # flatten C·H·W = 6400, the canonical order
        x = F.dropout(x, self.rates[2], training=self.training)
        return self.fc2(x)  # logits; softmax lives in the loss (lesson 6)


def build_model(cfg=None, dropout=True):
    return CNN(dropout=dropout)


# rosetta: init
def load_canonical(model, weights):
    """Canonical names (conv1..fc2) are the model's own; conv kernels are OIHW in both, and a Linear's weight is
    (in, out) in Paddle: load_state transposes the dense kernels."""
    load_state(model, weights, rename=same_name)


def read_canonical(model):
    return read_state(model, model.state_dict(), rename=same_name)


def predict_logits(model, x):
    model.eval()
    with paddle.no_grad():
        return model(paddle.to_tensor(x)).numpy()


# ==== Train step ====
# rosetta: optimizer
def make_optimizer(model, p, multi_tensor=False):
    # Paddle's Momentum is the seed's plain momentum: v = μ·v + g, w = w − lr·v (lesson 8).
    return paddle.optimizer.Momentum(
        learning_rate=p["lr"], momentum=p["momentum"], parameters=model.parameters(), use_multi_tensor=multi_tensor
    )


# rosetta: train-step
def make_train_step(model, optimizer, autocast, scaler):
    def train_step(x, y):
        with autocast():
            # rosetta: loss
            loss = F.cross_entropy(model(x), y)  # integer labels, no one-hot (lesson 11)
        if scaler:  # amp: scale the loss so fp16 gradients don't underflow
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
        else:
            loss.backward()
            optimizer.step()
        optimizer.clear_grad()
        return loss.detach()  # stays on the device: no host sync inside the step

    return train_step


def train_steps(cfg, weights, x, y, steps):
    """The training-equivalence test's entry (tests/test_training_equivalence.py): from canonical `weights`, `steps`
    steps on the one batch (x, y) with main's model, optimizer and step (a tuned cell's switches included); (each
    step's loss, weights after each)."""
    switches = resolve_switches(SWITCHES, cfg, TUNED)
    paddle.set_device("cpu")
    model = build_model(dropout=switches["dropout"])
    load_canonical(model, weights)
    model.train()
    optimizer = make_optimizer(model, cfg.params, switches["multi_tensor"])
    if switches["to_static"]:
        model = paddle.jit.to_static(model)
    train_step = make_train_step(model, optimizer, contextlib.nullcontext, None)
    x, y = paddle.to_tensor(x), paddle.to_tensor(np.asarray(y, np.int64))
    losses, after = [], []
    for _ in range(steps):
        losses.append(float(train_step(x, y)))
        after.append(read_canonical(model))
    return losses, after


# ==== Evaluate ====
# rosetta: evaluate
def evaluate(model, x_test, y_test, batch_size, autocast):
    model.eval()  # dropout off in evaluation (lesson 4)
    logits = []
    with paddle.no_grad(), autocast():
        for idx in batching.eval_batches(len(x_test), batch_size):
            logits.append(model(paddle.to_tensor(x_test[idx])).astype("float32").numpy())
    model.train()
    return metrics.accuracy(np.concatenate(logits), y_test)


# ==== Main ====
def main(cfg):
    p, switches = cfg.params, resolve_switches(SWITCHES, cfg, TUNED)
    place = select_device(cfg)
    autocast, scaler = set_precision(cfg.precision, place)
    paddle.seed(0)
    x_train, y_train, x_test, y_test = load_data(cfg, switches["data_placement"])
    model = build_model(dropout=switches["dropout"])
    load_canonical(model, canonical.init_weights("cnn"))  # the same start in every framework (docs/design.md)
    # rosetta: end
    optimizer = make_optimizer(model, p, switches["multi_tensor"])
    if switches["to_static"]:
        model = paddle.jit.to_static(model)  # traced on the first step: compile time is reported as warm-up
    train_step = make_train_step(model, optimizer, autocast, scaler)

    model.train()
    losses = []  # every step's loss, left on the device
    epoch_seconds, warmup, _, windows = timed_epochs(
        p["epochs"],
        lambda epoch: train_batches(x_train, y_train, p["batch_size"], epoch),
        lambda batch: train_step(*batch),
        sync(place),
        outputs=losses,
    )

    accuracy = evaluate(model, x_test, y_test, p["batch_size"], autocast)
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
            differences=[AMP_HOST_SYNC] if scaler else [],
        ),
        "timing": train_timing(windows, warmup=warmup),
        "switches": {**switches, "device": str(place)},
    }
