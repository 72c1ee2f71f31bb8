"""JAX 0.10 + Flax NNX 0.12 · resnet50 · ResNet-50 (v1.5) written in NNX, cut after global average pooling: timed
feature extraction with one XLA-compiled forward pass per batch."""

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from runners.jax import count_parameters, load_torchvision_names, select_devices, set_precision
from shared import batching, canonical
from shared.datasets import random_images
from shared.runner import resolve_switches
from shared.timing import extraction_metrics, repeat

# ==== Config ====
# Image size, batch size and batch count: shared/params.py (1,280 images of 224² in batches of 32 at full scale).
SWITCHES = {
    "jit": True,  # compile the forward pass into one XLA program (the warm-up pass absorbs the compile time)
}
# Layout: NHWC inside the model (XLA's preferred layout for cuDNN convolutions on tensor cores); the shared images are
# NCHW and the model's first op transposes them. Weights: Flax has no model zoo, so the network is written here with
# torchvision's module names and loads the canonical weights (ImageNet from the `weights` step, else the shared seeded
# init; record field `weights`). Data placement is "host" by the nature of the task: every timed pass copies each batch
# in and its features back out, as a feature extractor in production would.


# ==== Data ====
def load_data(cfg):
    """Random images in host memory; every timed pass copies them to the device, as a feature extractor would."""
    p = cfg.params
    return random_images(p["batch_size"] * p["batches"], p["image_size"])


# ==== Model ====
# Module and attribute names are torchvision's (conv1, bn1, layer1…layer4, downsample), so that canonical weights load
# by name; torchvision's paddings too: explicit and symmetric (XLA's "SAME" would pad 7×7/2 and 3×3/2 asymmetrically).
class Bottleneck(nnx.Module):
    """1×1 reduce → 3×3 (stride here: ResNet v1.5, as torchvision) → 1×1 expand ×4, plus the (projected) shortcut."""

    def __init__(self, cin, width, stride, conv, norm):
        self.conv1, self.bn1 = conv(cin, width, 1), norm(width)
        self.conv2, self.bn2 = conv(width, width, 3, stride), norm(width)
        self.conv3, self.bn3 = conv(width, width * 4, 1), norm(width * 4)
        projects = stride != 1 or cin != width * 4
        self.downsample = nnx.List([conv(cin, width * 4, 1, stride), norm(width * 4)]) if projects else None

    def __call__(self, x):
        y = nnx.relu(self.bn1(self.conv1(x)))
        y = nnx.relu(self.bn2(self.conv2(y)))
        y = self.bn3(self.conv3(y))
        if self.downsample is None:
            return nnx.relu(y + x)
        conv, bn = self.downsample
        return nnx.relu(y + bn(conv(x)))


# rosetta: model
class ResNet50(nnx.Module):
    def __init__(self, dtype=jnp.float32, *, rngs):
        # BatchNorm in inference mode (running statistics) with PyTorch's epsilon; the initializers only fill the
        # arrays until main loads the canonical weights.
        conv = lambda cin, cout, k, stride=1: nnx.Conv(
            cin, cout, (k, k), stride, padding=k // 2, use_bias=False, dtype=dtype, rngs=rngs
        )
        norm = lambda c: nnx.BatchNorm(c, use_running_average=True, epsilon=1e-5, dtype=dtype, rngs=rngs)
        self.conv1, self.bn1 = conv(3, 64, 7, 2), norm(64)
        stages, cin = [], 64
        for width, depth, stride in ((64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)):
            blocks = []
            for i in range(depth):
                blocks.append(Bottleneck(cin, width, stride if i == 0 else 1, conv, norm))
                cin = width * 4
            stages.append(nnx.List(blocks))
        self.layer1, self.layer2, self.layer3, self.layer4 = stages

    # rosetta: model
    def __call__(self, x):  # x: (N, 3, H, W)
        x = x.transpose(0, 2, 3, 1)  # -> NHWC
        x = nnx.relu(self.bn1(self.conv1(x)))  # (N, H/2, W/2, 64)
        x = nnx.max_pool(x, (3, 3), (2, 2), padding=((1, 1), (1, 1)))  # (N, H/4, W/4, 64)
        for stage in (self.layer1, self.layer2, self.layer3, self.layer4):
            for block in stage:
                x = block(x)  # ... (N, H/32, W/32, 2048)
        return x.mean(axis=(1, 2))  # global average pool: (N, 2048)


def build_model(cfg=None, dtype=jnp.float32, seed=0):
    return ResNet50(dtype=dtype, rngs=nnx.Rngs(seed))


def load_canonical(model, weights):
    """Canonical names are torchvision's, and so are our attribute paths; kernels go OIHW -> HWIO on the way."""
    load_torchvision_names(model, weights)


@nnx.jit
def forward(model, x):
    return model(x)


def predict_logits(model, x):
    """Pooled features (N, 2048); this model's BatchNorm always uses its running statistics."""
    return np.asarray(forward(model, jnp.asarray(x)), np.float32)


# ==== Train step ====
# rosetta: inference
# Feature extraction has no training step: the timed unit is one forward pass over all images (see `extract`).
def extract(forward, images, batch_size, device):
    features = []
    for idx in batching.eval_batches(len(images), batch_size):
        x = jax.device_put(images[idx[0] : idx[-1] + 1], device)  # host → device: part of the timed work
        out = forward(x).astype(jnp.float32)
        out.copy_to_host_async()  # start device → host without waiting
        features.append(out)
    # rosetta: barrier
    return jax.device_get(features)  # waits for the copies: the barrier


# ==== Evaluate ====
def evaluate(features, n, dims):
    """Sanity check of the output: one finite `dims`-d feature per image."""
    out = np.concatenate(features)
    assert out.shape == (n, dims) and np.isfinite(out).all(), out.shape
    return float(out.mean())


# ==== Main ====
def main(cfg):
    p, switches = cfg.params, resolve_switches(SWITCHES, cfg)
    (device,) = select_devices(cfg)
    dtype, _ = set_precision(cfg.precision, device)
    images = load_data(cfg)
    model = nnx.eval_shape(lambda: build_model(dtype=dtype))  # shapes only: no initializer runs (or compiles)
    # rosetta: init
    weights, source = canonical.load(cfg.data, "resnet50")  # ImageNet from the `weights` step, else seeded random
    load_canonical(model, weights)
    # rosetta: end
    graphdef, state = nnx.split(model)
    state = jax.device_put(state, device)

    def apply(state, x):
        return nnx.merge(graphdef, state)(x)

    apply = jax.jit(apply) if switches["jit"] else apply

    features = []
    timing = repeat(
        lambda: features.append(extract(lambda x: apply(state, x), images, p["batch_size"], device)),
        repeats=cfg.repeats,
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
            "memory_format": "NHWC",
            "compute_dtype": jnp.dtype(dtype).name,
            "matmul_precision": jax.config.jax_default_matmul_precision,
            "device": str(device),
        },
    }
