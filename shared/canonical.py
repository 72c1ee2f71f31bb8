"""Canonical weights: one documented layout that every framework's four networks load (docs/design.md, "Equivalence").

Layout: conv kernels OIHW, dense (out, in), flatten order C·H·W; GRU gates stacked (r, z, n) along the first axis,
input and hidden biases kept apart (the cuDNN formulation: n = tanh(W_n x + b_in + r * (U_n h + b_hn))).
ResNet-50 (v1.5) and DenseNet-121 use torchvision's state_dict names and shapes (torchvision is what most model zoos
follow); every BatchNorm has `.weight` (γ), `.bias` (β), `.running_mean`, `.running_var` and ε = 1e-5. ResNet-50 stops
after global average pooling (no `fc`); DenseNet-121 ends in a 14-way `classifier`.
A runner converts from this layout to its framework's (e.g. Keras: kernels HWIO, dense (in, out), gates z, r, h).

`init_weights(task)` is the training start every framework shares, drawn once in NumPy (cnn, gru: Glorot uniform and
zero biases, Keras' GRU initializers; resnet50, densenet121: torchvision's initialization);
`load(root, task)` uses the ImageNet weights of the `weights` step (shared/weights.py) where they are under the data
root, else that seeded init, and says which.
"""

import json
from pathlib import Path
from typing import Dict, Tuple, Union

import numpy as np

from shared import params
from shared.datasets import file_digest

BN_ARRAYS = ("weight", "bias", "running_mean", "running_var")
BN_STATISTICS = ("running_mean", "running_var")  # buffers, not parameters: not counted, not trained
BN_EPS = 1e-5


def _bn(prefix, channels):
    return {f"{prefix}.{a}": (channels,) for a in BN_ARRAYS}


def _resnet50():
    shapes = {"conv1.weight": (64, 3, 7, 7), **_bn("bn1", 64)}
    cin = 64
    for stage, (width, blocks) in enumerate(((64, 3), (128, 4), (256, 6), (512, 3)), start=1):
        for i in range(blocks):
            p = f"layer{stage}.{i}"
            shapes.update(
                {
                    f"{p}.conv1.weight": (width, cin, 1, 1),
                    **_bn(f"{p}.bn1", width),
                    f"{p}.conv2.weight": (width, width, 3, 3),
                    **_bn(f"{p}.bn2", width),  # stride here (v1.5)
                    f"{p}.conv3.weight": (width * 4, width, 1, 1),
                    **_bn(f"{p}.bn3", width * 4),
                }
            )
            if i == 0:  # projection shortcut (stride 2 from layer2 on)
                shapes.update(
                    {f"{p}.downsample.0.weight": (width * 4, cin, 1, 1), **_bn(f"{p}.downsample.1", width * 4)}
                )
            cin = width * 4
    return shapes


