"""PyTorch 2.14 · resnet50 · torchvision ResNet-50 cut after global average pooling: timed feature extraction."""
from pathlib import Path

import torch
import torchvision
from torch import nn

from runners.pytorch import select_device, set_precision, sync
from shared import batching
from shared.datasets import random_images
from shared.runner import resolve_switches
from shared.timing import extraction_metrics, repeat

# ==== Config ====
# Image size, batch size and batch count come from shared/params.py (1,280 images of 224² in batches of 32 at full scale).
SWITCHES = {
    "cudnn_benchmark": True,   # fixed input shape: autotune once during the warm-up pass
    "channels_last": False,    # NHWC helps tensor cores under amp/bf16; off keeps cuDNN's classic NCHW
    "compile": False,          # torch.compile the model; the warm-up pass absorbs the compile time
    "pinned_memory": True,     # page-locked host buffers make the host→device copy asynchronous and faster
}
WEIGHTS = torchvision.models.ResNet50_Weights.IMAGENET1K_V2


# ==== Data ====
def load_data(cfg):
    """Random images in host memory; every timed pass copies them to the device, as a feature extractor would."""
    p = cfg.params
    images = torch.from_numpy(random_images(p["batch_size"] * p["batches"], p["image_size"]))
    return images.pin_memory() if cfg.device == "gpu" and resolve_switches(SWITCHES, cfg)["pinned_memory"] else images


# ==== Model ====
def build_model(cfg=None):
    """ImageNet weights when they are in torch's hub cache (no download while benchmarking), else random; the
    classifier is replaced by the identity so the output is the 2048-d pooled feature."""
    cached = Path(torch.hub.get_dir()) / "checkpoints" / Path(WEIGHTS.url).name
    model = torchvision.models.resnet50(weights=WEIGHTS if cached.exists() else None)
    model.fc = nn.Identity()
    return model, ("imagenet" if cached.exists() else "random")


# ==== Train step ====
# Feature extraction has no training step: the timed unit is one forward pass over all images (see `extract`).
def extract(model, images, batch_size, device, autocast):
    features = []
    with torch.inference_mode(), autocast():
        for idx in batching.eval_batches(len(images), batch_size):
            x = images[idx[0]:idx[-1] + 1].to(device, non_blocking=True)
            features.append(model(x).float().to("cpu", non_blocking=True))  # back to host: part of the timed work
    return features


# ==== Evaluate ====
def evaluate(features, n, dims):
    """Sanity check of the output: one finite `dims`-d feature per image."""
    out = torch.cat(features)
    assert out.shape == (n, dims) and torch.isfinite(out).all(), out.shape
    return float(out.mean())


# ==== Main ====
def main(cfg):
    p, switches = cfg.params, resolve_switches(SWITCHES, cfg)
    device = select_device(cfg)
    autocast, _ = set_precision(cfg.precision, device)
    torch.backends.cudnn.benchmark = switches["cudnn_benchmark"]
    torch.manual_seed(0)
    images = load_data(cfg)
    model, weights = build_model()
    memory_format = torch.channels_last if switches["channels_last"] else torch.contiguous_format
    model = model.to(device, memory_format=memory_format).eval()
    if switches["compile"]:
        model = torch.compile(model)

    features = []
    timing = repeat(lambda: features.append(extract(model, images, p["batch_size"], device, autocast)),
                    repeats=cfg.repeats, warmup=1, barrier=sync(device))
    feature_mean = evaluate(features[-1], len(images), p["features"])
    return {
        "metrics": extraction_metrics(timing, len(images), p["batch_size"], p["image_size"], weights=weights,
                                      feature_mean=feature_mean),
        "timing": timing,
        "switches": {**switches, "memory_format": "NHWC" if switches["channels_last"] else "NCHW",
                     "device": str(device)},
    }
