"""MXNet 1.9 Gluon · cnn · a VGG-style CNN trained on CIFAR-10 with SGD + momentum, a hybridized HybridBlock."""

import os

import mxnet as mx
from mxnet import autograd, gluon
from mxnet.contrib import amp
from mxnet.gluon import nn

from runners.mxnet_gluon import (
    AMP_HOST_SYNC,
    GLOROT_UNIFORM,
    check_precision,
    contexts,
    count_parameters,
    load_structural,
    read_structural,
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
    "hybridize": True,  # cache the graph and run it symbolically instead of op by op (seed lesson 15)
    "static_alloc": True,  # hybridize(static_alloc): allocate the graph's memory once and reuse it every step
    "static_shape": True,  # hybridize(static_shape): shapes never change (last partial batch dropped), plan once
    "cudnn_autotune": True,  # MXNET_CUDNN_AUTOTUNE_DEFAULT: pick the fastest conv algorithm for our fixed shapes
    "dropout": True,  # off only in the training-equivalence test (its step must be deterministic)
    "data_placement": params.DATA_PLACEMENT,  # host: copy each batch inside the clock (the rule for every framework);
    # device: the whole set on the device before the clock (lesson 13)
}


# ==== Data ====
def load_data(cfg, ctx, placement):
    """CIFAR-10 as float32 NCHW NDArrays and int32 labels, the training set in host memory or on `ctx` (`placement`),
    allocated once (lesson 13). The test set stays on the host: evaluation is outside the clock and copies batches."""
    p = cfg.params
    x_train, y_train, x_test, y_test = load_cifar10(cfg.data, p.get("train_samples"), p.get("test_samples"))
    if placement not in params.DATA_PLACEMENTS:
        raise ValueError(f"data_placement={placement!r}: choose one of {', '.join(params.DATA_PLACEMENTS)}")
    train_ctx = ctx if placement == "device" else mx.cpu()
    return (
        mx.nd.array(x_train, ctx=train_ctx),
        mx.nd.array(y_train, ctx=train_ctx, dtype="int32"),
        mx.nd.array(x_test),
        y_test,
    )


# ==== Model ====
# rosetta: model
class CNN(gluon.HybridBlock):
    def __init__(self, num_classes=10, dropout=True, **kwargs):
        super().__init__(**kwargs)
        self.rates = (0.25, 0.25, 0.5) if dropout else (0.0, 0.0, 0.0)
        with self.name_scope():
            # padding=1 on a 3×3 kernel is "same" (symmetric zeros, as in every framework here); in_channels given
            # so shapes are known at once instead of at the first batch (deferred initialization).
            self.conv1 = nn.Conv2D(50, 3, padding=1, in_channels=3)
            self.conv2 = nn.Conv2D(50, 3, padding=1, in_channels=50)
            self.conv3 = nn.Conv2D(100, 3, padding=1, in_channels=50)
            self.conv4 = nn.Conv2D(100, 3, padding=1, in_channels=100)
            self.fc1 = nn.Dense(512, in_units=100 * 8 * 8)  # Dense flattens its input: C·H·W, the canonical order
            self.fc2 = nn.Dense(num_classes, in_units=512)

    # rosetta: model
    def hybrid_forward(self, F, x):  # x: (N, 3, 32, 32); F is mx.nd or mx.sym
        x = F.relu(self.conv1(x))
        x = F.relu(F.Pooling(self.conv2(x), kernel=(2, 2), stride=(2, 2), pool_type="max"))  # ReLU after pooling:
        x = F.Dropout(x, p=self.rates[0])  # 4x fewer elements (lesson 10); (N, 50, 16, 16)
        x = F.relu(self.conv3(x))
        x = F.relu(F.Pooling(self.conv4(x), kernel=(2, 2), stride=(2, 2), pool_type="max"))
        x = F.Dropout(x, p=self.rates[1])  # (N, 100, 8, 8); Dropout acts only while
        x = F.relu(self.fc1(x))  # autograd records in training mode (lesson 4)
        x = F.Dropout(x, p=self.rates[2])
        return self.fc2(x)  # logits; softmax lives in the loss (lesson 6)


def build_model(cfg=None, ctx=mx.cpu(), dropout=True):
    """The CNN with Glorot-uniform kernels and zero biases (lesson 7; Gluon's initializers give `*_bias` zeros)."""
    net = CNN(dropout=dropout)
    net.initialize(GLOROT_UNIFORM, ctx=ctx)
    return net


# rosetta: init
def load_canonical(model, weights):
    """Canonical names (conv1.weight … fc2.bias) and layouts (conv OIHW, dense (out, in)) are Gluon's own."""
    load_structural(model, weights)


def read_canonical(model):
    return read_structural(model)


