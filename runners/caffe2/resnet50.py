"""Caffe2 (torch 1.8.1) · resnet50 · ResNet-50 v1.5 (torchvision's definition) built with brew as an inference net,
cut after global average pooling: timed feature extraction with FeedBlob / RunNet / FetchBlob."""

import numpy as np
from caffe2.python import brew, core, model_helper, workspace

from runners.caffe2 import (
    CPU,
    IDEEP,
    check_precision,
    count_parameters,
    device_name,
    feed_canonical,
    is_gpu,
    is_ideep,
    select_device,
)
from shared import batching, canonical
from shared.datasets import random_images
from shared.runner import resolve_switches
from shared.timing import extraction_metrics, repeat

# ==== Config ====
# Image size, batch size and batch count come from shared/params.py (full scale: 1,280 images of 224², batches of 32).
SWITCHES = {
    "cudnn": True,  # GPU: convolution, pooling and ReLU run as cuDNN-engine operators
    "cudnn_exhaustive_search": True,  # GPU: fixed input shape, so cuDNN times its algorithms once, in the warm-up pass
    "mkldnn": True,  # CPU: run the net on Caffe2's IDEEP device, Intel MKL-DNN's convolutions, not
    # Caffe2's im2col + MKL GEMM ones (about 2× faster here, AMD EPYC); such a
    # net runs with the "simple" executor (async_scheduling crashes on IDEEP)
    "net_type": "async_scheduling",  # Caffe2's executor: operators run once their inputs are ready and a GPU waits
    # once per net ("simple": in order, a stream sync after each operator); its
    # trainers ask for "dag", which this build redirects to async_scheduling
}
# Layout: NCHW. Weights: the canonical ones (ImageNet from the `weights` step, else the shared seeded init; record
# field `weights`), not Caffe2's model zoo (its resnet50 is the Caffe model, ResNet v1: the stride on the first 1×1
# conv). Data placement is "host" by the nature of the task: every timed pass feeds each batch to the device and
# fetches its features back, as a feature extractor in production would.
FEATURES = "features"  # the output blob, (N, 2048)
CPU_DEVICE = IDEEP if SWITCHES["mkldnn"] else CPU  # a CPU cell's default device, the one the equivalence test runs


# ==== Data ====
def load_data(cfg):
    """Random images in host memory; every timed pass feeds them to the device batch by batch."""
    p = cfg.params
    return random_images(p["batch_size"] * p["batches"], p["image_size"])


# ==== Model ====
# Blob names are torchvision's module paths with `_` for `.` (conv1, layer1_0_conv1, layer1_0_downsample_1, …), so
# each canonical array has one blob (runners.caffe2.blob_name). Every conv has no bias and symmetric padding k // 2;
# every spatial_bn runs with is_test=1 (its running statistics, no update) and ε = 1e-5 (torchvision's; Caffe2's
# default is also 1e-5).
def conv_bn(model, x, conv_name, bn_name, cin, cout, kernel, stride=1, relu=True):
    x = brew.conv(
        model, x, conv_name, dim_in=cin, dim_out=cout, kernel=kernel, stride=stride, pad=kernel // 2, no_bias=1
    )
    x = brew.spatial_bn(model, x, bn_name, cout, epsilon=canonical.BN_EPS, is_test=1)
    return brew.relu(model, x, x) if relu else x  # in place: the BN output is not needed again


# rosetta: model
def bottleneck(model, x, prefix, cin, width, stride):
    """1×1 reduce → 3×3 (the stride here: ResNet v1.5, as torchvision) → 1×1 expand ×4, plus the shortcut
    (projected by a strided 1×1 conv + BN in a stage's first block)."""
    out = conv_bn(model, x, f"{prefix}_conv1", f"{prefix}_bn1", cin, width, 1)
    out = conv_bn(model, out, f"{prefix}_conv2", f"{prefix}_bn2", width, width, 3, stride)
    out = conv_bn(model, out, f"{prefix}_conv3", f"{prefix}_bn3", width, width * 4, 1, relu=False)
    if stride != 1 or cin != width * 4:
        x = conv_bn(model, x, f"{prefix}_downsample_0", f"{prefix}_downsample_1", cin, width * 4, 1, stride, relu=False)
    out = brew.sum(model, [out, x], f"{prefix}_sum")
    return brew.relu(model, out, out)


