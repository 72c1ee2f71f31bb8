"""CNTK 2.7 · resnet50 · ResNet-50 v1.5 built from `C.layers`, cut after global average pooling: timed feature
extraction with `model.eval`."""

import cntk as C
import numpy as np

from runners.cntk import check_precision, count_parameters, is_gpu, select_device
from shared import batching, canonical
from shared.datasets import random_images
from shared.runner import resolve_switches
from shared.timing import extraction_metrics, repeat

# ==== Config ====
# Image size, batch size and batch count: shared/params.py (1,280 images of 224² in batches of 32 at full scale).
SWITCHES = {
    "cudnn_batchnorm": True,  # BatchNormalization(use_cntk_engine=False): cuDNN's batch-norm kernels on the GPU
    # (off: CNTK's own engine; the CPU runs CNTK's either way)
}
# Layout: NCHW (CNTK's only layout). CNTK's pretrained ResNets are ResNet v1 models in its own .model format, not the
# canonical network; so ResNet-50 v1.5 is written here the way CNTK's own ResNet example writes it
# (Examples/Image/Classification/ResNet/Python/resnet_models.py: conv_bn blocks, a bottleneck with stride1x1 and
# stride3x3, here on the 3×3 as torchvision), with torchvision's layer names, and loads the canonical weights
# (ImageNet from the `weights` step, else the shared seeded init; record field `weights`). Data placement is "host" by
# the nature of the task: every timed pass sends each batch to the device and its features back.


# ==== Data ====
def load_data(cfg):
    """Random images in host memory; every timed pass copies them to the device, as a feature extractor would."""
    p = cfg.params
    return random_images(p["batch_size"] * p["batches"], p["image_size"])


