"""PyTorch Lightning 2.6 · resnet50 · torchvision ResNet-50 v1.5 cut after global average pooling, in a
LightningModule: timed feature extraction."""

import contextlib

import lightning as L
import torch
import torchvision
from torch import nn

from runners.lightning import count_parameters, device_of, load_state, set_precision, sync
from shared import batching, canonical
from shared.datasets import random_images
from shared.runner import resolve_switches
from shared.timing import extraction_metrics, repeat

# ==== Config ====
# Image size, batch size and batch count: shared/params.py (1,280 images of 224² in batches of 32 at full scale).
SWITCHES = {
    "cudnn_benchmark": True,  # fixed input shape: autotune once during the warm-up pass
    "channels_last": False,  # NHWC helps tensor cores under amp/bf16; off keeps cuDNN's classic NCHW
    "compile": False,  # torch.compile the LightningModule; the warm-up pass absorbs the compile time
    "pinned_memory": True,  # page-locked host buffers make the host→device copy asynchronous and faster
}
TUNED = {  # tuning=tuned: Lightning's documented speed-ups over torch (docs/tuned.md), same work
    "channels_last": True,  # NHWC: the layout tensor-core (and oneDNN) convolutions run in
    "compile": True,  # Inductor's fused conv+BN+ReLU kernels; the warm-up passes absorb the compile
}
# Data placement is "host" by the nature of the task (and shared.params.DATA_PLACEMENT): the images sit in host memory
# and every timed pass copies each batch in and its features back out, as a feature extractor in production would.
# AUTOCAST: the cell's precision -> torch.autocast's dtype (the Trainer's "16-mixed" and "bf16-mixed" do the same).
AUTOCAST = {"amp": torch.float16, "bf16": torch.bfloat16}


# ==== Data ====
def load_data(cfg):
    """Random images in host memory; every timed pass copies them to the device, as a feature extractor would."""
    p = cfg.params
    images = torch.from_numpy(random_images(p["batch_size"] * p["batches"], p["image_size"]))
    pinned = resolve_switches(SWITCHES, cfg, TUNED)["pinned_memory"]
    return images.pin_memory() if cfg.device == "gpu" and pinned else images


# ==== Model ====
# rosetta: model
class LitResNet50(L.LightningModule):
    """torchvision's ResNet-50 with the classifier replaced by the identity: the output is the 2048-d pooled feature."""

    def __init__(self):
        super().__init__()
        self.net = torchvision.models.resnet50(weights=None)
        self.net.fc = nn.Identity()

    def forward(self, x):
        return self.net(x)

    def predict_step(self, batch, batch_idx):
        return self(batch)


def build_model(cfg=None):
    """Its initialization does not matter: main loads the canonical weights (ImageNet or the shared seeded init)."""
    return LitResNet50()


def load_canonical(model, weights):
    """The canonical ResNet-50 names are torchvision's state_dict names (without `fc`, which is the identity here)."""
    load_state(model.net, weights)


def predict_logits(model, x):
    """Pooled features (N, 2048) in inference mode: BatchNorm uses its running statistics."""
    model.eval()
    with torch.inference_mode():
        return model(torch.as_tensor(x)).numpy()


# ==== Train step ====
# Feature extraction has no training step: the timed unit is one forward pass over all images (see `extract`).
# It calls the LightningModule's forward under torch.inference_mode(), as Lightning's docs do for inference in
# production, not `trainer.predict`: every Trainer run ends in the strategy's teardown, which moves the module back to
# the CPU, so each timed `predict` pass would also copy the 25 M weights to the device and back.
# rosetta: inference
def extract(model, images, batch_size, device, autocast):
    features = []
    with torch.inference_mode(), autocast():
        for idx in batching.eval_batches(len(images), batch_size):
            x = images[idx[0] : idx[-1] + 1].to(device, non_blocking=True)
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
    p, switches = cfg.params, resolve_switches(SWITCHES, cfg, TUNED)
    set_precision(cfg)  # TF32 flags; a cell the device cannot run is skipped here
    device = device_of(cfg)
    dtype = AUTOCAST.get(cfg.precision)
    autocast = (lambda: torch.autocast(device.type, dtype=dtype)) if dtype else contextlib.nullcontext
    torch.backends.cudnn.benchmark = switches["cudnn_benchmark"]
    torch.manual_seed(0)
    images = load_data(cfg)
    model = build_model()
    # rosetta: init
    weights, source = canonical.load(cfg.data, "resnet50")  # ImageNet from the `weights` step, else seeded random
    load_canonical(model, weights)
    # rosetta: end
    memory_format = torch.channels_last if switches["channels_last"] else torch.contiguous_format
    model = model.to(device, memory_format=memory_format).eval()
    if switches["compile"]:
        model = torch.compile(model)

    features = []
    timing = repeat(
        lambda: features.append(extract(model, images, p["batch_size"], device, autocast)),
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
            "memory_format": "NHWC" if switches["channels_last"] else "NCHW",
            "inference": "LightningModule forward under torch.inference_mode()",
            "device": str(device),
        },
    }
