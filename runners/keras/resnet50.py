"""Keras 3.15 (TF / JAX / PyTorch backend) · resnet50 · ResNet-50 v1.5 (torchvision's definition, written in Keras'
functional idiom in runners/keras/networks.py) cut after global average pooling: timed feature extraction with
`model.predict_on_batch`, batch by batch."""

import keras
import numpy as np

from runners.keras import check_device, count_parameters, data_format_of, nchw_to, set_precision
from runners.keras.networks import load_canonical, predict_logits, resnet50  # noqa: F401 (the equivalence interface)
from shared import batching, canonical
from shared.datasets import random_images
from shared.runner import resolve_switches
from shared.timing import extraction_metrics, repeat

# ==== Config ====
# Image size, batch size and batch count: shared/params.py (1,280 images of 224² in batches of 32 at full scale).
SWITCHES = {
    "channels_first": None,  # NCHW; None = on a GPU (cuDNN's classic layout, lesson 2) and on the torch backend
    # (Keras copies NHWC tensors to NCHW around every torch conv), else NHWC
    "jit_compile": "auto",  # XLA-compile predict; Keras' "auto": JAX always, TF on GPU only, torch never
}
# Not keras.applications.ResNet50: that is ResNet v1 (stride on the first 1×1 conv, conv biases), another network.
# Weights: the canonical ones (ImageNet from the `weights` step, else the shared seeded init; record field `weights`).
# Data placement is "host" (the only choice with Keras' predict functions): the images sit in host memory and every
# pass copies each batch in and its features back out, as a feature extractor in production would.
# Not `model.predict(images)` per pass: on the TF backend each call makes a tf.data iterator whose start-up left both
# cores idle ~0.23 s inside the clock in about half the passes (docs/verify.md); `predict_on_batch` runs the same
# compiled predict function on one batch, with no input pipeline.


# ==== Data ====
def load_data(cfg, data_format):
    """Random images in host memory, in the model's layout; every timed pass copies them to the device."""
    p = cfg.params
    return nchw_to(random_images(p["batch_size"] * p["batches"], p["image_size"]), data_format)


# ==== Model ====
# rosetta: model
def build_model(cfg=None, data_format="channels_last"):
    """ResNet-50 v1.5 for images of any size; main loads the canonical weights into it."""
    return resnet50(data_format)


# ==== Train step ====
# rosetta: inference
# Feature extraction has no training step: the timed unit is one pass of `predict_on_batch` over all images (see
# `extract`), which includes the host→device copy of each batch and the device→host copy of its features.
def extract(model, images, batch_size):
    return np.concatenate(
        [model.predict_on_batch(images[idx[0] : idx[-1] + 1]) for idx in batching.eval_batches(len(images), batch_size)]
    )


# ==== Evaluate ====
def evaluate(features, n, dims):
    """Sanity check of the output: one finite `dims`-d feature per image."""
    features = np.asarray(features, np.float32)
    assert features.shape == (n, dims) and np.isfinite(features).all(), features.shape
    return float(features.mean())


# ==== Main ====
def main(cfg):
    p, switches = cfg.params, resolve_switches(SWITCHES, cfg)
    check_device(cfg)
    policy = set_precision(cfg.precision, cfg.device)
    data_format = data_format_of(switches, cfg)
    keras.utils.set_random_seed(0)
    images = load_data(cfg, data_format)
    model = build_model(data_format=data_format)
    # rosetta: init
    weights, source = canonical.load(cfg.data, "resnet50")  # ImageNet from the `weights` step, else seeded random
    load_canonical(model, weights)
    model.compile(jit_compile=switches["jit_compile"])  # predict_on_batch() reads jit_compile from compile()

    features = []
    # rosetta: barrier
    # predict_on_batch() returns numpy, so each pass ends with the features on the host: that is the barrier.
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
            "data_format": data_format,
            "dtype_policy": policy,
            "jit_compile_resolved": model.jit_compile,
            "backend": keras.backend.backend(),
        },
    }
