"""MXNet 1.9 Module · cnn · a VGG-style CNN on CIFAR-10 as an mx.sym graph, trained by a Module with SGD + momentum."""

import os

import mxnet as mx

from runners.mxnet_gluon import GLOROT_UNIFORM
from runners.mxnet_module import (
    check_precision,
    contexts,
    count_parameters,
    cross_entropy,
    data_batches,
    predict,
    set_canonical,
    sync,
)
from shared import batching, canonical, metrics, params
from shared.datasets import load_cifar10
from shared.runner import resolve_switches
from shared.timing import timed_epochs, train_metrics, train_timing

# ==== Config ====
# Hyperparameters come from shared/params.py through cfg.params (epochs, batch_size, lr, momentum, samples).
SWITCHES = {
    "cudnn_autotune": True,  # MXNET_CUDNN_AUTOTUNE_DEFAULT: pick the fastest conv algorithm for our fixed shapes
    "dropout": True,  # off only in the training-equivalence test (its step must be deterministic)
    "data_placement": params.DATA_PLACEMENT,  # host: copy each batch inside the clock (the rule for every framework);
    # device: the whole set on the device before the clock (lesson 13)
}
# No hybridize switch: a symbol is a graph from the start, and `bind` plans it once for the bound shapes.


# ==== Data ====
def load_data(cfg, ctx, placement):
    """CIFAR-10 as float32 NCHW NDArrays with float32 labels (SoftmaxOutput's label type), the training set in host
    memory or on `ctx` (`placement`), allocated once (lesson 13). The test set stays in NumPy: evaluation is outside
    the clock and its iterator copies the batches."""
    p = cfg.params
    x_train, y_train, x_test, y_test = load_cifar10(cfg.data, p.get("train_samples"), p.get("test_samples"))
    if placement not in params.DATA_PLACEMENTS:
        raise ValueError(f"data_placement={placement!r}: choose one of {', '.join(params.DATA_PLACEMENTS)}")
    train_ctx = ctx if placement == "device" else mx.cpu()
    return mx.nd.array(x_train, ctx=train_ctx), mx.nd.array(y_train, ctx=train_ctx), x_test, y_test


# ==== Model ====
def cnn_symbol(num_classes=10, dropout=True):
    """The network as one symbolic graph, input `data` (N, 3, 32, 32) -> SoftmaxOutput. Layer names give the
    parameter names (`conv1_weight`, `fc2_bias`, …): the canonical ones with `_` for `.`."""

    def conv(x, channels, name):  # pad 1 on a 3×3 kernel: "same", symmetric zeros
        return mx.sym.Convolution(x, kernel=(3, 3), pad=(1, 1), num_filter=channels, name=name)

    def pool(x):
        return mx.sym.Pooling(x, kernel=(2, 2), stride=(2, 2), pool_type="max")

    rates = (0.25, 0.25, 0.5) if dropout else (0.0, 0.0, 0.0)
    # rosetta: model
    x = mx.sym.Variable("data")
    x = mx.sym.relu(conv(x, 50, "conv1"))
    x = mx.sym.relu(pool(conv(x, 50, "conv2")))  # ReLU after pooling: 4x fewer elements (lesson 10)
    x = mx.sym.Dropout(x, p=rates[0])  # (N, 50, 16, 16)
    x = mx.sym.relu(conv(x, 100, "conv3"))
    x = mx.sym.relu(pool(conv(x, 100, "conv4")))
    x = mx.sym.Dropout(x, p=rates[1])  # (N, 100, 8, 8); Dropout acts only in
    x = mx.sym.relu(mx.sym.FullyConnected(x, num_hidden=512, name="fc1"))  # forward(is_train=True) (lesson 4);
    x = mx.sym.Dropout(x, p=rates[2])  # FullyConnected flattens C·H·W, the canonical order
    logits = mx.sym.FullyConnected(x, num_hidden=num_classes, name="fc2")
    # rosetta: loss
    # The loss belongs to the graph: probabilities forward, the cross-entropy gradient (p - onehot) backward, from
    # integer labels (lessons 6, 11). Unlike Gluon, the output is not the logits: predict_logits reads `fc2_output`.
    return mx.sym.SoftmaxOutput(logits, name="softmax")


# rosetta: model
def build_model(cfg=None, ctx=(mx.cpu(),), batch_size=1, for_training=False, dropout=True):
    """A Module bound to (batch_size, 3, 32, 32) on `ctx`, Glorot-uniform kernels and zero biases (lesson 7; MXNet's
    initializers give every `*_bias` zeros). Binding is where the symbol meets shapes and memory: for training it also
    allocates the gradient buffers."""
    model = mx.mod.Module(
        cnn_symbol(dropout=dropout), data_names=("data",), label_names=("softmax_label",), context=list(ctx)
    )
    model.bind(
        data_shapes=[("data", (batch_size, 3, 32, 32))],
        label_shapes=[("softmax_label", (batch_size,))],
        for_training=for_training,
    )
    model.init_params(GLOROT_UNIFORM)
    return model