def predict_logits(model, x):
    return model(mx.nd.array(x)).asnumpy()  # outside autograd.record: inference mode


# ==== Train step ====
# rosetta: optimizer
def make_trainer(net, p):
    # MXNet's SGD momentum is plain momentum (v = m·v - lr·g; w += v), no unit gain (lesson 8): PyTorch's update.
    return gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": p["lr"], "momentum": p["momentum"]})


def make_train_step(net, trainer, ctx, use_amp):
    # rosetta: loss
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()  # integer labels, no one-hot (lesson 11)

    # rosetta: train-step
    def train_step(x, y):
        x, y = x.as_in_context(ctx), y.as_in_context(ctx)  # host -> device inside the clock (a no-op on CPU)
        with autograd.record():  # training mode: dropout on
            loss = loss_fn(net(x), y)  # (N,) per-sample losses
            if use_amp:  # amp: scale the loss so fp16 gradients don't
                with amp.scale_loss(loss, trainer) as scaled:  # underflow; the scaling must be recorded too
                    autograd.backward(scaled)
            else:
                loss.backward()
        trainer.step(x.shape[0])  # gradients of the summed loss / N: the mean
        return loss  # stays an NDArray: no wait inside the step (13)

    return train_step


def train_steps(cfg, weights, x, y, steps):
    """The training-equivalence test's entry (tests/test_training_equivalence.py): from canonical `weights`, `steps`
    steps on the one batch (x, y) with main's network, trainer and step; (each step's loss, weights after each)."""
    switches, ctx = resolve_switches(SWITCHES, cfg), mx.cpu()
    net = build_model(ctx=ctx, dropout=switches["dropout"])
    load_canonical(net, weights)
    if switches["hybridize"]:
        net.hybridize(static_alloc=switches["static_alloc"], static_shape=switches["static_shape"])
    train_step = make_train_step(net, make_trainer(net, cfg.params), ctx, False)
    x, y = mx.nd.array(x, dtype="float32"), mx.nd.array(y, dtype="int32")
    losses, after = [], []
    for _ in range(steps):
        losses.append(float(train_step(x, y).mean().asscalar()))
        after.append(read_canonical(net))
    return losses, after


# ==== Evaluate ====
# rosetta: evaluate
def evaluate(net, x_test, y_test, batch_size, ctx):
    """Test accuracy outside the clock; not recording autograd is inference mode, so dropout is off (lesson 4)."""
    logits = [
        net(x_test[idx[0] : idx[-1] + 1].as_in_context(ctx)) for idx in batching.eval_batches(len(x_test), batch_size)
    ]
    return metrics.accuracy(mx.nd.concat(*logits, dim=0).astype("float32").asnumpy(), y_test)  # one copy back


# ==== Main ====
def main(cfg):
    p, switches = cfg.params, resolve_switches(SWITCHES, cfg)
    ctx = contexts(cfg)[0]
    # rosetta: precision
    use_amp = check_precision(cfg.precision, ctx)
    os.environ["MXNET_CUDNN_AUTOTUNE_DEFAULT"] = "1" if switches["cudnn_autotune"] else "0"
    if use_amp:
        amp.init()  # float16 casts around the ops that gain from it
    # rosetta: end
    mx.random.seed(0)
    x_train, y_train, x_test, y_test = load_data(cfg, ctx, switches["data_placement"])
    net = build_model(ctx=ctx, dropout=switches["dropout"])
    load_canonical(net, canonical.init_weights("cnn"))  # the same start in every framework (docs/design.md)
    if switches["hybridize"]:
        net.hybridize(static_alloc=switches["static_alloc"], static_shape=switches["static_shape"])
    # rosetta: optimizer
    trainer = make_trainer(net, p)
    if use_amp:
        amp.init_trainer(trainer)  # dynamic loss scaling; skips overflowing steps
    # rosetta: end
    train_step = make_train_step(net, trainer, ctx, use_amp)

    losses = []  # every step's per-sample losses, on the device
    epoch_seconds, warmup, _, windows = timed_epochs(
        p["epochs"],
        lambda epoch: train_batches(x_train, y_train, p["batch_size"], epoch),
        lambda batch: train_step(*batch),
        sync(),
        outputs=losses,
    )

    accuracy = evaluate(net, x_test, y_test, p["batch_size"], ctx)
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
            **metrics.loss_metrics([loss.mean().asscalar() for loss in losses], steps),
            parameters=count_parameters(net),
            epochs=p["epochs"],
            train_samples=len(x_train),
            test_samples=len(x_test),
            data_placement=switches["data_placement"],
            differences=[AMP_HOST_SYNC] if use_amp else [],
        ),
        "timing": train_timing(windows, warmup=warmup),
        "switches": {**switches, "amp": use_amp, "memory_format": "NCHW", "device": str(ctx)},
    }
