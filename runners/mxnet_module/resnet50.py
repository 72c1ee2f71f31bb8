"""MXNet 1.9 Module · resnet50 · ResNet-50 v1.5 (torchvision's definition) as an mx.sym graph cut after global average
pooling: timed feature extraction with a Module bound for inference."""

import os

import mxnet as mx
import numpy as np

from runners.mxnet_module import check_precision, contexts, count_parameters, predict, set_canonical, sync
from shared import batching, canonical
from shared.datasets import random_images
from shared.runner import resolve_switches
from shared.timing import extraction_metrics, repeat

# ==== Config ====
# Image size, batch size and batch count: shared/params.py (1,280 images of 224² in batches of 32 at full scale).
SWITCHES = {
    "cudnn_autotune": True,  # MXNET_CUDNN_AUTOTUNE_DEFAULT: fixed input shape, so autotune once in the warm-up pass
    "pinned_memory": True,  # images in page-locked host memory (mx.cpu_pinned): faster, asynchronous copies in
}
# Data placement is "host" by the nature of the task (and shared.params.DATA_PLACEMENT): the images sit in host memory
# and every timed pass copies each batch in and its features back out, as a feature extractor in production would.
# Weights: the canonical ones (ImageNet from the `weights` step, else the shared seeded init; record field `weights`),
# not MXNet's model zoo (its resnet50_v1 is v1: the stride on the 1×1 conv).


# ==== Data ====
def load_data(cfg, ctx):
    """Random images as one host NDArray; pinned (page-locked) for a GPU when the switch says so."""
    p = cfg.params
    pinned = ctx.device_type == "gpu" and resolve_switches(SWITCHES, cfg)["pinned_memory"]
    return mx.nd.array(
        random_images(p["batch_size"] * p["batches"], p["image_size"]), ctx=mx.cpu_pinned() if pinned else mx.cpu()
    )


