"""Caffe2 (torch 1.8.1) · cnn · a VGG-style CNN built with brew on a ModelHelper, trained on CIFAR-10 by running its
net in the workspace with momentum SGD from caffe2.python.optimizer."""

import numpy as np
from caffe2.python import brew, core, model_helper, optimizer, workspace

from runners.caffe2 import (
    CPU,
    blob_name,
    check_precision,
    count_parameters,
    device_name,
    feed_canonical,
    is_gpu,
    seed_ops,
    select_device,
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
    "cudnn": True,  # GPU: convolution, pooling, ReLU and dropout run as cuDNN-engine operators
    "cudnn_exhaustive_search": True,  # GPU: cuDNN times its algorithms once per shape, keeps the fastest (lesson 3)
    "net_type": "async_scheduling",  # Caffe2's executor: operators run once their inputs are ready and a GPU waits
    # once per net ("simple": in order, a stream sync after each operator); its
    # trainers ask for "dag", which this build redirects to async_scheduling
    "data_placement": params.DATA_PLACEMENT,  # host: feed each batch inside the clock (the rule for every framework);
    # device: the whole set in device blobs before the clock, a Gather op
    # picks each batch by its fed indices
    "dropout": True,  # off only in the training-equivalence test (its step must be deterministic)
}
# Layout: NCHW ("order" in the arg_scope), Caffe2's default and cuDNN's classic layout (lesson 2). No mkldnn switch
# (resnet50 has one): Caffe2's IDEEP device lacks training operators in this build (UniformFill, for one).
LOGITS = "fc2"  # the blob that holds the logits (N, 10)


# ==== Data ====
def load_data(cfg, device, placement):
    """CIFAR-10 as float32 NCHW arrays and int32 labels (SoftmaxWithLoss takes int32). With `placement` "device" the
    training set is fed once into the blobs `train_x`/`train_y` on `device`; the test set stays on the host:
    evaluation is outside the clock."""
    p = cfg.params
    x_train, y_train, x_test, y_test = load_cifar10(cfg.data, p.get("train_samples"), p.get("test_samples"))
    if placement not in params.DATA_PLACEMENTS:
        raise ValueError(f"data_placement={placement!r}: choose one of {', '.join(params.DATA_PLACEMENTS)}")
    y_train, y_test = y_train.astype(np.int32), y_test.astype(np.int32)
    if placement == "device":
        workspace.FeedBlob("train_x", x_train, device_option=device)
        workspace.FeedBlob("train_y", y_train, device_option=device)
    return x_train, y_train, x_test, y_test


# ==== Model ====
def glorot_uniform(fan_in, fan_out):
    """Glorot/Xavier uniform U(±√(6/(fan_in+fan_out))), the canonical kernel initializer (lesson 7), as a Caffe2
    filler. Not brew's default XavierFill (the seed's notebook kept it): that is Caffe's "xavier", U(±√(3/fan_in)),
    which ignores fan_out."""
    bound = float(np.sqrt(6.0 / (fan_in + fan_out)))
    return ("UniformFill", {"min": -bound, "max": bound})


def conv(model, blob_in, blob_out, cin, cout, **kwargs):
    """3×3 convolution, pad 1 ("same" for 3×3, symmetric zeros), Glorot kernel, zero bias (brew's ConstantFill)."""
    return brew.conv(
        model,
        blob_in,
        blob_out,
        dim_in=cin,
        dim_out=cout,
        kernel=3,
        pad=1,
        weight_init=glorot_uniform(cin * 9, cout * 9),
        **kwargs,
    )