def _densenet121(num_classes=14, growth=32, bn_size=4, blocks=(6, 12, 24, 16)):
    shapes = {"features.conv0.weight": (64, 3, 7, 7), **_bn("features.norm0", 64)}
    c = 64
    for b, layers in enumerate(blocks, start=1):
        for i in range(1, layers + 1):
            p = f"features.denseblock{b}.denselayer{i}"
            shapes.update(
                {
                    **_bn(f"{p}.norm1", c),
                    f"{p}.conv1.weight": (bn_size * growth, c, 1, 1),
                    **_bn(f"{p}.norm2", bn_size * growth),
                    f"{p}.conv2.weight": (growth, bn_size * growth, 3, 3),
                }
            )
            c += growth
        if b < len(blocks):
            p = f"features.transition{b}"
            shapes.update({**_bn(f"{p}.norm", c), f"{p}.conv.weight": (c // 2, c, 1, 1)})
            c //= 2
    shapes.update(
        {**_bn("features.norm5", c), "classifier.weight": (num_classes, c), "classifier.bias": (num_classes,)}
    )
    return shapes


SHAPES = {
    "cnn": {
        "conv1.weight": (50, 3, 3, 3),
        "conv1.bias": (50,),
        "conv2.weight": (50, 50, 3, 3),
        "conv2.bias": (50,),
        "conv3.weight": (100, 50, 3, 3),
        "conv3.bias": (100,),
        "conv4.weight": (100, 100, 3, 3),
        "conv4.bias": (100,),
        "fc1.weight": (512, 6400),
        "fc1.bias": (512,),
        "fc2.weight": (10, 512),
        "fc2.bias": (10,),
    },
    "gru": {
        "embedding.weight": (30_000, 125),
        "gru.weight_ih": (300, 125),
        "gru.weight_hh": (300, 100),  # rows: r, z, n — 100 each
        "gru.bias_ih": (300,),
        "gru.bias_hh": (300,),
        "fc.weight": (2, 100),
        "fc.bias": (2,),
    },
    "resnet50": _resnet50(),
    "densenet121": _densenet121(params.DENSENET121["num_classes"]),
}
HEADS = {"densenet121": ("classifier.weight", "classifier.bias")}  # new layers: never from ImageNet


def is_statistic(name: str) -> bool:
    return name.rsplit(".", 1)[-1] in BN_STATISTICS


def random_weights(task: str, seed: int = 0) -> Dict[str, np.ndarray]:
    """Random float32 weights in the canonical layout, for the equivalence test: every array random (BatchNorm
    statistics too, variances positive), scaled so activations stay in a sensible range through 121 layers."""
    rng = np.random.default_rng(seed)
    out = {}
    for name, shape in SHAPES[task].items():
        kind = name.rsplit(".", 1)[-1]
        if kind == "running_var":
            out[name] = rng.uniform(0.5, 1.5, shape).astype(np.float32)
            continue
        if kind == "weight" and len(shape) == 1:  # BatchNorm γ
            out[name] = rng.uniform(0.8, 1.2, shape).astype(np.float32)
            continue
        fan_in = int(np.prod(shape[1:])) if len(shape) > 1 else 1
        if name == "embedding.weight":
            scale = 0.5
        elif len(shape) == 4:
            scale = np.sqrt(2.0 / fan_in)  # He: keeps ReLU nets' activations O(1)
        else:
            scale = 1.0 / np.sqrt(fan_in) if len(shape) > 1 else 0.1
        out[name] = (rng.standard_normal(shape) * scale).astype(np.float32)
    return out


def glorot_uniform(rng: "np.random.Generator", shape: Tuple[int, ...]) -> np.ndarray:
    """U(±√(6 / (fan_in + fan_out))) for a canonical (out, in[, kh, kw]) array: Keras' default kernel init (lesson 7),
    the receptive field counted in both fans as Keras, PyTorch's xavier_uniform_ and Chainer count it."""
    window = int(np.prod(shape[2:]))
    bound = np.sqrt(6.0 / ((shape[0] + shape[1]) * window))
    return rng.uniform(-bound, bound, shape).astype(np.float32)


def orthogonal(rng: "np.random.Generator", shape: Tuple[int, ...]) -> np.ndarray:
    """Keras' Orthogonal (gain 1) for a (rows, cols) array, rows ≥ cols: orthonormal columns, Q of a Gaussian's QR with
    the signs of R's diagonal folded in (so the draw is uniform over orthogonal matrices, Saxe et al. 2014)."""
    q, r = np.linalg.qr(rng.standard_normal(shape))
    return (q * np.sign(np.diag(r))).astype(np.float32)


def _seed_init(task, rng):
    """cnn and gru: the seed's initialization (lesson 7: Glorot uniform, zero biases), in Keras' form, which every
    runner of the seed's era copied. The GRU: embedding U(±0.05); the stacked (r, z, n) input kernel (3H, E) Glorot
    over the whole matrix; the stacked recurrent kernel (3H, H) orthogonal (orthonormal columns: Keras' orthogonal
    (H, 3H) kernel, transposed); the dense layer Glorot; all biases zero."""
    out = {}
    for name, shape in SHAPES[task].items():
        if name == "embedding.weight":
            out[name] = rng.uniform(-0.05, 0.05, shape).astype(np.float32)
        elif name == "gru.weight_hh":
            out[name] = orthogonal(rng, shape)
        elif len(shape) > 1:
            out[name] = glorot_uniform(rng, shape)
        else:
            out[name] = np.zeros(shape, np.float32)
    return out


def init_weights(task: str, seed: int = params.SEED) -> Dict[str, np.ndarray]:
    """The shared training start, drawn once in NumPy so every framework starts from the same numbers (the record
    says `init: canonical`). cnn and gru: Glorot uniform with zero biases (_seed_init). resnet50 and densenet121
    without ImageNet weights: torchvision's initialization (He-normal convs — fan_out for ResNet, fan_in for
    DenseNet —, BatchNorm γ=1 β=0 with fresh statistics, the classifier U(±1/√in) with zero bias)."""
    rng = np.random.default_rng(seed)
    if task in ("cnn", "gru"):
        return _seed_init(task, rng)
    out = {}
    for name, shape in SHAPES[task].items():
        kind = name.rsplit(".", 1)[-1]
        if len(shape) == 4:
            fan = shape[0] * shape[2] * shape[3] if task == "resnet50" else int(np.prod(shape[1:]))
            out[name] = (rng.standard_normal(shape) * np.sqrt(2.0 / fan)).astype(np.float32)
        elif len(shape) == 2:
            bound = 1 / np.sqrt(shape[1])
            out[name] = rng.uniform(-bound, bound, shape).astype(np.float32)
        elif kind in ("weight", "running_var"):
            out[name] = np.ones(shape, np.float32)
        else:  # BatchNorm β, running mean, dense bias
            out[name] = np.zeros(shape, np.float32)
    return out


def weights_path(root: Union[str, Path], task: str) -> Path:
    """Where the `weights` step stores a task's ImageNet weights in the canonical layout."""
    return Path(root) / "weights" / f"{task}.npz"


def check_digest(root: Union[str, Path], task: str, path: Union[str, Path]) -> None:
    """The npz is the one `python -m shared.weights` wrote: its SHA-256 as the manifest recorded it (where the manifest
    records one: files converted before it did are taken on their shapes alone). ValueError with the fix otherwise."""
    try:
        with open(Path(root) / "weights" / "manifest.json") as f:
            expected = json.load(f)["tasks"][task].get("npz_sha256")
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        expected = None
    if expected:
        digest = file_digest(path, "sha256")
        if digest != expected:
            raise ValueError(
                f"{path}: SHA-256 {digest}, not the {expected} its manifest recorded when it "
                f"was converted (changed since); rebuild it with `python -m shared.weights --root {root}`"
            )


def load(root: Union[str, Path], task: str, seed: int = params.SEED) -> Tuple[Dict[str, np.ndarray], str]:
    """(weights, source) for resnet50 / densenet121: ImageNet weights from the data root ('imagenet') with any new head
    from the seeded init, else the seeded init alone ('random'). Shapes are checked: a wrong file is an error."""
    weights = init_weights(task, seed)
    path = weights_path(root, task)
    if not path.exists():
        return weights, "random"
    check_digest(root, task, path)
    with np.load(path) as stored:
        for name in SHAPES[task]:
            if name in HEADS.get(task, ()):
                continue
            if name not in stored or stored[name].shape != SHAPES[task][name]:
                raise ValueError(
                    f"{path}: {name} missing or of the wrong shape; rebuild it with "
                    f"`python -m shared.weights --root {root}`"
                )
            weights[name] = stored[name].astype(np.float32)
    return weights, "imagenet"


def count(task: str) -> int:
    """Trainable parameters (BatchNorm running statistics excluded, as every framework counts them)."""
    return sum(int(np.prod(s)) for name, s in SHAPES[task].items() if not is_statistic(name))
