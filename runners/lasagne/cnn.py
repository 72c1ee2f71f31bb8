"""Lasagne 0.1 on Theano 1.0 · cnn · a VGG-style CNN on CIFAR-10: a Lasagne layer stack, SGD + momentum updates and
a compiled `theano.function` train step."""

import lasagne
import numpy as np
import theano
import theano.tensor as T
from lasagne.init import Constant, GlorotUniform
from lasagne.layers import Conv2DLayer, DenseLayer, DropoutLayer, InputLayer, MaxPool2DLayer, NonlinearityLayer
from lasagne.nonlinearities import identity, rectify

from runners.lasagne import check_precision, count_parameters, layers_by_name, select_device, train_batches
from shared import batching, canonical, metrics, params
from shared.datasets import load_cifar10
from shared.runner import resolve_switches
from shared.timing import stopwatch, timed_epochs, train_metrics, train_timing

# ==== Config ====
# Hyperparameters come from shared/params.py through cfg.params (epochs, batch_size, lr, momentum, samples).
SWITCHES = {
    "openmp": False,  # Theano's OpenMP flag (CorrMM convolves batch items in threads): slower on 2 shared cores
    "cudnn": False,  # GPU: Theano 1.0.5's cuDNN ops need cuDNN <= 7, which no wheel ships (the theano image
    # has none): GpuCorrMM convolutions and cuBLAS instead (Theano's dnn.enabled flag)
    "cudnn_algo": "time_once",  # GPU, with cudnn on: cuDNN times its conv algorithms once per shape (lesson 3)
    "data_placement": params.DATA_PLACEMENT,  # host: each batch passed to the function inside the clock (the rule for
    # every framework); device: the set in shared variables, batches taken
    # by index through `givens` (Theano's tutorial idiom)
    "dropout": True,  # off only in the training-equivalence test (its step must be deterministic)
}
# Layout: NCHW, Theano's only layout and cuDNN's classic one (lesson 2). float32 through THEANO_FLAGS' floatX.


# ==== Data ====
def load_data(cfg):
    """CIFAR-10 as float32 NCHW arrays and int32 labels (the `T.ivector` the loss indexes with), in host memory. The
    `device` placement wraps the training set in shared variables in make_train_step."""
    p = cfg.params
    return load_cifar10(cfg.data, p.get("train_samples"), p.get("test_samples"))


# ==== Model ====
def build_model(cfg=None, dropout=True):
    """The layer stack, input (N, 3, 32, 32) -> logits (N, 10); returns the output layer, which is the network in
    Lasagne. Every default that differs between frameworks is spelled out (lesson 11): Conv2DLayer and DenseLayer
    apply a ReLU unless told otherwise (`nonlinearity=rectify` is their default), "same" padding is `pad=1` for a
    3×3 kernel (the default is 0, "valid"), and pooling's stride defaults to its size. Glorot-uniform weights and zero
    biases are Lasagne's defaults and the canonical CNN's (lesson 7), named anyway."""

    def conv(net, channels, name, nonlinearity):
        # pad=1, not pad="same": Lasagne 0.1 computes "same" as a full convolution cropped back to 32×32 (more work),
        # an integer pads the input and convolves "valid"; measured here: 520 vs 690-830 ms per step of 32.
        return Conv2DLayer(
            net,
            channels,
            filter_size=(3, 3),
            stride=(1, 1),
            pad=1,
            nonlinearity=nonlinearity,
            W=GlorotUniform(),
            b=Constant(0.0),
            name=name,
        )

    def pool(net):  # ignore_border: a partial window at the edge is dropped (32 and 16 are even)
        return MaxPool2DLayer(net, pool_size=(2, 2), stride=(2, 2), ignore_border=True)

    rates = (0.25, 0.25, 0.5) if dropout else (0.0, 0.0, 0.0)
    # rosetta: model
    net = InputLayer((None, 3, 32, 32))  # any batch size
    net = conv(net, 50, "conv1", nonlinearity=rectify)
    # conv2's ReLU comes after the pooling (lesson 10: on 4x fewer elements), so the layer's own must be switched off.
    net = NonlinearityLayer(pool(conv(net, 50, "conv2", nonlinearity=identity)), rectify)
    net = DropoutLayer(net, p=rates[0])  # (N, 50, 16, 16); off when deterministic=True
    net = conv(net, 100, "conv3", nonlinearity=rectify)
    net = NonlinearityLayer(pool(conv(net, 100, "conv4", nonlinearity=identity)), rectify)
    net = DropoutLayer(net, p=rates[1])  # (N, 100, 8, 8)
    net = DenseLayer(net, 512, nonlinearity=rectify, W=GlorotUniform(), b=Constant(0.0), name="fc1")  # flattens C·H·W
    net = DropoutLayer(net, p=rates[2])
    # Logits: the layer's default ReLU would clip them, and softmax lives in the loss (lesson 6).
    return DenseLayer(net, 10, nonlinearity=identity, W=GlorotUniform(), b=Constant(0.0), name="fc2")