# rosetta: model
def build_model(
    cfg=None, device=CPU, is_test=True, placement="host", cudnn=False, exhaustive_search=False, dropout=True
):
    """A ModelHelper whose net maps the blob `data` (N, 3, 32, 32) to logits `fc2`. The training model
    (is_test=False) fills its parameters in param_init_net and runs dropout; the test model (is_test=True) is built
    with init_params=False: it creates no parameters and reads the training model's blobs by name. With placement
    "device" the net first gathers its batch from the device-resident `train_x` by the fed `index`."""
    model = model_helper.ModelHelper(
        name="cnn_test" if is_test else "cnn_train",
        init_params=not is_test,
        arg_scope={"order": "NCHW", "use_cudnn": cudnn, "cudnn_exhaustive_search": exhaustive_search},
    )
    rates = (0.25, 0.25, 0.5) if dropout else (0.0, 0.0, 0.0)
    with core.DeviceScope(device):
        data = "data" if placement == "host" else model.net.Gather(["train_x", "index"], "data")
        # Seed lesson 9: the images need no gradient, so the first conv's backward op skips d(loss)/d(data) (a full
        # 3×32×32 input gradient per image that nothing would read).
        h = brew.relu(model, conv(model, data, "conv1", 3, 50, no_gradient_to_input=1), "relu1")
        h = conv(model, h, "conv2", 50, 50)
        h = brew.relu(model, brew.max_pool(model, h, "pool1", kernel=2, stride=2), "relu2")  # ReLU after pooling:
        h = brew.dropout(model, h, "drop1", ratio=rates[0], is_test=is_test)  # 4× elements (lesson 10); (N,50,16,16)
        h = brew.relu(model, conv(model, h, "conv3", 50, 100), "relu3")
        h = conv(model, h, "conv4", 100, 100)
        h = brew.relu(model, brew.max_pool(model, h, "pool2", kernel=2, stride=2), "relu4")  # stride given: lesson 11
        h = brew.dropout(model, h, "drop2", ratio=rates[1], is_test=is_test)  # (N, 100, 8, 8); is_test: off (lesson 4)
        h = brew.relu(
            model,
            brew.fc(
                model,
                h,
                "fc1",
                dim_in=100 * 8 * 8,
                dim_out=512,  # FC flattens C·H·W itself
                weight_init=glorot_uniform(6400, 512),
            ),
            "relu5",
        )
        h = brew.dropout(model, h, "drop3", ratio=rates[2], is_test=is_test)
        brew.fc(model, h, LOGITS, dim_in=512, dim_out=10, weight_init=glorot_uniform(512, 10))  # logits (lesson 6)
    return model


# rosetta: init
def load_canonical(model, weights, device=CPU):
    """Canonical `conv1.weight` … `fc2.bias` are the blobs `conv1_w` … `fc2_b`; the layouts (conv OIHW, FC (out, in))
    are Caffe2's own."""
    feed_canonical(model, weights, device)


def read_canonical():
    """The canonical arrays from their workspace blobs (the training and test nets share them by name)."""
    return {name: workspace.FetchBlob(blob_name(name)) for name in canonical.SHAPES["cnn"]}


def predict_logits(model, x):
    workspace.FeedBlob("data", np.asarray(x, np.float32))
    workspace.RunNetOnce(model.net)
    return workspace.FetchBlob(LOGITS)


# ==== Train step ====
# rosetta: train-step
def add_training_operators(model, device, lr, momentum, placement):
    """Loss, gradients and update, appended to the training net. SoftmaxWithLoss is the fused, stable softmax +
    cross-entropy on int32 labels, averaged over the batch (lessons 6, 11)."""
    with core.DeviceScope(device):
        label = "label" if placement == "host" else model.net.Gather(["train_y", "index"], "label")
        # rosetta: loss
        _, loss = model.net.SoftmaxWithLoss([LOGITS, label], ["softmax", "loss"])
        model.AddGradientOperators([loss])  # appends each forward operator's gradient operator, in reverse
        # rosetta: optimizer
        # MomentumSGDUpdate with nesterov=False is plain momentum, v = μv + lr·g, p -= v: PyTorch's v = μv + g,
        # p -= lr·v at a fixed lr, and no unit gain (lesson 8). SgdOptimizer defaults to nesterov=True, so the
        # seed's `build_sgd(m, lr, policy="fixed", momentum=0.9)` trained with Nesterov momentum; we say False.
        optimizer.build_sgd(model, base_learning_rate=lr, policy="fixed", momentum=momentum, nesterov=False)
    return loss


