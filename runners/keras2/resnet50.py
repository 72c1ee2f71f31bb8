"""Keras 2.3 (CNTK 2.7 backend) · resnet50 · ResNet-50 v1.5 (torchvision's definition) in Keras 2's functional API,
channels_first, cut after global average pooling: timed feature extraction with `model.predict`."""

import keras
import numpy as np
from keras import layers

from runners.keras2 import check_device, check_precision, count_parameters, keras_kernel, nchw_to
from shared import canonical
from shared.datasets import random_images
from shared.runner import resolve_switches
from shared.timing import extraction_metrics, repeat

# ==== Config ====
# Image size, batch size and batch count: shared/params.py (1,280 images of 224² in batches of 32 at full scale).
SWITCHES = {
    "data_format": "channels_first",  # NCHW, CNTK's native layout and cuDNN's classic one (lesson 2)
    "inference_graph": True,  # K.set_learning_phase(0) before building: the graph holds BatchNorm's inference
    # branch only; with the dynamic learning phase CNTK computes the batch-statistics
    # branch too and discards it (element_select), ~1.5x slower here
}
# Not keras.applications.ResNet50: in Keras 2.3 that is ResNet v1 (stride on the first 1×1 conv of a block, conv
# biases, BatchNorm ε 1.001e-5), another network. Weights: the canonical ones (ImageNet from the `weights` step, else
# the shared seeded init; record field `weights`). Data placement is "host" (the only choice with `predict`): the
# images sit in host memory and every timed pass copies each batch in and its features back out.
BN = {"epsilon": 1e-5, "momentum": 0.9}  # torchvision's BatchNorm: ε 1e-5, running statistics updated by 0.1


# ==== Data ====
def load_data(cfg, data_format):
    """Random images in host memory, in the model's layout; every timed pass copies them to the device."""
    p = cfg.params
    return nchw_to(random_images(p["batch_size"] * p["batches"], p["image_size"]), data_format)


