"""Keras 3.15 (TF / JAX / PyTorch backend) · resnet50 · keras.applications.ResNet50 cut after global average
pooling (include_top=False, pooling="avg"): timed feature extraction with `model.predict`."""
import os
from pathlib import Path

import keras
import numpy as np

from runners.keras import check_device, data_format_of, nchw_to, set_precision
from shared.datasets import random_images
from shared.runner import resolve_switches
from shared.timing import extraction_metrics, repeat

# ==== Config ====
# Image size, batch size and batch count come from shared/params.py (1,280 images of 224² in batches of 32 at full scale).
SWITCHES = {
    "channels_first": None,    # NCHW; None = on a GPU (cuDNN's classic layout, lesson 2) and on the torch backend
                               # (Keras copies NHWC tensors to NCHW around every torch conv), else NHWC
    "jit_compile": "auto",     # XLA-compile predict; Keras' "auto": JAX always, TF on GPU only, torch never
}
WEIGHTS_FILE = "resnet50_weights_tf_dim_ordering_tf_kernels_notop.h5"  # what keras.applications would download


# ==== Data ====
def load_data(cfg, data_format):
    """Random images in host memory, in the model's layout; every timed pass copies them to the device."""
    p = cfg.params
    return nchw_to(random_images(p["batch_size"] * p["batches"], p["image_size"]), data_format)


# ==== Model ====
def cached_weights(filename):
    """The ImageNet weights file if it is already in Keras' cache (~/.keras/models); never download while
    benchmarking."""
    path = Path(os.environ.get("KERAS_HOME", Path.home() / ".keras")) / "models" / filename
    return str(path) if path.exists() else None


def build_model(cfg=None, image_size=224, data_format="channels_last"):
    weights = cached_weights(WEIGHTS_FILE)
    keras.config.set_image_data_format(data_format)   # keras.applications read the layout from the global config
    shape = (3, image_size, image_size) if data_format == "channels_first" else (image_size, image_size, 3)
    model = keras.applications.ResNet50(include_top=False, weights=weights, input_shape=shape, pooling="avg")
    return model, ("imagenet" if weights else "random")


# ==== Train step ====
# Feature extraction has no training step: the timed unit is one `predict` over all images (see `extract`), which
# includes the host→device copies of the batches and the device→host copy of the features.
def extract(model, images, batch_size):
    return model.predict(images, batch_size=batch_size, verbose=0)


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
    model, weights = build_model(image_size=p["image_size"], data_format=data_format)
    model.compile(jit_compile=switches["jit_compile"])  # predict() reads jit_compile from compile()

    features = []
    # predict() returns numpy, so each pass ends with the features on the host: that is the barrier.
    timing = repeat(lambda: features.append(extract(model, images, p["batch_size"])), repeats=cfg.repeats, warmup=1)
    feature_mean = evaluate(features[-1], len(images), p["features"])
    return {
        "metrics": extraction_metrics(timing, len(images), p["batch_size"], p["image_size"], weights=weights,
                                      feature_mean=feature_mean),
        "timing": timing,
        "switches": {**switches, "data_format": data_format, "dtype_policy": policy,
                     "jit_compile_resolved": model.jit_compile, "backend": keras.backend.backend()},
    }