def make_train_step(model, device, inputs, loss):
    """Instantiate the training net once (CreateNet, with its fed `inputs` declared); each step feeds its batch (a
    host→device copy on a GPU), runs forward, backward and the update as one net, and fetches its `loss` (RunNet has
    waited for its operators already: the fetch copies 4 bytes)."""
    workspace.CreateNet(model.net, input_blobs=inputs)

    # rosetta: train-step
    def train_step(feeds):
        for name, array in feeds.items():
            workspace.FeedBlob(name, array, device_option=device)
        workspace.RunNet(model.net)
        return workspace.FetchBlob(loss)

    return train_step


def train_steps(cfg, weights, x, y, steps):
    """The training-equivalence test's entry (tests/test_training_equivalence.py): from canonical `weights`, `steps`
    steps on the one batch (x, y) with main's nets and update; (each step's loss, weights after each)."""
    switches = resolve_switches(SWITCHES, cfg)
    workspace.ResetWorkspace()
    train = build_model(is_test=False, dropout=switches["dropout"])
    loss = add_training_operators(train, CPU, cfg.params["lr"], cfg.params["momentum"], "host")
    workspace.RunNetOnce(train.param_init_net)
    load_canonical(train, weights)
    train_step = make_train_step(train, CPU, ["data", "label"], loss)
    feeds = {"data": np.asarray(x, np.float32), "label": np.asarray(y, np.int32)}
    losses, after = [], []
    for _ in range(steps):
        losses.append(float(train_step(feeds)))
        after.append(read_canonical())
    return losses, after


# ==== Evaluate ====
# rosetta: evaluate
def evaluate(model, x_test, y_test, batch_size, device):
    """Test accuracy with the test net: dropout off (is_test, lesson 4), weights shared with the training net by
    blob name; no gradient operators exist in it (lesson 11's last check)."""
    workspace.CreateNet(model.net, input_blobs=["data"])
    logits = []
    for idx in batching.eval_batches(len(x_test), batch_size):
        workspace.FeedBlob("data", x_test[idx], device_option=device)
        workspace.RunNet(model.net)
        logits.append(workspace.FetchBlob(LOGITS))
    return metrics.accuracy(np.concatenate(logits), y_test)


# ==== Main ====
def main(cfg):
    p, switches = cfg.params, resolve_switches(SWITCHES, cfg)
    check_precision(cfg.precision)
    device = select_device(cfg)
    placement = switches["data_placement"]
    x_train, y_train, x_test, y_test = load_data(cfg, device, placement)
    cudnn = {"cudnn": switches["cudnn"] and is_gpu(device), "exhaustive_search": switches["cudnn_exhaustive_search"]}
    train = build_model(device=device, is_test=False, placement=placement, dropout=switches["dropout"], **cudnn)
    loss = add_training_operators(train, device, p["lr"], p["momentum"], placement)
    test = build_model(device=device, is_test=True, **cudnn)
    train.net.Proto().type = switches["net_type"]
    seed_ops(train.param_init_net, params.SEED)  # Glorot draws …
    seed_ops(train.net, params.SEED)  # … and dropout masks repeat run to run
    workspace.RunNetOnce(train.param_init_net)  # parameters, momenta, lr, iteration counter
    load_canonical(train, canonical.init_weights("cnn"), device)  # the same start in every framework (docs/design.md)
    train_step = make_train_step(train, device, ["data", "label"] if placement == "host" else ["index"], loss)

    losses = []  # every step's loss
    epoch_seconds, warmup, _, windows = timed_epochs(
        p["epochs"],
        lambda epoch: train_batches(x_train, y_train, p["batch_size"], epoch, placement),
        train_step,
        sync(train.net),
        outputs=losses,
    )

    accuracy = evaluate(test, x_test, y_test, p["batch_size"], device)
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
            parameters=count_parameters(train),
            **metrics.loss_metrics(losses, steps),
            epochs=p["epochs"],
            train_samples=len(x_train),
            test_samples=len(x_test),
            data_placement=placement,
            differences=[],
        ),
        "timing": train_timing(windows, warmup=warmup),
        "switches": {
            **switches,
            "cudnn": cudnn["cudnn"],
            "memory_format": "NCHW",
            "dtype": "float32",
            "device": device_name(device),
        },
    }
