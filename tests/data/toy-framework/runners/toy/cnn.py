"""Toy (NumPy 2.4) · cnn · the VGG-style CNN in plain NumPy: forward, backward and SGD + momentum written by hand."""

import numpy as np

from runners.toy import count_parameters, select_device, set_precision, sync
from shared import batching, canonical, metrics, params
from shared.datasets import load_cifar10
from shared.runner import resolve_switches
from shared.timing import timed_epochs, train_metrics, train_timing

# ==== Config ====
# Hyperparameters come from shared/params.py through cfg.params (epochs, batch_size, lr, momentum, samples).
SWITCHES = {
    "dropout": True,  # off only in the training-equivalence test (its step must be deterministic)
    "data_placement": params.DATA_PLACEMENT,  # host: NumPy's only memory, so "device" is the same place
}
# No TUNED: NumPy has no fast path beyond this code, so a tuned cell is skipped, saying so (shared/runner.py).


# ==== Data ====
def load_data(cfg):
    """CIFAR-10 as float32 NCHW arrays and int labels, all in host memory."""
    p = cfg.params
    return load_cifar10(cfg.data, p.get("train_samples"), p.get("test_samples"))


# ==== Model ====
def conv(x, w, b):
    """3×3 'same' convolution as im2col and one matmul, on activations laid out (C, N, H, W) so that neither the
    columns (C·3·3, N·H·W: the OIHW kernel's (C, kh, kw) order) nor the output (O, N, H, W) need a transpose.
    Returns the output and the columns, which the backward pass reuses."""
    c, n, h, wd = x.shape
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    cols = np.empty((c, 3, 3, n, h, wd), x.dtype)
    for i in range(3):
        for j in range(3):
            cols[:, i, j] = xp[:, :, i : i + h, j : j + wd]
    cols = cols.reshape(c * 9, n * h * wd)
    return (w.reshape(len(w), -1) @ cols + b[:, None]).reshape(len(w), n, h, wd), cols


def conv_back(dy, cols, w):
    """The gradients of conv's input, kernel and bias from the gradient of its output (all (C, N, H, W))."""
    o, n, h, wd = dy.shape
    d = dy.reshape(o, -1)
    dcols = (w.reshape(o, -1).T @ d).reshape(-1, 3, 3, n, h, wd)
    dxp = np.zeros((dcols.shape[0], n, h + 2, wd + 2), dy.dtype)
    for i in range(3):
        for j in range(3):
            dxp[:, :, i : i + h, j : j + wd] += dcols[:, i, j]
    return dxp[:, :, 1:-1, 1:-1], (d @ cols.T).reshape(w.shape), d.sum(axis=1)


def pool(x):
    """2×2 max pooling, and where each maximum came from."""
    c, n, h, w = x.shape
    blocks = x.reshape(c, n, h // 2, 2, w // 2, 2)
    out = blocks.max(axis=(3, 5))
    return out, blocks == out[:, :, :, None, :, None]


def pool_back(dy, where):
    c, n, h, w = dy.shape
    return (where * dy[:, :, :, None, :, None]).reshape(c, n, h * 2, w * 2)


# rosetta: model
class CNN:
    """The canonical weights (conv1..fc2, OIHW and (out, in)) and the forward pass that keeps what backward needs."""

    def __init__(self, dropout=True):
        self.rates = (0.25, 0.25, 0.5) if dropout else (0.0, 0.0, 0.0)
        self.weights = {name: np.zeros(shape, np.float32) for name, shape in canonical.SHAPES["cnn"].items()}
        self.rng = np.random.default_rng(params.SEED)

    def drop(self, x, rate, train):
        if not train or rate == 0:
            return x, None
        keep = (self.rng.random(x.shape) >= rate) / np.float32(1 - rate)
        return x * keep, keep

    # rosetta: model
    def forward(self, x, train=False):  # x: (N, 3, 32, 32)
        W, saved = self.weights, {}
        x = x.transpose(1, 0, 2, 3)  # (3, N, 32, 32): channels first, so every conv is one matmul
        c1, saved["cols1"] = conv(x, W["conv1.weight"], W["conv1.bias"])
        a1 = np.maximum(c1, 0)
        c2, saved["cols2"] = conv(a1, W["conv2.weight"], W["conv2.bias"])
        p2, saved["where2"] = pool(c2)  # ReLU after pooling: 4x fewer elements (lesson 10)
        d2, saved["keep2"] = self.drop(np.maximum(p2, 0), self.rates[0], train)  # (50, N, 16, 16)
        c3, saved["cols3"] = conv(d2, W["conv3.weight"], W["conv3.bias"])
        a3 = np.maximum(c3, 0)
        c4, saved["cols4"] = conv(a3, W["conv4.weight"], W["conv4.bias"])
        p4, saved["where4"] = pool(c4)
        d4, saved["keep4"] = self.drop(np.maximum(p4, 0), self.rates[1], train)  # (100, N, 8, 8)
        flat = d4.transpose(1, 0, 2, 3).reshape(d4.shape[1], -1)  # flatten C·H·W = 6400, the canonical order
        h = np.maximum(flat @ W["fc1.weight"].T + W["fc1.bias"], 0)
        h_kept, saved["keep5"] = self.drop(h, self.rates[2], train)
        saved.update(a1=a1, p2=p2, a3=a3, p4=p4, flat=flat, h=h, h_kept=h_kept)
        return h_kept @ W["fc2.weight"].T + W["fc2.bias"], saved  # logits; softmax lives in the loss (lesson 6)

    def backward(self, dlogits, s):
        """The gradient of every canonical array, by the chain rule through the forward pass's saved values."""
        W, g = self.weights, {}
        g["fc2.weight"], g["fc2.bias"] = dlogits.T @ s["h_kept"], dlogits.sum(0)
        dh = dlogits @ W["fc2.weight"]
        dh = dh * s["keep5"] if s["keep5"] is not None else dh
        dh = dh * (s["h"] > 0)
        g["fc1.weight"], g["fc1.bias"] = dh.T @ s["flat"], dh.sum(0)
        c, n, h, w = s["p4"].shape
        d = (dh @ W["fc1.weight"]).reshape(n, c, h, w).transpose(1, 0, 2, 3)  # back to (C, N, H, W)
        d = d * s["keep4"] if s["keep4"] is not None else d
        d = pool_back(d * (s["p4"] > 0), s["where4"])
        d, g["conv4.weight"], g["conv4.bias"] = conv_back(d, s["cols4"], W["conv4.weight"])
        d, g["conv3.weight"], g["conv3.bias"] = conv_back(d * (s["a3"] > 0), s["cols3"], W["conv3.weight"])
        d = d * s["keep2"] if s["keep2"] is not None else d
        d = pool_back(d * (s["p2"] > 0), s["where2"])
        d, g["conv2.weight"], g["conv2.bias"] = conv_back(d, s["cols2"], W["conv2.weight"])
        _, g["conv1.weight"], g["conv1.bias"] = conv_back(d * (s["a1"] > 0), s["cols1"], W["conv1.weight"])
        return g


def build_model(cfg=None, dropout=True):
    return CNN(dropout=dropout)


# rosetta: init
def load_canonical(model, weights):
    """The canonical layout is the toy's own: a copy of each array as float32, by name (a missing one is an error)."""
    model.weights = {name: np.array(weights[name], np.float32) for name in model.weights}


def read_canonical(model):
    return {name: w.copy() for name, w in model.weights.items()}


def predict_logits(model, x):
    return model.forward(np.asarray(x, np.float32))[0]


# ==== Train step ====
def softmax_cross_entropy(logits, y):
    """The mean loss over the batch and its gradient with respect to the logits (integer labels, no one-hot)."""
    shifted = logits - logits.max(axis=1, keepdims=True)
    log_p = shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))
    grad = np.exp(log_p)
    grad[np.arange(len(y)), y] -= 1
    return -log_p[np.arange(len(y)), y].mean(), grad / len(y)