# rosetta: init
def load_canonical(model, weights):
    """Canonical conv kernels are OIHW for cross-correlation (what cuDNN, PyTorch and the reference compute). Lasagne
    0.1's Conv2DLayer has no `flip_filters` option (0.2 added it): it calls theano.tensor.nnet.conv2d, whose
    filter_flip=True makes it a true convolution that flips the kernel, so the kernels are loaded flipped in H and W
    and the layer flips them back. Training is unaffected (Glorot's distribution is symmetric), but weights taken
    from any other framework need this flip, and the layers' W need it on the way out. Dense weights are (in, out) in
    Lasagne (`T.dot(x, W)`): the canonical (out, in) is transposed."""
    layers = layers_by_name(model)
    for name in ("conv1", "conv2", "conv3", "conv4"):
        layers[name].W.set_value(np.ascontiguousarray(weights[f"{name}.weight"][:, :, ::-1, ::-1], np.float32))
        layers[name].b.set_value(np.asarray(weights[f"{name}.bias"], np.float32))
    for name in ("fc1", "fc2"):
        layers[name].W.set_value(np.ascontiguousarray(weights[f"{name}.weight"].T, np.float32))
        layers[name].b.set_value(np.asarray(weights[f"{name}.bias"], np.float32))


def read_canonical(model):
    """load_canonical's inverse: kernels flipped back, dense weights transposed back."""
    layers, out = layers_by_name(model), {}
    for name in ("conv1", "conv2", "conv3", "conv4", "fc1", "fc2"):
        w = layers[name].W.get_value()
        out[f"{name}.weight"] = w[:, :, ::-1, ::-1].copy() if w.ndim == 4 else w.T.copy()
        out[f"{name}.bias"] = layers[name].b.get_value()
    return out


def make_predict(model):
    """Compile the inference graph: `deterministic=True` builds the network without dropout (lesson 4)."""
    x = T.tensor4("x")
    return theano.function([x], lasagne.layers.get_output(model, x, deterministic=True))


def predict_logits(model, x):
    return make_predict(model)(np.asarray(x, np.float32))


# ==== Train step ====
def make_train_step(model, lr, momentum, x_train=None, y_train=None):
    """Build the training graph and compile it into one function: forward with dropout on, the loss, its gradient and
    the parameter updates, applied in place to the layers' shared variables on every call; it returns the loss.

    The loss is Lasagne's categorical_crossentropy on softmax(logits) with integer labels: Theano's optimizer rewrites
    that pair into one fused op (CrossentropySoftmaxArgmax1HotWithBias: -x[y] + m + log Σ exp(x - m), m = max x, the
    stable log-softmax form; verified with theano.printing.debugprint), so the graph written the way Lasagne's
    examples write it is the numerically stable one. lasagne.updates.momentum is plain momentum, v = μv - lr·g, then
    p = p + v, with no unit gain (lesson 8).

    With the training set given (`data_placement=device`), it lives in shared variables (on the GPU backend: in device
    memory) and the function takes a batch's index vector, substituted through `givens`."""
    # rosetta: train-step
    x, y = T.tensor4("x"), T.ivector("y")
    logits = lasagne.layers.get_output(model, x)  # deterministic=False: dropout on
    # rosetta: loss
    loss = lasagne.objectives.categorical_crossentropy(T.nnet.softmax(logits), y).mean()
    # rosetta: optimizer
    parameters = lasagne.layers.get_all_params(model, trainable=True)
    updates = lasagne.updates.momentum(loss, parameters, learning_rate=lr, momentum=momentum)
    # rosetta: train-step
    if x_train is None:
        return theano.function([x, y], loss, updates=updates)
    idx = T.lvector("idx")  # shared.batching's int64 indices
    x_shared, y_shared = theano.shared(x_train, borrow=True), theano.shared(y_train, borrow=True)
    return theano.function([idx], loss, updates=updates, givens={x: x_shared[idx], y: y_shared[idx]})


