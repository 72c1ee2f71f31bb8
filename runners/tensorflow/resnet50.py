"""TensorFlow 2.21 · resnet50 · ResNet-50 v1.5 (torchvision's definition, the Keras 3 layers of
runners/keras/networks.py) cut after global average pooling: timed feature extraction through a tf.data pipeline and a
tf.function (optionally XLA-compiled) forward pass."""

import numpy as np
import tensorflow as tf

from runners.keras.networks import load_canonical, predict_logits, resnet50  # noqa: F401 (the equivalence interface)
from runners.tensorflow import (
    auto,
    batch_dataset,
    count_parameters,
    epoch_iterator,
    host_tensors,
    select_devices,
    set_precision,
    sync,
)
from shared import batching, canonical
from shared.datasets import random_images
from shared.runner import resolve_switches
from shared.timing import extraction_metrics, repeat

# ==== Config ====
# Image size, batch size and batch count come from shared/params.py (1,280 images of 224² in batches of 32 at full
# scale).
SWITCHES = {
    "xla": None,  # jit_compile the forward pass (fuses batch norm + ReLU into the convs); None = GPU only
    "channels_first": None,  # None = NCHW on GPU (cuDNN's classic layout, lesson 2), NHWC on CPU (oneDNN's)
}
# Not tf.keras.applications.ResNet50: that is ResNet v1 (stride on the first 1×1 conv, conv biases), another network.
# TF 2 builds networks from Keras 3 layers, so the model is the one the Keras runners build, shared, not copied.
# Weights: the canonical ones (ImageNet from the `weights` step, else the shared seeded init; record field `weights`).
# Data placement is "host" by the nature of the task: every timed pass copies each batch in (tf.data, prefetched to
# the GPU) and its features back out, as a feature extractor in production would.
# One tf.data iterator serves every pass (`epoch_iterator` over the repeated dataset): an iterator made and deleted per
# pass left both cores idle for ~0.2 s in about half the passes, a timer's sleep inside the clock (docs/verify.md).
# So the prefetch may hold a pass's first batch when its clock starts, as it holds the next step's batch in training.


# ==== Data ====
def load_data(cfg, channels_first):
    """Random images as a host tensor in the model's layout; every timed pass copies them to the device."""
    p = cfg.params
    images = random_images(p["batch_size"] * p["batches"], p["image_size"])  # (N, 3, H, W)
    return host_tensors(images if channels_first else np.ascontiguousarray(images.transpose(0, 2, 3, 1)))[0]


# ==== Model ====
# rosetta: model
def build_model(cfg=None, channels_first=False):
    """ResNet-50 v1.5 for images of any size; main loads the canonical weights into it."""
    return resnet50("channels_first" if channels_first else "channels_last")


# ==== Train step ====
# Feature extraction has no training step: the timed unit is one forward pass over all images (see `extract`).
# rosetta: inference
def extract(predict, batches):
    features = [predict(x) for (x,) in batches]  # queued on the device; the loop never waits
    return np.concatenate([f.numpy() for f in features])  # back to the host: part of the timed work


# ==== Evaluate ====
def evaluate(features, n, dims):
    """Sanity check of the output: one finite `dims`-d feature per image."""
    assert features.shape == (n, dims) and np.isfinite(features).all(), features.shape
    return float(features.mean())


# ==== Main ====
def main(cfg):
    p, switches = cfg.params, resolve_switches(SWITCHES, cfg)
    device = select_devices(cfg)[0]
    on_gpu = cfg.device == "gpu"
    set_precision(cfg.precision, on_gpu)
    channels_first, xla = auto(switches["channels_first"], on_gpu), auto(switches["xla"], on_gpu)
    tf.keras.utils.set_random_seed(0)
    images = load_data(cfg, channels_first)
    model = build_model(channels_first=channels_first)
    # rosetta: init
    weights, source = canonical.load(cfg.data, "resnet50")  # ImageNet from the `weights` step, else seeded random
    load_canonical(model, weights)
    # rosetta: inference
    predict = tf.function(lambda x: model(x, training=False), jit_compile=xla)  # float32 features (the pooling layer)
    index_batches = list(batching.eval_batches(len(images), p["batch_size"]))
    passes = epoch_iterator(batch_dataset((images,), index_batches, device, repeat=True), len(index_batches))

    features = []
    timing = repeat(lambda: features.append(extract(predict, passes(None))), repeats=cfg.repeats, barrier=sync)
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
            "xla": xla,
            "memory_format": "NCHW" if channels_first else "NHWC",
            "device": device,
            "policy": tf.keras.mixed_precision.global_policy().name,
            "tensor_float_32": tf.config.experimental.tensor_float_32_execution_enabled(),
        },
    }
