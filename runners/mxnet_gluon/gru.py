"""MXNet 1.9 Gluon · gru · embedding → GRU(100) → dense 2 on IMDB sentiment, Adam; gluon.rnn.GRU is the fused RNN
operator (cuDNN's GRU on GPU, MKL-DNN's on CPU)."""

import os

import mxnet as mx
from mxnet import autograd, gluon
from mxnet.contrib import amp
from mxnet.gluon import nn, rnn

from runners.mxnet_gluon import (
    ADAM_EPSILON_HAT,
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
from shared.datasets import load_imdb
from shared.runner import resolve_switches
from shared.timing import timed_epochs, train_metrics, train_timing

# ==== Config ====
SIZES = params.GRU  # the canonical sizes (max_features, embedding_dim, hidden, maxlen, num_classes)
# Hyperparameters come from shared/params.py through cfg.params (max_features, maxlen, hidden, epochs, lr, …).
SWITCHES = {
    "hybridize": True,  # cache the graph: embedding, fused GRU and dense run as one program (seed lesson 15)
    "static_alloc": True,  # hybridize(static_alloc): allocate the graph's memory once and reuse it every step
    "static_shape": True,  # hybridize(static_shape): every batch is (64, 150), so plan the graph once
    "cudnn_autotune": True,  # MXNET_CUDNN_AUTOTUNE_DEFAULT (conv algorithm search; the cuDNN RNN needs none)
    "data_placement": params.DATA_PLACEMENT,  # host: copy each batch inside the clock (the rule for every framework);
    # device: the whole set on the device before the clock (lesson 13)
}
# Adam: ε = 1e-8 as everywhere, but MXNet adds it before the bias correction (ADAM_EPSILON_HAT, in `differences`).


# ==== Data ====
def load_data(cfg, ctx, placement):
    """IMDB as int32 token ids (N, maxlen), Keras convention, front-padded; the training set allocated once in host
    memory or on `ctx` (`placement`). The test set stays on the host: evaluation is outside the clock."""
    p = cfg.params
    x_train, y_train, x_test, y_test = load_imdb(
        cfg.data, p["max_features"], p["maxlen"], p.get("train_samples"), p.get("test_samples")
    )
    if placement not in params.DATA_PLACEMENTS:
        raise ValueError(f"data_placement={placement!r}: choose one of {', '.join(params.DATA_PLACEMENTS)}")
    train_ctx = ctx if placement == "device" else mx.cpu()
    # Token ids as float32: MXNet's Embedding takes float indices (exact up to 2**24, far above 30,000).
    return (
        mx.nd.array(x_train, ctx=train_ctx),
        mx.nd.array(y_train, ctx=train_ctx, dtype="int32"),
        mx.nd.array(x_test),
        y_test,
    )


# ==== Model ====
# rosetta: model
class GRUClassifier(gluon.HybridBlock):
    def __init__(
        self,
        max_features=SIZES["max_features"],
        embedding_dim=SIZES["embedding_dim"],
        hidden=SIZES["hidden"],
        num_classes=SIZES["num_classes"],
        **kwargs,
    ):
        super().__init__(**kwargs)
        with self.name_scope():
            # Keras' initializers, so every framework starts from the same distributions: embedding U(±0.05), input
            # kernels Glorot uniform, recurrent kernels orthogonal (gain 1; Gluon's default scale is √2), zero biases.
            self.embedding = nn.Embedding(max_features, embedding_dim, weight_initializer=mx.init.Uniform(0.05))
            # The fused RNN operator's GRU is the cuDNN formulation: gates (r, z, n) in that order, reset applied after
            # the recurrent matmul, separate input and hidden biases — the canonical GRU, so no conversion is needed.
            # layout 'NTC' is batch-major like the data (lesson RNN 2: 'TNC' would save ~0.5 s a run).
            self.gru = rnn.GRU(
                hidden,
                layout="NTC",
                input_size=embedding_dim,
                i2h_weight_initializer=GLOROT_UNIFORM,
                h2h_weight_initializer=mx.init.Orthogonal(1.0),
            )
            self.fc = nn.Dense(num_classes, in_units=hidden, weight_initializer=GLOROT_UNIFORM)

    # rosetta: model
    def hybrid_forward(self, F, x):  # x: (N, T) token ids
        out = self.gru(self.embedding(x))  # (N, T, hidden)
        last = F.slice_axis(out, axis=1, begin=-1, end=None)  # (N, 1, hidden): the last step only (front padding
        return self.fc(last)  # makes it real text); Dense flattens it to (N, hidden).
        # (F.SequenceLast(out, axis=1) says the same, but its backward pass crashes MXNet 1.9.1 on the CPU.)


def build_model(cfg=None, ctx=mx.cpu()):
    net = GRUClassifier()
    net.initialize(ctx=ctx)  # each layer's own initializer (above)
    return net


# canonical name -> Gluon structural name, the name save_parameters writes. The fused layer's parameters (l0_i2h_weight,
# …: layer 0, input-to-hidden) are shared with the per-step cells it falls back to, and Gluon 1.9 names them by those:
# `gru._unfused.0.i2h_weight`. Gates are stacked (r, z, n) along the first axis in both, so arrays load unchanged.
# rosetta: init
CANONICAL_NAMES = {
    "embedding.weight": "embedding.weight",
    "gru.weight_ih": "gru._unfused.0.i2h_weight",
    "gru.weight_hh": "gru._unfused.0.h2h_weight",
    "gru.bias_ih": "gru._unfused.0.i2h_bias",
    "gru.bias_hh": "gru._unfused.0.h2h_bias",
    "fc.weight": "fc.weight",
    "fc.bias": "fc.bias",
}


# rosetta: init
def load_canonical(model, weights):
    load_structural(model, {CANONICAL_NAMES[name]: w for name, w in weights.items()})


def read_canonical(model):
    arrays = read_structural(model)
    return {name: arrays[ours] for name, ours in CANONICAL_NAMES.items()}


def predict_logits(model, x):
    return model(mx.nd.array(x)).asnumpy()


# ==== Train step ====
# rosetta: optimizer
def make_trainer(net, p):
    return gluon.Trainer(
        net.collect_params(),
        "adam",
        {"learning_rate": p["lr"], "beta1": p["beta1"], "beta2": p["beta2"], "epsilon": p["eps"]},
    )


def make_train_step(net, trainer, ctx, use_amp):
    # rosetta: loss
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()

    # rosetta: train-step
    def train_step(x, y):
        x, y = x.as_in_context(ctx), y.as_in_context(ctx)  # host -> device inside the clock
        with autograd.record():
            loss = loss_fn(net(x), y)
            if use_amp:  # amp: the scaled loss, recorded too
                with amp.scale_loss(loss, trainer) as scaled:
                    autograd.backward(scaled)
            else:
                loss.backward()
        trainer.step(x.shape[0])  # mean over the batch
        return loss  # no asnumpy(): the step never waits (lesson 13)

    return train_step


def train_steps(cfg, weights, x, y, steps):
    """The training-equivalence test's entry (tests/test_training_equivalence.py): from canonical `weights`, `steps`
    steps on the one batch (x, y) with main's network, trainer and step; (each step's loss, weights after each)."""
    switches, ctx = resolve_switches(SWITCHES, cfg), mx.cpu()
    net = build_model(ctx=ctx)
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
    """Test accuracy outside the clock, every test review scored once (the last batch may be smaller)."""
    logits = [
        net(x_test[idx[0] : idx[-1] + 1].as_in_context(ctx)) for idx in batching.eval_batches(len(x_test), batch_size)
    ]
    return metrics.accuracy(mx.nd.concat(*logits, dim=0).astype("float32").asnumpy(), y_test)


# ==== Main ====
def main(cfg):
    p, switches = cfg.params, resolve_switches(SWITCHES, cfg)
    ctx = contexts(cfg)[0]
    # rosetta: precision
    use_amp = check_precision(cfg.precision, ctx)
    os.environ["MXNET_CUDNN_AUTOTUNE_DEFAULT"] = "1" if switches["cudnn_autotune"] else "0"
    if use_amp:
        amp.init()
    # rosetta: end
    mx.random.seed(0)
    x_train, y_train, x_test, y_test = load_data(cfg, ctx, switches["data_placement"])
    net = build_model(ctx=ctx)
    load_canonical(net, canonical.init_weights("gru"))  # the same start in every framework (docs/design.md)
    if switches["hybridize"]:
        net.hybridize(static_alloc=switches["static_alloc"], static_shape=switches["static_shape"])
    # rosetta: optimizer
    trainer = make_trainer(net, p)
    if use_amp:
        amp.init_trainer(trainer)
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
            differences=[ADAM_EPSILON_HAT] + ([AMP_HOST_SYNC] if use_amp else []),
        ),
        "timing": train_timing(windows, warmup=warmup),
        "switches": {
            **switches,
            "amp": use_amp,
            "fused_rnn": True,
            "cudnn_rnn": ctx.device_type == "gpu",
            "device": str(ctx),
        },
    }