# ==== Model ====
def resnet50_symbol():
    """ResNet-50 v1.5 up to global average pooling, `data` (N, 3, H, W) -> (N, 2048). Layer names are torchvision's
    module paths with `_` for `.` (`layer1_0_conv1`, `layer1_0_downsample_1`), so its weight names map one to one.
    v1.5: the stride sits on the 3×3 conv of each block; convolutions have no bias; zero padding is symmetric
    (k // 2 on every side); every BatchNorm has ε = 1e-5 and a trainable γ (MXNet's `fix_gamma` default is True,
    which would pin γ to 1: a classic Module-era slip)."""

    def conv(x, channels, kernel, stride, name):
        return mx.sym.Convolution(
            x,
            num_filter=channels,
            kernel=(kernel, kernel),
            stride=(stride, stride),
            pad=(kernel // 2, kernel // 2),
            no_bias=True,
            name=name,
        )

    def bn(x, name):
        return mx.sym.BatchNorm(x, eps=canonical.BN_EPS, fix_gamma=False, name=name)

    # rosetta: model
    x = mx.sym.Variable("data")
    x = mx.sym.relu(bn(conv(x, 64, 7, 2, "conv1"), "bn1"))  # (N, 64, H/2, W/2)
    x = mx.sym.Pooling(x, kernel=(3, 3), stride=(2, 2), pad=(1, 1), pool_type="max")  # (N, 64, H/4, W/4)
    for stage, (width, blocks) in enumerate(((64, 3), (128, 4), (256, 6), (512, 3)), start=1):
        for i in range(blocks):
            p, stride = f"layer{stage}_{i}", 2 if stage > 1 and i == 0 else 1
            out = mx.sym.relu(bn(conv(x, width, 1, 1, f"{p}_conv1"), f"{p}_bn1"))
            out = mx.sym.relu(bn(conv(out, width, 3, stride, f"{p}_conv2"), f"{p}_bn2"))  # stride here (v1.5)
            out = bn(conv(out, width * 4, 1, 1, f"{p}_conv3"), f"{p}_bn3")
            if i == 0:  # projection shortcut
                x = bn(conv(x, width * 4, 1, stride, f"{p}_downsample_0"), f"{p}_downsample_1")
            x = mx.sym.relu(out + x)
    x = mx.sym.Pooling(x, kernel=(1, 1), global_pool=True, pool_type="avg")  # (N, 2048, 1, 1)
    return mx.sym.flatten(x)  # (N, 2048)


# rosetta: model
def build_model(cfg=None, ctx=(mx.cpu(),), batch_size=1, image_size=224):
    """A Module bound for inference (`for_training=False`: no gradient buffers, BatchNorm on its moving statistics)
    to (batch_size, 3, image_size, image_size). Its initialization does not matter: main loads canonical weights.
    No label: the graph ends in features, not in a loss."""
    model = mx.mod.Module(resnet50_symbol(), data_names=("data",), label_names=None, context=list(ctx))
    model.bind(data_shapes=[("data", (batch_size, 3, image_size, image_size))], for_training=False)
    model.init_params(mx.init.Xavier())
    return model


BATCHNORMS = {name.rsplit(".", 1)[0] for name in canonical.SHAPES["resnet50"] if name.endswith(".running_var")}


def load_canonical(model, weights):
    """torchvision's names -> the Module's: `_` for `.`, BatchNorm's weight/bias are γ/β and its running statistics
    the auxiliary states moving_mean/moving_var; layouts (conv OIHW) agree."""
    set_canonical(model, weights, BATCHNORMS)


def predict_logits(model, x):
    """Pooled features (N, 2048) in inference mode."""
    return predict(model.symbol, model, np.asarray(x, np.float32))


# ==== Train step ====
# rosetta: inference
# Feature extraction has no training step: the timed unit is one forward pass over all images (see `extract`).
def extract(model, images, batch_size):
    """One pass: each batch is a slice of the host array (no copy); forward copies it into the executor's input on
    the device, and `copyto(mx.cpu())` queues the features' way back — all part of the timed work, none of it waiting
    (the clock's barrier, nd.waitall, waits at the end; lesson 14)."""
    features = []
    for idx in batching.eval_batches(len(images), batch_size):
        model.forward(mx.io.DataBatch(data=[images[idx[0] : idx[-1] + 1]]), is_train=False)
        features.append(model.get_outputs()[0].copyto(mx.cpu()))  # the executor reuses its output: copy it out
    return features


# ==== Evaluate ====
def evaluate(features, n, dims):
    """Sanity check of the output: one finite `dims`-d feature per image."""
    out = mx.nd.concat(*features, dim=0).asnumpy()
    assert out.shape == (n, dims) and np.isfinite(out).all(), out.shape
    return float(out.mean())


# ==== Main ====
def main(cfg):
    p, switches = cfg.params, resolve_switches(SWITCHES, cfg)
    check_precision(cfg.precision)
    # rosetta: device
    ctx = contexts(cfg)[:1]
    # rosetta: end
    os.environ["MXNET_CUDNN_AUTOTUNE_DEFAULT"] = "1" if switches["cudnn_autotune"] else "0"  # read when binding
    images = load_data(cfg, ctx[0])
    model = build_model(ctx=ctx, batch_size=p["batch_size"], image_size=p["image_size"])
    # rosetta: init
    weights, source = canonical.load(cfg.data, "resnet50")  # ImageNet from the `weights` step, else seeded random
    load_canonical(model, weights)

    features = []
    # rosetta: barrier
    timing = repeat(
        lambda: features.append(extract(model, images, p["batch_size"])), repeats=cfg.repeats, barrier=sync()
    )
    # rosetta: end
    feature_mean = evaluate(features[-1], len(images), p["features"])
    return {
        "metrics": extraction_metrics(
            timing,
            len(images),
            p["batch_size"],
            p["image_size"],
            weights=source,
            feature_mean=feature_mean,
            parameters=count_parameters(model),
            data_placement="host",
            differences=[],
        ),
        "timing": timing,
        "switches": {**switches, "memory_format": "NCHW", "device": str(ctx[0])},
    }
