"""MXNet 1.9 Gluon · resnet50 · ResNet-50 v1.5 written as Gluon HybridBlocks, cut after global average pooling:
timed feature extraction through the hybridized (cached) graph."""

import os

import mxnet as mx
import numpy as np
from mxnet import gluon
from mxnet.contrib import amp
from mxnet.gluon import nn

from runners.mxnet_gluon import batchnorm, check_precision, contexts, count_parameters, load_torchvision_names, sync
from shared import batching, canonical
from shared.datasets import random_images
from shared.runner import resolve_switches
from shared.timing import extraction_metrics, repeat

# ==== Config ====
# Image size, batch size and batch count come from shared/params.py (1,280 images of 224² in batches of 32 at full
# scale).
SWITCHES = {
    "hybridize": True,  # run the cached symbolic graph, not op by op (seed lesson 15)
    "static_alloc": True,  # hybridize(static_alloc): allocate the graph's memory once, reuse it every batch
    "static_shape": True,  # hybridize(static_shape): every batch has the same shape, plan once
    "cudnn_autotune": True,  # MXNET_CUDNN_AUTOTUNE_DEFAULT: pick the fastest conv algorithms in the warm-up pass
    "pinned_memory": True,  # images in page-locked host memory (cpu_pinned): faster, asynchronous copies to the GPU
}
# Model: Gluon's model zoo has resnet50_v1 (stride on the first 1×1 conv, ResNet v1) and resnet50_v2 (pre-activation),
# not torchvision's v1.5 (stride on the 3×3 conv), so the network is written here in Gluon's idiom with torchvision's
# module names and loads the canonical weights (ImageNet from the `weights` step, else the shared seeded init; record
# field `weights`). Data placement is "host" by the nature of the task: every timed pass copies each batch in and its
# features back out, as a feature extractor in production would.


# ==== Data ====
def load_data(cfg, ctx):
    """Random images allocated once in host memory (page-locked when they will be copied to a GPU)."""
    p = cfg.params
    pinned = ctx.device_type == "gpu" and resolve_switches(SWITCHES, cfg)["pinned_memory"]
    return mx.nd.array(
        random_images(p["batch_size"] * p["batches"], p["image_size"]), ctx=mx.cpu_pinned() if pinned else mx.cpu()
    )


