"""JAX 0.10 + Flax NNX 0.12 · resnet50 · ResNet-50 (v1.5) written in NNX, cut after global average pooling: timed
feature extraction with one XLA-compiled forward pass per batch."""
import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from runners.jax import count_parameters, select_devices, set_precision
from shared import batching
from shared.datasets import random_images
from shared.runner import resolve_switches
from shared.timing import extraction_metrics, repeat

# ==== Config ====
# Image size, batch size and batch count come from shared/params.py (1,280 images of 224² in batches of 32 at full scale).
SWITCHES = {
    "jit": True,   # compile the forward pass into one XLA program (the warm-up pass absorbs the compile time)
}
# Layout: NHWC inside the model (XLA's preferred layout for cuDNN convolutions on tensor cores); the shared images are
# NCHW and the model's first op transposes them. Weights: Flax has no model zoo and this machine reaches no model hub,
# so the network is randomly initialized (record field `weights`); the timing does not depend on the values.


# ==== Data ====
def load_data(cfg):
    """Random images in host memory; every timed pass copies them to the device, as a feature extractor would."""
    p = cfg.params
    return random_images(p["batch_size"] * p["batches"], p["image_size"])


# ==== Model ====
class Bottleneck(nnx.Module):
    """1×1 reduce → 3×3 (stride here: ResNet v1.5, as torchvision) → 1×1 expand ×4, plus the (projected) shortcut."""

    def __init__(self, cin, width, stride, conv, norm):
        self.conv1, self.bn1 = conv(cin, width, 1), norm(width)
        self.conv2, self.bn2 = conv(width, width, 3, stride), norm(width)
        self.conv3, self.bn3 = conv(width, width * 4, 1), norm(width * 4)
        self.project = nnx.Sequential(conv(cin, width * 4, 1, stride), norm(width * 4)) if stride != 1 or cin != width * 4 else None

    def __call__(self, x):
        y = nnx.relu(self.bn1(self.conv1(x)))
        y = nnx.relu(self.bn2(self.conv2(y)))
        y = self.bn3(self.conv3(y))
        shortcut = x if self.project is None else self.project(x)
        return nnx.relu(y + shortcut)


class ResNet50(nnx.Module):
    def __init__(self, dtype=jnp.float32, *, rngs):
        # He initialization (fan_out, as torchvision); BatchNorm in inference mode with PyTorch's epsilon.
        he = nnx.initializers.variance_scaling(2.0, "fan_out", "normal")
        conv = lambda cin, cout, k, stride=1: nnx.Conv(cin, cout, (k, k), stride, padding=k // 2, use_bias=False,
                                                       kernel_init=he, dtype=dtype, rngs=rngs)
        norm = lambda c: nnx.BatchNorm(c, use_running_average=True, epsilon=1e-5, dtype=dtype, rngs=rngs)
        self.stem_conv, self.stem_bn = conv(3, 64, 7, 2), norm(64)
        blocks, cin = [], 64
        for width, depth, stride in ((64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)):
            for i in range(depth):
                blocks.append(Bottleneck(cin, width, stride if i == 0 else 1, conv, norm))
                cin = width * 4
        self.blocks = nnx.List(blocks)

    def __call__(self, x):                                                      # x: (N, 3, H, W)
        x = x.transpose(0, 2, 3, 1)                                             # -> NHWC
        x = nnx.relu(self.stem_bn(self.stem_conv(x)))                           # (N, H/2, W/2, 64)
        x = nnx.max_pool(x, (3, 3), (2, 2), padding=((1, 1), (1, 1)))           # (N, H/4, W/4, 64)
        for block in self.blocks:
            x = block(x)                                                        # ... (N, H/32, W/32, 2048)
        return x.mean(axis=(1, 2))                                              # global average pool: (N, 2048)


def build_model(cfg=None, dtype=jnp.float32, seed=0):
    return ResNet50(dtype=dtype, rngs=nnx.Rngs(seed)), "random"


# ==== Train step ====
# Feature extraction has no training step: the timed unit is one forward pass over all images (see `extract`).
def extract(forward, images, batch_size, device):
    features = []
    for idx in batching.eval_batches(len(images), batch_size):
        x = jax.device_put(images[idx[0]:idx[-1] + 1], device)                 # host → device: part of the timed work
        out = forward(x).astype(jnp.float32)
        out.copy_to_host_async()                                                # start device → host without waiting
        features.append(out)
    return jax.device_get(features)                                             # waits for the copies: the barrier


# ==== Evaluate ====
def evaluate(features, n, dims):
    """Sanity check of the output: one finite `dims`-d feature per image."""
    out = np.concatenate(features)
    assert out.shape == (n, dims) and np.isfinite(out).all(), out.shape
    return float(out.mean())


# ==== Main ====
def main(cfg):
    p, switches = cfg.params, resolve_switches(SWITCHES, cfg)
    device, = select_devices(cfg)
    dtype, _ = set_precision(cfg.precision, device)
    images = load_data(cfg)
    model, weights = build_model(dtype=dtype)
    graphdef, state = nnx.split(model)
    state = jax.device_put(state, device)

    def forward(state, x):
        return nnx.merge(graphdef, state)(x)
    forward = jax.jit(forward) if switches["jit"] else forward

    features = []
    timing = repeat(lambda: features.append(extract(lambda x: forward(state, x), images, p["batch_size"], device)),
                    repeats=cfg.repeats, warmup=1)
    feature_mean = evaluate(features[-1], len(images), p["features"])
    return {
        "metrics": extraction_metrics(timing, len(images), p["batch_size"], p["image_size"], weights=weights,
                                      feature_mean=feature_mean, parameters=count_parameters(model)),
        "timing": timing,
        "switches": {**switches, "memory_format": "NHWC", "compute_dtype": jnp.dtype(dtype).name,
                     "matmul_precision": jax.config.jax_default_matmul_precision, "device": str(device)},
    }
