"""TensorFlow 2.21 · resnet50 · tf.keras.applications ResNet-50 cut after global average pooling: timed feature
extraction through a tf.data pipeline and a tf.function (optionally XLA-compiled) forward pass."""
import numpy as np
import tensorflow as tf

from runners.tensorflow import auto, batch_dataset, cached_weights, host_tensors, select_devices, set_precision, sync
from shared import batching
from shared.datasets import random_images
from shared.runner import resolve_switches
from shared.timing import extraction_metrics, repeat

# ==== Config ====
# Image size, batch size and batch count come from shared/params.py (1,280 images of 224² in batches of 32 at full
# scale).
SWITCHES = {
    "xla": None,               # jit_compile the forward pass (fuses batch norm + ReLU into the convs); None = GPU only
    "channels_first": None,    # None = NCHW on GPU (cuDNN's classic layout, lesson 2), NHWC on CPU (oneDNN's)
}
WEIGHTS_FILE = "resnet50_weights_tf_dim_ordering_tf_kernels_notop.h5"


# ==== Data ====
def load_data(cfg, channels_first):
    """Random images as a host tensor in the model's layout; every timed pass copies them to the device."""
    p = cfg.params
    images = random_images(p["batch_size"] * p["batches"], p["image_size"])          # (N, 3, H, W)
    return host_tensors(images if channels_first else np.ascontiguousarray(images.transpose(0, 2, 3, 1)))[0]


# ==== Model ====
def build_model(image_size=224, channels_first=False):
    """ImageNet weights when they are in Keras' cache (no download while benchmarking), else random; include_top=False
    with average pooling gives the 2048-d feature. Keras applications read the global image data format."""
    tf.keras.backend.set_image_data_format("channels_first" if channels_first else "channels_last")
    shape = (3, image_size, image_size) if channels_first else (image_size, image_size, 3)
    weights = cached_weights(WEIGHTS_FILE)
    model = tf.keras.applications.ResNet50(include_top=False, pooling="avg", weights=weights, input_shape=shape)
    return model, weights or "random"


# ==== Train step ====
# Feature extraction has no training step: the timed unit is one forward pass over all images (see `extract`).
def extract(predict, dataset):
    features = [predict(x) for x, in dataset]                      # queued on the device; the loop never waits
    return np.concatenate([f.numpy() for f in features])           # back to the host: part of the timed work


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
    model, weights = build_model(p["image_size"], channels_first)
    predict = tf.function(lambda x: tf.cast(model(x, training=False), tf.float32), jit_compile=xla)
    dataset = batch_dataset((images,), batching.eval_batches(len(images), p["batch_size"]), device)

    features = []
    timing = repeat(lambda: features.append(extract(predict, dataset)), repeats=cfg.repeats, warmup=1, barrier=sync)
    feature_mean = evaluate(features[-1], len(images), p["features"])
    return {
        "metrics": extraction_metrics(timing, len(images), p["batch_size"], p["image_size"], weights=weights,
                                      feature_mean=feature_mean),
        "timing": timing,
        "switches": {**switches, "xla": xla, "memory_format": "NCHW" if channels_first else "NHWC", "device": device,
                     "policy": tf.keras.mixed_precision.global_policy().name,
                     "tensor_float_32": tf.config.experimental.tensor_float_32_execution_enabled()},
    }
