"""Chainer 7.8 · resnet50 · ResNet-50 v1.5 written as a `chainer.Chain`, cut after global average pooling: timed
feature extraction."""

import chainer
import chainer.functions as F
import chainer.links as L
import numpy as np

from runners.chainer import count_parameters, load_torchvision_names, select_device, set_precision, sync
from shared import batching, canonical
from shared.datasets import random_images
from shared.runner import resolve_switches
from shared.timing import extraction_metrics, repeat

# ==== Config ====
# Image size, batch size and batch count: shared/params.py (1,280 images of 224² in batches of 32 at full scale).
SWITCHES = {
    "autotune": True,  # fixed input shape: cuDNN benchmarks its conv algorithms once, during the warm-up pass
    "type_check": False,  # skip Chainer's per-call shape/dtype checks: pure Python overhead on every function call
}
# Layout: NCHW (Chainer's only layout). Weights: Chainer's own L.ResNet50Layers is the Caffe model, ResNet v1 (the
# stride on the first 1×1 conv, conv biases, BatchNorm ε 2e-5), which is not the canonical network; so ResNet-50 v1.5
# is written here with torchvision's module names and loads the canonical weights (ImageNet from the `weights` step,
# else the shared seeded init; record field `weights`). Data placement is "host" by the nature of the task: every timed
# pass sends each batch to the device and its features back, as a feature extractor in production would.


# ==== Data ====
def load_data(cfg):
    """Random images in host memory; every timed pass copies them to the device, as a feature extractor would."""
    p = cfg.params
    return random_images(p["batch_size"] * p["batches"], p["image_size"])


# ==== Model ====
# Link names are torchvision's (conv1, bn1, layer1…layer4, downsample), so canonical weights load by name; chainer.
# Sequential plays nn.Sequential's part. Convolutions have no bias and symmetric padding (k // 2), as torchvision's.
def conv(cin, cout, k, stride=1):
    return L.Convolution2D(cin, cout, k, stride, k // 2, nobias=True)


def norm(channels):
    return L.BatchNormalization(channels, eps=1e-5)  # torchvision's ε (Chainer's default is 2e-5)


class Bottleneck(chainer.Chain):
    """1×1 reduce → 3×3 (stride here: ResNet v1.5, as torchvision) → 1×1 expand ×4, plus the (projected) shortcut."""

    def __init__(self, cin, width, stride):
        super().__init__()
        with self.init_scope():
            self.conv1, self.bn1 = conv(cin, width, 1), norm(width)
            self.conv2, self.bn2 = conv(width, width, 3, stride), norm(width)
            self.conv3, self.bn3 = conv(width, width * 4, 1), norm(width * 4)
            if stride != 1 or cin != width * 4:
                self.downsample = chainer.Sequential(conv(cin, width * 4, 1, stride), norm(width * 4))
            else:
                self.downsample = None

    def forward(self, x):
        h = F.relu(self.bn1(self.conv1(x)))
        h = F.relu(self.bn2(self.conv2(h)))
        h = self.bn3(self.conv3(h))
        return F.relu(h + (x if self.downsample is None else self.downsample(x)))


# rosetta: model
class ResNet50(chainer.Chain):
    def __init__(self):
        super().__init__()
        with self.init_scope():
            self.conv1, self.bn1 = conv(3, 64, 7, 2), norm(64)
            cin = 64
            for name, width, depth, stride in (
                ("layer1", 64, 3, 1),
                ("layer2", 128, 4, 2),
                ("layer3", 256, 6, 2),
                ("layer4", 512, 3, 2),
            ):
                blocks = []
                for i in range(depth):
                    blocks.append(Bottleneck(cin, width, stride if i == 0 else 1))
                    cin = width * 4
                setattr(self, name, chainer.Sequential(*blocks))

    # rosetta: model
    def forward(self, x):  # x: (N, 3, H, W)
        h = F.relu(self.bn1(self.conv1(x)))  # (N, 64, H/2, W/2)
        h = F.max_pooling_2d(h, 3, 2, 1, cover_all=False)  # (N, 64, H/4, W/4), torchvision's floor
        for stage in (self.layer1, self.layer2, self.layer3, self.layer4):
            h = stage(h)  # ... (N, 2048, H/32, W/32)
        return F.mean(h, axis=(2, 3))  # global average pool: (N, 2048)


def build_model(cfg=None):
    return ResNet50()


def load_canonical(model, weights):
    """Canonical names are torchvision's, and so are our link paths; OIHW kernels are Chainer's layout too."""
    load_torchvision_names(model, weights)


def predict_logits(model, x):
    """Pooled features (N, 2048) in inference mode: BatchNorm uses its running statistics."""
    with chainer.using_config("train", False), chainer.using_config("enable_backprop", False):
        return model(np.asarray(x, np.float32)).array


# ==== Train step ====
# rosetta: inference
# Feature extraction has no training step: the timed unit is one forward pass over all images (see `extract`).
def extract(model, images, batch_size, device):
    features = []
    with chainer.using_config("train", False), chainer.using_config("enable_backprop", False):
        for idx in batching.eval_batches(len(images), batch_size):
            x = device.send(images[idx[0] : idx[-1] + 1].astype(chainer.get_dtype()))  # host → device: timed work
            features.append(chainer.backends.cuda.to_cpu(model(x).array))  # back to host: timed work too
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
    device = select_device(cfg)
    mixed16 = set_precision(cfg.precision, device)
    chainer.global_config.autotune = switches["autotune"]
    chainer.global_config.type_check = switches["type_check"]
    images = load_data(cfg)
    model = build_model()  # float16 conv kernels under mixed16, float32 BatchNorm
    # rosetta: init
    weights, source = canonical.load(cfg.data, "resnet50")  # ImageNet from the `weights` step, else seeded random
    load_canonical(model, weights)
    model.to_device(device)

    features = []
    timing = repeat(
        lambda: features.append(extract(model, images, p["batch_size"], device)),
        repeats=cfg.repeats,
        barrier=sync(device),
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
            parameters=count_parameters(model),
            data_placement="host",
            differences=[],
        ),
        "timing": timing,
        "switches": {
            **switches,
            "memory_format": "NCHW",
            "dtype": "mixed16" if mixed16 else "float32",
            "device": str(device),
        },
    }