# ==== Model ====
def build_model(cfg=None, data_format="channels_first", image_size=None):
    """torchvision's ResNet-50 v1.5 up to global average pooling: (N, 3, H, W) → (N, 2048), for images of
    `image_size`² (None: any size). Layer names are torchvision's module paths with "_" for ".": `layer2_0_conv2`
    holds `layer2.0.conv2.weight`.

    Convolutions have no bias (BatchNorm follows each) and pad k // 2 zeros on every side, as torchvision's. On CNTK,
    Keras' "same" is CNTK's centred auto-padding, which is exactly that for these odd kernels at strides 1 and 2 (the
    equivalence test checks it; at 224² the features equal the explicitly padded model's bit for bit) and adds
    no layer, where a ZeroPadding2D layer copies the map before each conv: with them a demo pass took 1.5× as long on
    a quiet CPU, 2-3× on a busy one. Explicit zeros stay where "same" is another padding or is refused: on other
    backends (TensorFlow's "same" pads a stride-2 conv on the bottom/right only; Keras 2 on Theano has no resnet50
    cell to check it), and on CNTK in the last stage when its maps may be smaller than the 3×3 kernel (images under
    96², or any size: CNTK refuses "same" there, "kernel dim 3 <= input dim 2"), as runners/cntk/resnet50.py does.
    The max pool's padding equals torchvision's -∞ padding because it follows a ReLU.
    """
    keras.backend.set_image_data_format(data_format)  # every layer below follows it
    axis = 1 if data_format == "channels_first" else -1
    explicit = keras.backend.backend() != "cntk"
    small = image_size is None or image_size < 32 * 3  # the last stage's maps are H/32

    # rosetta: model
    def conv_bn(x, filters, kernel, stride, name, bn_name, relu=True, pad=explicit):
        if pad and kernel > 1:
            x = layers.ZeroPadding2D(kernel // 2)(x)
        x = layers.Conv2D(
            filters, kernel, strides=stride, padding="valid" if pad else "same", use_bias=False, name=name
        )(x)
        x = layers.BatchNormalization(axis=axis, name=bn_name, **BN)(x)
        return layers.Activation("relu")(x) if relu else x

    # rosetta: model
    def bottleneck(x, width, stride, name, pad):
        y = conv_bn(x, width, 1, 1, f"{name}_conv1", f"{name}_bn1")
        y = conv_bn(y, width, 3, stride, f"{name}_conv2", f"{name}_bn2", pad=pad)  # v1.5: the stride is here
        y = conv_bn(y, 4 * width, 1, 1, f"{name}_conv3", f"{name}_bn3", relu=False)
        if stride != 1 or keras.backend.int_shape(x)[axis] != 4 * width:  # projection shortcut
            x = conv_bn(x, 4 * width, 1, stride, f"{name}_downsample_0", f"{name}_downsample_1", relu=False)
        return layers.Activation("relu")(layers.add([y, x]))

    # rosetta: model
    inputs = layers.Input((3, None, None) if axis == 1 else (None, None, 3))
    x = conv_bn(inputs, 64, 7, 2, "conv1", "bn1")  # (N, 64, H/2, W/2)
    if explicit:
        x = layers.ZeroPadding2D(1)(x)
    x = layers.MaxPooling2D(3, strides=2, padding="valid" if explicit else "same")(x)  # (N, 64, H/4, W/4)
    for stage, (width, blocks) in enumerate(((64, 3), (128, 4), (256, 6), (512, 3)), start=1):
        for i in range(blocks):
            x = bottleneck(
                x, width, 2 if stage > 1 and i == 0 else 1, f"layer{stage}_{i}", pad=explicit or (small and stage == 4)
            )
    features = layers.GlobalAveragePooling2D()(x)  # (N, 2048)
    return keras.models.Model(inputs, features, name="resnet50_v1_5")


def load_canonical(model, weights):
    """Canonical → Keras, layer by layer: conv OIHW → HWIO, BatchNorm (weight, bias, running_mean, running_var) →
    (γ, β, moving_mean, moving_variance). Every layer with weights must be set."""
    modules = {}
    for name, value in weights.items():
        module, array = name.rsplit(".", 1)
        modules.setdefault(module.replace(".", "_"), {})[array] = np.asarray(value, np.float32)
    for layer_name, a in modules.items():
        layer = model.get_layer(layer_name)
        if "running_mean" in a:
            layer.set_weights([a["weight"], a["bias"], a["running_mean"], a["running_var"]])
        else:
            layer.set_weights([keras_kernel(a["weight"])])
    unset = {layer.name for layer in model.layers if layer.weights} - set(modules)
    assert not unset, f"layers without canonical weights: {sorted(unset)[:5]}"


def predict_logits(model, x):
    """Pooled features (N, 2048) in inference mode (learning phase 0: BatchNorm on its moving statistics)."""
    x = nchw_to(np.asarray(x, np.float32), model.get_layer("conv1").data_format)
    return model.predict(x, batch_size=len(x))


# ==== Train step ====
# rosetta: inference
# Feature extraction has no training step: the timed unit is one `predict` over all images (see `extract`), which
# includes the host→device copies of the batches and the device→host copy of the features.
def extract(model, images, batch_size):
    return model.predict(images, batch_size=batch_size)


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
    check_precision(cfg.precision)
    images = load_data(cfg, switches["data_format"])
    if switches["inference_graph"]:
        keras.backend.set_learning_phase(0)  # a feature extractor never trains (Keras 2's idiom)
    model = build_model(data_format=switches["data_format"], image_size=p["image_size"])
    # rosetta: init
    weights, source = canonical.load(cfg.data, "resnet50")  # ImageNet from the `weights` step, else seeded random
    load_canonical(model, weights)

    features = []
    # rosetta: barrier
    # predict() returns numpy, so each pass ends with the features on the host: that is the barrier. The warm-up pass
    # builds the predict function (CNTK's graph) once.
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
            "image_data_format": keras.backend.image_data_format(),
            "learning_phase": keras.backend.learning_phase() if switches["inference_graph"] else "dynamic",
            "backend": keras.backend.backend(),
            "floatx": keras.backend.floatx(),
        },
    }