# rosetta: model
def build_model(cfg=None, device=CPU_DEVICE, cudnn=False, exhaustive_search=False):
    """An inference-only ModelHelper, `data` (N, 3, H, W) -> `features` (N, 2048). init_params=False: the parameters
    are declared (names, shapes) but never initialized by the model; main feeds the canonical weights."""
    model = model_helper.ModelHelper(
        name="resnet50",
        init_params=False,
        arg_scope={"order": "NCHW", "use_cudnn": cudnn, "cudnn_exhaustive_search": exhaustive_search},
    )
    with core.DeviceScope(device):
        x = conv_bn(model, "data", "conv1", "bn1", 3, 64, 7, 2)  # (N, 64, H/2, W/2)
        x = brew.max_pool(model, x, "maxpool", kernel=3, stride=2, pad=1)  # (N, 64, H/4, W/4): sizes round down
        cin = 64
        for stage, (width, blocks) in enumerate(((64, 3), (128, 4), (256, 6), (512, 3)), start=1):
            for i in range(blocks):
                stride = 2 if stage > 1 and i == 0 else 1
                x = bottleneck(model, x, f"layer{stage}_{i}", cin, width, stride)  # ... (N, 2048, H/32, W/32)
                cin = width * 4
        x = brew.average_pool(model, x, "avgpool", global_pooling=True)  # (N, 2048, 1, 1)
        model.net.Flatten(x, FEATURES)  # (N, 2048)
    return model


BATCHNORMS = {name.rsplit(".", 1)[0] for name in canonical.SHAPES["resnet50"] if name.endswith(".running_var")}


def load_canonical(model, weights, device=CPU_DEVICE):
    """torchvision's names -> blobs: `_` for `.`, conv weights `_w`, BatchNorm γ/β/mean/variance `_s`/`_b`/`_rm`/
    `_riv`; layouts (conv OIHW) agree."""
    feed_canonical(model, weights, device, BATCHNORMS)


def predict_logits(model, x, device=CPU_DEVICE):
    """Pooled features (N, 2048) in inference mode: SpatialBN uses its running statistics."""
    workspace.FeedBlob("data", np.asarray(x, np.float32), device_option=device)
    workspace.RunNetOnce(model.net)
    return workspace.FetchBlob(FEATURES)


# ==== Train step ====
# rosetta: inference
# Feature extraction has no training step: the timed unit is one forward pass over all images (see `extract`).
def extract(model, images, batch_size, device):
    features = []
    for idx in batching.eval_batches(len(images), batch_size):
        workspace.FeedBlob("data", images[idx[0] : idx[-1] + 1], device_option=device)  # host → device: timed work
        workspace.RunNet(model.net)
        features.append(workspace.FetchBlob(FEATURES))  # back to host: timed work too
    return features


# ==== Evaluate ====
def evaluate(features, n, dims):
    """Sanity check of the output: one finite `dims`-d feature per image."""
    out = np.concatenate(features).astype(np.float32)
    assert out.shape == (n, dims) and np.isfinite(out).all(), out.shape
    return float(out.mean())


# ==== Main ====
def main(cfg):
    p, switches = cfg.params, resolve_switches(SWITCHES, cfg)
    check_precision(cfg.precision)
    device = select_device(cfg, mkldnn=switches["mkldnn"])
    images = load_data(cfg)
    cudnn = switches["cudnn"] and is_gpu(device)
    model = build_model(device=device, cudnn=cudnn, exhaustive_search=switches["cudnn_exhaustive_search"])
    net_type = "simple" if is_ideep(device) else switches["net_type"]  # async_scheduling segfaults on IDEEP here
    model.net.Proto().type = net_type
    # rosetta: init
    weights, source = canonical.load(cfg.data, "resnet50")  # ImageNet from the `weights` step, else seeded random
    load_canonical(model, weights, device)
    workspace.CreateNet(model.net, input_blobs=["data"])

    features = []
    # rosetta: barrier
    # No barrier of its own: each pass ends with FetchBlob of the net's last output (the features of the last batch),
    # which waits for the operator that writes it.
    timing = repeat(lambda: features.append(extract(model, images, p["batch_size"], device)), repeats=cfg.repeats)
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
        "switches": {
            **switches,
            "cudnn": cudnn,
            "mkldnn": is_ideep(device),
            "net_type": net_type,
            "memory_format": "NCHW",
            "dtype": "float32",
            "device": device_name(device),
        },
    }