# ==== Model ====
# Attribute names are torchvision's (conv1, bn1, layer1…layer4, downsample), so canonical weights load by name; so are
# the paddings: explicit and symmetric, as MXNet's Convolution and Pooling always pad.
class Bottleneck(gluon.HybridBlock):
    """1×1 reduce → 3×3 (stride here: ResNet v1.5, as torchvision) → 1×1 expand ×4, plus the (projected) shortcut."""

    def __init__(self, cin, width, stride, **kwargs):
        super().__init__(**kwargs)
        with self.name_scope():
            self.conv1, self.bn1 = nn.Conv2D(width, 1, use_bias=False, in_channels=cin), batchnorm(width)
            self.conv2 = nn.Conv2D(width, 3, stride, padding=1, use_bias=False, in_channels=width)
            self.bn2 = batchnorm(width)
            self.conv3, self.bn3 = nn.Conv2D(width * 4, 1, use_bias=False, in_channels=width), batchnorm(width * 4)
            self.downsample = None
            if stride != 1 or cin != width * 4:  # projection shortcut: 1×1 conv + BN
                self.downsample = nn.HybridSequential()
                self.downsample.add(
                    nn.Conv2D(width * 4, 1, stride, use_bias=False, in_channels=cin), batchnorm(width * 4)
                )

    def hybrid_forward(self, F, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = F.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        return F.relu(out + (self.downsample(x) if self.downsample else x))


# rosetta: model
class ResNet50(gluon.HybridBlock):
    def __init__(self, blocks=(3, 4, 6, 3), **kwargs):
        super().__init__(**kwargs)
        with self.name_scope():
            self.conv1, self.bn1 = nn.Conv2D(64, 7, 2, padding=3, use_bias=False, in_channels=3), batchnorm(64)
            self.maxpool = nn.MaxPool2D(3, 2, padding=1)
            cin = 64
            for stage, (width, depth) in enumerate(zip((64, 128, 256, 512), blocks), start=1):
                layer = nn.HybridSequential()
                for i in range(depth):
                    layer.add(Bottleneck(cin, width, 2 if stage > 1 and i == 0 else 1))
                    cin = width * 4
                setattr(self, f"layer{stage}", layer)  # Block.__setattr__ registers it as a child
            self.avgpool = nn.GlobalAvgPool2D()

    # rosetta: model
    def hybrid_forward(self, F, x):  # x: (N, 3, H, W)
        x = self.maxpool(F.relu(self.bn1(self.conv1(x))))  # (N, 64, H/4, W/4)
        for layer in (self.layer1, self.layer2, self.layer3, self.layer4):
            x = layer(x)  # … (N, 2048, H/32, W/32)
        return F.flatten(self.avgpool(x))  # (N, 2048): cut after global average pooling


def build_model(cfg=None, ctx=mx.cpu()):
    """Its initialization does not matter: main loads the canonical weights (ImageNet or the shared seeded init)."""
    net = ResNet50()
    net.initialize(ctx=ctx)
    return net


def load_canonical(model, weights):
    """Canonical names are torchvision's, and so are the attribute paths (BatchNorm's γ, β renamed on the way)."""
    load_torchvision_names(model, weights)


def predict_logits(model, x):
    """Pooled features (N, 2048) in inference mode (outside autograd.record): BatchNorm uses running statistics."""
    return model(mx.nd.array(x)).asnumpy()


# ==== Train step ====
# rosetta: inference
# Feature extraction has no training step: the timed unit is one forward pass over all images (see `extract`).
def extract(net, images, batch_size, ctx):
    features = []
    for idx in batching.eval_batches(len(images), batch_size):
        x = images[idx[0] : idx[-1] + 1].as_in_context(ctx)  # host -> device, queued on the engine
        features.append(net(x).as_in_context(mx.cpu()))  # back to host: part of the timed work
    return features  # NDArrays: nothing waits until the barrier


# ==== Evaluate ====
def evaluate(features, n, dims):
    """Sanity check of the output: one finite `dims`-d feature per image."""
    out = mx.nd.concat(*features, dim=0).astype("float32").asnumpy()
    assert out.shape == (n, dims) and np.isfinite(out).all(), out.shape
    return float(out.mean())


# ==== Main ====
def main(cfg):
    p, switches = cfg.params, resolve_switches(SWITCHES, cfg)
    ctx = contexts(cfg)[0]
    # rosetta: precision
    use_amp = check_precision(cfg.precision, ctx)
    os.environ["MXNET_CUDNN_AUTOTUNE_DEFAULT"] = "1" if switches["cudnn_autotune"] else "0"
    if use_amp:
        amp.init()  # float16 convolutions, float32 where it matters
    # rosetta: end
    images = load_data(cfg, ctx)
    net = build_model(ctx=ctx)
    # rosetta: init
    weights, source = canonical.load(cfg.data, "resnet50")  # ImageNet from the `weights` step, else seeded init
    load_canonical(net, weights)
    # rosetta: end
    if switches["hybridize"]:
        net.hybridize(static_alloc=switches["static_alloc"], static_shape=switches["static_shape"])

    features = []
    timing = repeat(
        lambda: features.append(extract(net, images, p["batch_size"], ctx)), repeats=cfg.repeats, barrier=sync()
    )
    feature_mean = evaluate(features[-1], len(images), p["features"])
    return {
        "metrics": extraction_metrics(
            timing,
            len(images),
            p["batch_size"],
            p["image_size"],
            weights=source,
            feature_mean=feature_mean,
            parameters=count_parameters(net),
            data_placement="host",
            differences=[],
        ),
        "timing": timing,
        "switches": {**switches, "amp": use_amp, "memory_format": "NCHW", "device": str(ctx)},
    }
