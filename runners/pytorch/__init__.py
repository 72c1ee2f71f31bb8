"""PyTorch runners (torch 2.14, torchvision 0.29): device, precision and provenance shared by the four task modules."""
import contextlib

import torch

from shared.record import Skip


def framework_info():
    cuda = torch.cuda.is_available()
    return {
        "framework_version": torch.__version__,
        "cuda": torch.version.cuda if cuda else None,
        "cudnn": torch.backends.cudnn.version() if cuda else None,
        "gpus": [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())] if cuda else [],
    }


def select_device(cfg, rank=0):
    """`cuda:rank` for a GPU cell (skipped where no GPU is visible), else the CPU."""
    if cfg.device == "cpu":
        return torch.device("cpu")
    if torch.cuda.device_count() < max(cfg.gpus, 1):
        raise Skip(f"{cfg.gpus} GPU(s) asked for, {torch.cuda.device_count()} visible to PyTorch")
    return torch.device("cuda", rank)


def sync(device):
    """The clock's barrier: CUDA runs asynchronously, so wait for queued kernels before reading the time."""
    return (lambda: torch.cuda.synchronize(device)) if device.type == "cuda" else (lambda: None)


def set_precision(precision, device):
    """Configure matmul/conv precision and return (autocast context factory, GradScaler or None).

    fp32 turns TF32 off explicitly (PyTorch allows it for cuDNN convolutions by default); tf32 turns it on; amp is
    fp16 autocast with dynamic loss scaling; bf16 is bf16 autocast, which needs no scaling (same exponent as fp32).
    """
    gpu = device.type == "cuda"
    if precision in ("tf32", "amp") and not gpu:
        raise Skip(f"{precision} needs an NVIDIA GPU (tensor cores); this cell runs on the CPU")
    if precision == "tf32" and torch.cuda.get_device_capability(device)[0] < 8:
        raise Skip("tf32 needs an Ampere or newer GPU (compute capability 8.0+)")
    if precision == "bf16" and gpu and not torch.cuda.is_bf16_supported():
        raise Skip("this GPU has no bf16 support")
    tf32 = precision == "tf32"
    torch.backends.cuda.matmul.allow_tf32 = tf32
    torch.backends.cudnn.allow_tf32 = tf32
    torch.set_float32_matmul_precision("high" if tf32 else "highest")
    if precision in ("amp", "bf16"):
        dtype = torch.float16 if precision == "amp" else torch.bfloat16
        autocast = lambda: torch.autocast(device.type, dtype=dtype)
    else:
        autocast = contextlib.nullcontext
    scaler = torch.amp.GradScaler("cuda") if precision == "amp" else None
    return autocast, scaler


def count_parameters(model):
    return sum(p.numel() for p in model.parameters())