def train_steps(cfg, weights, x, y, steps):
    """The training-equivalence test's entry (tests/test_training_equivalence.py): from canonical `weights`, `steps`
    steps on the one batch (x, y) with main's network and compiled step; (each step's loss, weights after each)."""
    switches = resolve_switches(SWITCHES, cfg)
    model = build_model(dropout=switches["dropout"])
    load_canonical(model, weights)
    train_step = make_train_step(model, cfg.params["lr"], cfg.params["momentum"])
    x, y = np.asarray(x, np.float32), np.asarray(y, np.int32)
    losses, after = [], []
    for _ in range(steps):
        losses.append(float(train_step(x, y)))
        after.append(read_canonical(model))
    return losses, after


# ==== Evaluate ====
# rosetta: evaluate
def evaluate(model, x_test, y_test, batch_size):
    predict = make_predict(model)  # dropout off (lesson 4)
    logits = [predict(x_test[idx]) for idx in batching.eval_batches(len(x_test), batch_size)]
    return metrics.accuracy(np.concatenate(logits), y_test)


# ==== Main ====
def main(cfg):
    p, switches = cfg.params, resolve_switches(SWITCHES, cfg)
    check_precision(cfg.precision)
    theano.config.dnn.enabled = "True" if switches["cudnn"] else "False"  # read once, when the GPU context starts
    device = select_device(cfg)  # before any shared variable exists
    if switches["data_placement"] not in params.DATA_PLACEMENTS:
        raise ValueError(
            f"data_placement={switches['data_placement']!r}: choose one of {', '.join(params.DATA_PLACEMENTS)}"
        )
    on_device = switches["data_placement"] == "device"
    theano.config.openmp = bool(switches["openmp"])  # read when the ops are created, at compile
    theano.config.dnn.conv.algo_fwd = switches["cudnn_algo"]
    theano.config.dnn.conv.algo_bwd_filter = theano.config.dnn.conv.algo_bwd_data = switches["cudnn_algo"]
    lasagne.random.set_rng(np.random.RandomState(0))  # Glorot draws and the dropout streams' seeds
    x_train, y_train, x_test, y_test = load_data(cfg)
    model = build_model(dropout=switches["dropout"])
    load_canonical(model, canonical.init_weights("cnn"))  # the same start in every framework (docs/design.md)

    # The compile happens here, before the first step: a user waits for it, so it belongs to the first epoch and to
    # the warm-up (with the first step), and stays out of the steady-state time (shared/timing.py).
    with stopwatch() as compile_time:
        train_step = make_train_step(model, p["lr"], p["momentum"], *((x_train, y_train) if on_device else ()))
    # rosetta: barrier
    losses = []  # every step's loss (host arrays)
    epoch_seconds, first_step, _, windows = timed_epochs(
        p["epochs"],
        lambda epoch: train_batches(x_train, y_train, p["batch_size"], epoch, on_device),
        lambda batch: train_step(*batch),
        outputs=losses,
    )
    # theano.function returns host arrays, so every call has finished on the device when it returns: no barrier.
    warmup = compile_time() + first_step
    epoch_seconds[0] += compile_time()

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
            **metrics.loss_metrics(losses, steps),
            epochs=p["epochs"],
            train_samples=len(x_train),
            test_samples=len(x_test),
            data_placement=switches["data_placement"],
            compile_seconds=compile_time(),
            differences=[],
        ),
        "timing": train_timing(windows, warmup=warmup),
        "switches": {
            **switches,
            "memory_format": "NCHW",
            "dtype": theano.config.floatX,
            "device": device,
            "blas_ldflags": theano.config.blas.ldflags,
            "loss": "categorical_crossentropy(softmax), fused by Theano into a log-softmax op",
        },
    }