# ==== Model ====
# Layer names are torchvision's (conv1, bn1, layer1.0.conv1, layer1.0.downsample.0, …): model.find_by_name(name) is
# the layer that holds the canonical `name.weight`. Convolutions have no bias.
def conv_bn(x, channels, k, stride, conv_name, bn_name, cudnn_batchnorm, explicit_pad=False):
    """Convolution (no bias) + spatial batch norm. pad=True is CNTK's "same" padding, centred on the kernel: for our
    odd kernels at strides 1 and 2 that is torchvision's zero padding of k // 2 on every side (the equivalence test
    checks it). CNTK refuses it on a feature map smaller than the kernel ("kernel dim 3 <= input dim 2"), so where
    that can happen the same zeros are added by C.pad (`explicit_pad`): only there, as C.pad is slow on the CPU
    (padding the last stage explicitly cost ~20% of a 224² pass here)."""
    if explicit_pad and k > 1:
        x = C.pad(x, pattern=[(0, 0), (k // 2, k // 2), (k // 2, k // 2)])  # (C, H + k - 1, W + k - 1)
    x = C.layers.Convolution2D((k, k), channels, strides=stride, pad=not explicit_pad, bias=False, name=conv_name)(x)
    # Spatial batch norm (map_rank=1: one scale, bias, mean and variance per channel) with torchvision's ε.
    return C.layers.BatchNormalization(map_rank=1, epsilon=1e-5, use_cntk_engine=not cudnn_batchnorm, name=bn_name)(x)


def bottleneck(x, width, stride, prefix, cudnn_batchnorm, explicit_pad):
    """1×1 reduce → 3×3 (the stride here: ResNet v1.5) → 1×1 expand ×4, plus the shortcut, projected in each stage's
    first block (`downsample`)."""
    h = C.relu(conv_bn(x, width, 1, 1, f"{prefix}.conv1", f"{prefix}.bn1", cudnn_batchnorm))
    h = C.relu(conv_bn(h, width, 3, stride, f"{prefix}.conv2", f"{prefix}.bn2", cudnn_batchnorm, explicit_pad))
    h = conv_bn(h, width * 4, 1, 1, f"{prefix}.conv3", f"{prefix}.bn3", cudnn_batchnorm)
    if prefix.endswith(".0"):
        x = conv_bn(x, width * 4, 1, stride, f"{prefix}.downsample.0", f"{prefix}.downsample.1", cudnn_batchnorm)
    return C.relu(h + x)


# rosetta: model
def build_model(cfg=None, image_size=C.FreeDimension, cudnn_batchnorm=True):
    """A Function of `images` (3, image_size, image_size) -> pooled features (2048,). The default free image size
    lets one model take any size (the equivalence test's 64×64); the timed cells fix it."""
    images = C.input_variable((3, image_size, image_size), np.float32, name="images")
    h = C.relu(conv_bn(images, 64, 7, 2, "conv1", "bn1", cudnn_batchnorm))  # (64, H/2, W/2)
    h = C.layers.MaxPooling((3, 3), strides=(2, 2), pad=True)(h)  # (64, H/4, W/4)
    # The last stage's maps are H/32: 7×7 at 224², but 2×2 at 64×64 (the tiny scale, the equivalence test), smaller
    # than its 3×3 kernels, so there (and at a free size) that stage pads explicitly (conv_bn).
    small = image_size == C.FreeDimension or image_size < 32 * 3
    for stage, (width, depth) in enumerate(((64, 3), (128, 4), (256, 6), (512, 3)), start=1):
        for i in range(depth):
            h = bottleneck(
                h,
                width,
                2 if stage > 1 and i == 0 else 1,
                f"layer{stage}.{i}",
                cudnn_batchnorm,
                explicit_pad=small and stage == 4,
            )
    # Global average pooling as a mean over the spatial axes (C.layers.GlobalAveragePooling needs a fixed size):
    # (2048, H/32, W/32) -> (2048,)
    return C.reshape(C.reduce_mean(h, axis=(1, 2)), (2048,), name="features")


# torchvision's BatchNorm names -> CNTK's: scale and bias are parameters, the aggregates are constants.
BATCHNORM_NAMES = {
    "weight": "scale",
    "bias": "bias",
    "running_mean": "aggregate_mean",
    "running_var": "aggregate_variance",
}


def load_canonical(model, weights):
    """Canonical names are torchvision's, and so are our layer names; OIHW kernels are CNTK's layout too. Strict like
    PyTorch's load_state_dict: a wrong shape, or a parameter or statistic left unloaded, is an error. (BatchNorm's
    aggregate_count stays 0: it only weighs the running estimates while training.)"""
    loaded = set()
    for name, w in weights.items():
        prefix, leaf = name.rsplit(".", 1)
        layer = model.find_by_name(prefix)
        target = getattr(layer, "W" if np.ndim(w) == 4 else BATCHNORM_NAMES[leaf])
        if target.shape != np.shape(w):
            raise ValueError(f"{name}: canonical shape {np.shape(w)}, model has {target.shape}")
        target.value = np.asarray(w, np.float32)
        loaded.add(target.uid)
    missing = [p.name for p in model.parameters if p.uid not in loaded]
    missing += [
        c.name for c in model.constants if c.name in ("aggregate_mean", "aggregate_variance") and c.uid not in loaded
    ]
    if missing:
        raise ValueError(f"canonical weights lack {len(missing)} of the model's arrays, e.g. {missing[:3]}")


def predict_logits(model, x):
    """Pooled features (N, 2048) in inference mode: `eval` normalizes with BatchNorm's aggregate statistics."""
    return model.eval({model.arguments[0]: np.asarray(x, np.float32)})


# ==== Train step ====
# rosetta: inference
# Feature extraction has no training step: the timed unit is one forward pass over all images (see `extract`).
def extract(model, images, batch_size):
    """`model.eval` copies each batch to the device, runs the graph in inference mode and returns the features as
    NumPy: both copies are timed work."""
    x = model.arguments[0]
    return [model.eval({x: images[idx[0] : idx[-1] + 1]}) for idx in batching.eval_batches(len(images), batch_size)]


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
    device = select_device(cfg)
    images = load_data(cfg)
    model = build_model(image_size=p["image_size"], cudnn_batchnorm=switches["cudnn_batchnorm"])
    # rosetta: init
    weights, source = canonical.load(cfg.data, "resnet50")  # ImageNet from the `weights` step, else seeded random
    load_canonical(model, weights)

    features = []
    # rosetta: barrier
    # No barrier of its own: each pass ends with `model.eval` copying the last operation's output (the features) to
    # NumPy, which waits for that operation, as Keras' predict does in runners/keras2/resnet50.py.
    timing = repeat(lambda: features.append(extract(model, images, p["batch_size"])), repeats=cfg.repeats)
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
            "memory_format": "NCHW",
            "dtype": "float32",
            "device": "gpu(0)" if is_gpu(device) else "cpu",
        },
    }
