"""PaddlePaddle 3.3 · resnet50 · paddle.vision's ResNet-50 v1.5 without its classifier: timed feature extraction."""

import numpy as np
import paddle

from runners.paddle import count_parameters, load_state, select_device, set_precision, sync
from shared import batching, canonical
from shared.datasets import random_images
from shared.runner import resolve_switches
from shared.timing import extraction_metrics, repeat

# ==== Config ====
# Image size, batch size and batch count: shared/params.py (1,280 images of 224² in batches of 32 at full scale).
SWITCHES = {
    "to_static": False,  # paddle.jit.to_static on the model; the warm-up pass absorbs the conversion
}
TUNED = {  # tuning=tuned: Paddle's own documented fast path (docs/tuned.md), same work
    "to_static": True,  # the network as one static program run by Paddle's executor (no per-op Python dispatch)
}
# Data placement is "host" by the nature of the task (and shared.params.DATA_PLACEMENT): the images sit in host memory
# and every timed pass copies each batch in and its features back out, as a feature extractor in production would.


# ==== Data ====
def load_data(cfg):
    """Random images in host memory (NumPy); every timed pass makes each batch a tensor on the current place."""
    p = cfg.params
    return random_images(p["batch_size"] * p["batches"], p["image_size"])


# ==== Model ====
# rosetta: model
def build_model(cfg=None):
    """paddle.vision's ResNet-50 (v1.5: the stride on the 3×3 convolution) with num_classes=0: no classifier, its
    output the globally pooled (N, 2048, 1, 1) map. Its initialization does not matter: main loads the canonical
    weights (ImageNet or the shared seeded init)."""
    return paddle.vision.models.resnet50(num_classes=0)


def load_canonical(model, weights):
    """paddle.vision's ResNet names are torchvision's (conv1, layer1.0.downsample.1, …); only BatchNorm's statistics
    are spelled `_mean` and `_variance`."""
    load_state(model, weights)


def predict_logits(model, x):
    """Pooled features (N, 2048) in inference mode: BatchNorm uses its running statistics."""
    model.eval()
    with paddle.no_grad():
        return paddle.flatten(model(paddle.to_tensor(x)), 1).numpy()


# ==== Train step ====
# Feature extraction has no training step: the timed unit is one forward pass over all images (see `extract`).
# rosetta: inference
def extract(model, images, batch_size, autocast):
    features = []
    with paddle.no_grad(), autocast():
        for idx in batching.eval_batches(len(images), batch_size):
            x = paddle.to_tensor(images[idx[0] : idx[-1] + 1])  # to the current place: part of the timed work
            features.append(paddle.flatten(model(x), 1).astype("float32").cpu())  # back to host memory
    return features


# ==== Evaluate ====
def evaluate(features, n, dims):
    """Sanity check of the output: one finite `dims`-d feature per image."""
    out = paddle.concat(features).numpy()
    assert out.shape == (n, dims) and np.isfinite(out).all(), out.shape
    return float(out.mean())


# ==== Main ====
def main(cfg):
    p, switches = cfg.params, resolve_switches(SWITCHES, cfg, TUNED)
    place = select_device(cfg)
    autocast, _ = set_precision(cfg.precision, place)
    paddle.seed(0)
    images = load_data(cfg)
    model = build_model()
    # rosetta: init
    weights, source = canonical.load(cfg.data, "resnet50")  # ImageNet from the `weights` step, else seeded random
    load_canonical(model, weights)
    # rosetta: end
    model.eval()
    if switches["to_static"]:
        model = paddle.jit.to_static(model)

    features = []
    timing = repeat(
        lambda: features.append(extract(model, images, p["batch_size"], autocast)),
        repeats=cfg.repeats,
        barrier=sync(place),
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
        "switches": {**switches, "device": str(place)},
    }