# rosetta: optimizer
def make_optimizer(model, p):
    """SGD with plain momentum (lesson 8), PyTorch's form: v = μ·v + g; w -= lr·v."""
    velocity = {name: np.zeros_like(w) for name, w in model.weights.items()}

    def update(grads):
        for name, w in model.weights.items():
            velocity[name] = p["momentum"] * velocity[name] + grads[name]
            w -= p["lr"] * velocity[name]

    return update


# rosetta: train-step
def make_train_step(model, update):
    def train_step(x, y):
        logits, saved = model.forward(x, train=True)
        # rosetta: loss
        loss, dlogits = softmax_cross_entropy(logits, y)
        update(model.backward(dlogits, saved))
        return loss

    return train_step


def train_steps(cfg, weights, x, y, steps):
    """The training-equivalence test's entry: from canonical `weights`, `steps` steps on the one batch (x, y) with
    main's model, optimizer and step; (each step's loss, weights after each)."""
    switches = resolve_switches(SWITCHES, cfg)
    model = build_model(dropout=switches["dropout"])
    load_canonical(model, weights)
    train_step = make_train_step(model, make_optimizer(model, cfg.params))
    losses, after = [], []
    for _ in range(steps):
        losses.append(float(train_step(np.asarray(x, np.float32), np.asarray(y))))
        after.append(read_canonical(model))
    return losses, after


# ==== Evaluate ====
# rosetta: evaluate
def evaluate(model, x_test, y_test, batch_size):
    """Forward only, dropout off (lesson 4): there are no gradients unless backward is called."""
    logits = [model.forward(x_test[idx])[0] for idx in batching.eval_batches(len(x_test), batch_size)]
    return metrics.accuracy(np.concatenate(logits), y_test)


# ==== Main ====
def main(cfg):
    p, switches = cfg.params, resolve_switches(SWITCHES, cfg)
    device = select_device(cfg)
    set_precision(cfg.precision)
    x_train, y_train, x_test, y_test = load_data(cfg)
    model = build_model(dropout=switches["dropout"])
    load_canonical(model, canonical.init_weights("cnn"))  # the same start in every framework (docs/design.md)
    train_step = make_train_step(model, make_optimizer(model, p))

    def batches(epoch):
        for idx in batching.train_batches(len(x_train), p["batch_size"], epoch):
            yield x_train[idx], y_train[idx]

    losses = []
    epoch_seconds, warmup, _, windows = timed_epochs(
        p["epochs"], batches, lambda batch: train_step(*batch), sync(device), outputs=losses
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
            parameters=count_parameters(model),
            **metrics.loss_metrics([float(loss) for loss in losses], steps),
            epochs=p["epochs"],
            train_samples=len(x_train),
            test_samples=len(x_test),
            data_placement=switches["data_placement"],
            differences=[],
        ),
        "timing": train_timing(windows, warmup=warmup),
        "switches": {**switches, "device": device},
    }