# rosetta: init
def load_canonical(model, weights):
    """Canonical names (conv1.weight … fc2.bias) are the Module's with `_`; the layouts (conv OIHW, dense (out, in))
    are MXNet's own."""
    set_canonical(model, weights)


def read_canonical(model):
    arg_params, _ = model.get_params()
    return {name.replace("_", "."): a.asnumpy() for name, a in arg_params.items()}  # conv1_weight -> conv1.weight


def predict_logits(model, x):
    return predict(model.symbol.get_internals()["fc2_output"], model, x)  # the graph below SoftmaxOutput


# ==== Train step ====
# rosetta: optimizer
def make_optimizer(model, p):
    # Plain momentum, v = m·v - lr·g (lesson 8); the Module sets rescale_grad = 1/batch_size, so the summed gradient
    # of SoftmaxOutput becomes the batch mean (Gluon says the same with trainer.step(N)).
    model.init_optimizer(optimizer="sgd", optimizer_params={"learning_rate": p["lr"], "momentum": p["momentum"]})


# rosetta: train-step
def train_step(model, batch):
    """One step of the Module loop: forward (training mode: dropout on) and backward through SoftmaxOutput, then the
    optimizer's update, all queued on MXNet's engine; nothing here waits for the device (lessons 13, 14)."""
    model.forward_backward(batch)
    model.update()
    return cross_entropy(model, batch)  # the step's loss, an NDArray on the engine


def train_steps(cfg, weights, x, y, steps):
    """The training-equivalence test's entry (tests/test_training_equivalence.py): from canonical `weights`, `steps`
    steps on the one batch (x, y) with main's Module, optimizer and step; (each step's loss, weights after each)."""
    switches = resolve_switches(SWITCHES, cfg)
    model = build_model(batch_size=len(x), for_training=True, dropout=switches["dropout"])
    load_canonical(model, weights)
    make_optimizer(model, cfg.params)
    batch = mx.io.DataBatch(data=[mx.nd.array(x)], label=[mx.nd.array(y)])
    losses, after = [], []
    for _ in range(steps):
        losses.append(float(train_step(model, batch).asscalar()))
        after.append(read_canonical(model))
    return losses, after


# ==== Evaluate ====
# rosetta: evaluate
def evaluate(model, x_test, y_test, batch_size):
    """Test accuracy outside the clock. `predict` runs forward(is_train=False), so dropout is off (lesson 4); the
    iterator pads the last partial batch to the bound batch size and predict drops the padding again."""
    probabilities = model.predict(mx.io.NDArrayIter(x_test, batch_size=batch_size, last_batch_handle="pad"))
    return metrics.accuracy(probabilities.asnumpy(), y_test)  # argmax of probabilities = argmax of logits


# ==== Main ====
def main(cfg):
    p, switches = cfg.params, resolve_switches(SWITCHES, cfg)
    check_precision(cfg.precision)
    # rosetta: device
    ctx = contexts(cfg)[:1]
    # rosetta: end
    os.environ["MXNET_CUDNN_AUTOTUNE_DEFAULT"] = "1" if switches["cudnn_autotune"] else "0"  # read when binding
    mx.random.seed(0)
    x_train, y_train, x_test, y_test = load_data(cfg, ctx[0], switches["data_placement"])
    model = build_model(ctx=ctx, batch_size=p["batch_size"], for_training=True, dropout=switches["dropout"])
    load_canonical(model, canonical.init_weights("cnn"))  # the same start in every framework (docs/design.md)
    make_optimizer(model, p)

    # rosetta: barrier
    losses = []  # every step's loss, on the engine
    epoch_seconds, warmup, _, windows = timed_epochs(
        p["epochs"],
        lambda epoch: data_batches(x_train, y_train, p["batch_size"], epoch),
        lambda batch: train_step(model, batch),
        sync(),
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
            parameters=count_parameters(model),
            **metrics.loss_metrics([loss.asscalar() for loss in losses], steps),
            epochs=p["epochs"],
            train_samples=len(x_train),
            test_samples=len(x_test),
            data_placement=switches["data_placement"],
            differences=[],
        ),
        "timing": train_timing(windows, warmup=warmup),
        "switches": {**switches, "memory_format": "NCHW", "device": str(ctx[0])},
    }
