"""ResNet-50 v1.5 and DenseNet-121 as Keras 3 models, for the Keras runners and the TensorFlow runners alike (TF 2's
layer API is Keras 3): the canonical networks of shared/canonical.py (torchvision's definitions) and their loader.

ResNet-50: keras.applications.ResNet50 is ResNet v1 (stride on the first 1×1 conv of a block, conv biases, BatchNorm
ε 1.001e-5), a different network from torchvision's v1.5, so it is written here in Keras' functional idiom. Its layer
names are torchvision's module paths with "_" for "." (Keras' torch backend refuses dots): `layer2_0_conv2` holds
`layer2.0.conv2.weight`.
DenseNet-121: keras.applications.DenseNet121 is torchvision's network but for its BatchNorm (ε 1.001e-5, momentum
0.99); the zoo model is used with every BatchNorm set to torchvision's ε 1e-5 and momentum 0.1 (Keras: 0.9), and
`densenet_layer` maps the canonical names onto the zoo's layer names.
"""

import re

import keras
import numpy as np
from keras import layers

from runners.keras import nchw_to

BN = {"epsilon": 1e-5, "momentum": 0.9}  # torchvision's BatchNorm: ε 1e-5, running statistics updated by 0.1


# ==== ResNet-50 v1.5 ====
def resnet50(data_format="channels_last"):
    """torchvision's ResNet-50 v1.5 up to global average pooling: (N, H, W, 3) or (N, 3, H, W) of any size → (N, 2048).

    Convolutions have no bias (BatchNorm follows each). torchvision pads k×k convolutions by k // 2 on every side;
    Keras' "same" pads a stride-2 convolution on the bottom/right only, so padding is explicit. The max pool's zero
    padding equals torchvision's -∞ padding because it follows a ReLU.
    """
    axis = 1 if data_format == "channels_first" else -1

    def conv_bn(x, filters, kernel, stride, name, bn_name, relu=True):
        if kernel > 1:
            x = layers.ZeroPadding2D(kernel // 2, data_format=data_format)(x)
        x = layers.Conv2D(filters, kernel, stride, use_bias=False, data_format=data_format, name=name)(x)
        x = layers.BatchNormalization(axis, name=bn_name, **BN)(x)
        return layers.ReLU()(x) if relu else x

    def bottleneck(x, width, stride, name):
        y = conv_bn(x, width, 1, 1, f"{name}_conv1", f"{name}_bn1")
        y = conv_bn(y, width, 3, stride, f"{name}_conv2", f"{name}_bn2")  # v1.5: the stride is here
        y = conv_bn(y, 4 * width, 1, 1, f"{name}_conv3", f"{name}_bn3", relu=False)
        if stride != 1 or x.shape[axis] != 4 * width:  # projection shortcut
            x = conv_bn(x, 4 * width, 1, stride, f"{name}_downsample_0", f"{name}_downsample_1", relu=False)
        return layers.ReLU()(layers.Add()([y, x]))

    inputs = keras.Input((3, None, None) if axis == 1 else (None, None, 3))
    x = conv_bn(inputs, 64, 7, 2, "conv1", "bn1")  # (N, H/2, W/2, 64)
    x = layers.ZeroPadding2D(1, data_format=data_format)(x)
    x = layers.MaxPooling2D(3, 2, data_format=data_format)(x)  # (N, H/4, W/4, 64)
    for stage, (width, blocks) in enumerate(((64, 3), (128, 4), (256, 6), (512, 3)), start=1):
        for i in range(blocks):
            x = bottleneck(x, width, 2 if stage > 1 and i == 0 else 1, f"layer{stage}_{i}")
    features = layers.GlobalAveragePooling2D(data_format, dtype="float32")(x)  # float32 under mixed precision
    return keras.Model(inputs, features, name="resnet50_v1_5")


def resnet_layer(module):
    """Canonical module path → layer name: `layer1.0.downsample.1` → `layer1_0_downsample_1`."""
    return module.replace(".", "_")


# ==== DenseNet-121 ====
def densenet121(num_classes=14):
    """keras.applications.DenseNet121 (channels_last only) with torchvision's BatchNorm and a new `num_classes` head
    of logits, on (N, H, W, 3) of any size. The zoo's stem pads the 7×7/2 conv by 3 and the 3×3/2 max pool by 1
    explicitly, as torchvision does; its transitions average-pool 2×2/2, its dense layers pad their 3×3 convs by 1."""
    base = keras.applications.DenseNet121(include_top=False, weights=None, input_shape=(None, None, 3), pooling="avg")
    for layer in base.layers:
        if isinstance(layer, layers.BatchNormalization):
            layer.epsilon, layer.momentum = BN["epsilon"], BN["momentum"]  # read at every call
    logits = layers.Dense(num_classes, dtype="float32", name="classifier")(base.output)  # float32 under mixed policy
    return keras.Model(base.input, logits, name="densenet121")


def densenet_layer(module):
    """Canonical (torchvision) module path → the zoo's layer name, e.g. features.denseblock1.denselayer2.norm1 →
    conv2_block2_0_bn (the zoo numbers the stem conv1 and dense block b conv{b+1})."""
    m = re.fullmatch(r"features\.denseblock(\d)\.denselayer(\d+)\.(norm1|conv1|norm2|conv2)", module)
    if m:
        part = {"norm1": "0_bn", "conv1": "1_conv", "norm2": "1_bn", "conv2": "2_conv"}[m[3]]
        return f"conv{int(m[1]) + 1}_block{m[2]}_{part}"
    m = re.fullmatch(r"features\.transition(\d)\.(norm|conv)", module)
    if m:
        return f"pool{int(m[1]) + 1}_{'bn' if m[2] == 'norm' else 'conv'}"
    return {"features.conv0": "conv1_conv", "features.norm0": "conv1_bn", "features.norm5": "bn"}.get(module, module)


# ==== Canonical weights ====
def load_canonical(model, weights):
    """Canonical → Keras, layer by layer: conv OIHW → HWIO, dense (out, in) → (in, out), BatchNorm (weight, bias,
    running_mean, running_var) → (γ, β, moving_mean, moving_variance). Every layer with weights must be set."""
    layer_name = densenet_layer if model.name == "densenet121" else resnet_layer
    modules = {}
    for name, value in weights.items():
        module, array = name.rsplit(".", 1)
        modules.setdefault(module, {})[array] = np.asarray(value, np.float32)
    for module, a in modules.items():
        layer = model.get_layer(layer_name(module))
        if "running_mean" in a:
            layer.set_weights([a["weight"], a["bias"], a["running_mean"], a["running_var"]])
        elif a["weight"].ndim == 4:
            layer.set_weights([a["weight"].transpose(2, 3, 1, 0), *([a["bias"]] if "bias" in a else [])])
        else:
            layer.set_weights([a["weight"].T, a["bias"]])
    unset = {layer.name for layer in model.layers if layer.weights} - {layer_name(m) for m in modules}
    assert not unset, f"layers without canonical weights: {sorted(unset)[:5]}"


def predict_logits(model, x):
    """Inference mode (BatchNorm on its running statistics) on NCHW float32 `x`: ResNet-50's (N, 2048) features or
    DenseNet-121's (N, classes) logits, as numpy."""
    data_format = model.get_layer("conv1").data_format if model.name == "resnet50_v1_5" else "channels_last"
    return keras.ops.convert_to_numpy(model(nchw_to(np.asarray(x, np.float32), data_format), training=False))
