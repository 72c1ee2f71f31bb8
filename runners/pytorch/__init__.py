"""PyTorch runners (torch 2.14, torchvision 0.29): device, precision and provenance shared by the four task modules."""

import contextlib

import numpy as np
import torch

from shared import batching
from shared.record import GpuMissing, Skip

# GradScaler.step reads its inf/NaN check back to the host (`found_inf.item()`) before it lets the optimizer step: under
# amp every step waits for the device there, a sync PyTorch imposes and the report footnotes (`differences`).
AMP_HOST_SYNC = "amp: GradScaler.step reads its inf/NaN check on the host every step (a sync PyTorch imposes)"


def framework_info():
    cuda = torch.cuda.is_available()
    return {
        "framework_version": torch.__version__,
        "cuda": torch.version.cuda if cuda else None,
        "cudnn": torch.backends.cudnn.version() if cuda else None,
        "gpus": [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())] if cuda else [],
        # streaming multiprocessors, which nvidia-smi does not report (shared/sysinfo.py: gpu_facts)
        "gpu_sm_counts": [
            torch.cuda.get_device_properties(i).multi_processor_count for i in range(torch.cuda.device_count())
        ]
        if cuda
        else [],
    }


# rosetta: device
def select_device(cfg, rank=0):
    """`cuda:rank` for a GPU cell, else the CPU. Too few visible GPUs is a broken install or launch (status failed,
    so `--resume` retries it), never an unsupported combination."""
    if cfg.device == "cpu":
        return torch.device("cpu")
    if torch.cuda.device_count() < max(cfg.gpus, 1):
        raise GpuMissing(max(cfg.gpus, 1), torch.cuda.device_count(), f"PyTorch {torch.__version__}")
    return torch.device("cuda", rank)


# rosetta: barrier
def sync(device):
    """The clock's barrier: CUDA runs asynchronously, so wait for queued kernels before reading the time."""
    return (lambda: torch.cuda.synchronize(device)) if device.type == "cuda" else (lambda: None)


def gemm(cfg, n, dtype):
    """The calibration GEMM (shared/calibration.py): an n×n product of `dtype` on the cell's device, and its barrier.
    "tfloat32" is float32 on TF32 tensor cores; "float32" turns TF32 off for its product, whatever the cell set."""
    device = select_device(cfg)
    tf32 = dtype == "tfloat32"
    a = torch.randn(n, n, device=device).to(torch.float32 if tf32 else getattr(torch, dtype))

    def matmul():
        torch.backends.cuda.matmul.allow_tf32 = tf32
        return a @ a

    return matmul, sync(device)


def device_copy(cfg, nbytes, pinned):
    """The calibration's host-to-device copy (shared/calibration.py): `nbytes` from pinned or pageable host memory."""
    device = select_device(cfg)
    source = torch.empty(nbytes, dtype=torch.uint8, pin_memory=pinned)
    target = torch.empty(nbytes, dtype=torch.uint8, device=device)
    return (lambda: target.copy_(source, non_blocking=pinned)), sync(device)


def set_precision(precision, device):
    """Configure matmul/conv precision and return (autocast context factory, GradScaler or None).

    fp32 turns TF32 off explicitly (PyTorch allows it for cuDNN convolutions by default); tf32 turns it on; amp is
    fp16 autocast with dynamic loss scaling; bf16 is bf16 autocast, which needs no scaling (same exponent as fp32).
    """
    gpu = device.type == "cuda"
    if precision in ("tf32", "amp") and not gpu:
        raise Skip(f"{precision} needs an NVIDIA GPU (tensor cores); this cell runs on the CPU")
    # Ask for the compute capability, not torch.cuda.is_bf16_supported(): that also says yes where bf16 is only
    # emulated (pre-Ampere GPUs), which would time an emulation under the bf16 label.
    capability = torch.cuda.get_device_capability(device) if gpu else None
    if precision in ("tf32", "bf16") and gpu and capability < (8, 0):
        raise Skip(
            f"{precision} needs an Ampere or newer GPU (compute capability 8.0+); "
            f"{torch.cuda.get_device_name(device)} is {capability[0]}.{capability[1]}"
        )
    # rosetta: precision
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
    """Trainable parameters; BatchNorm running statistics are buffers, not parameters, so they are not counted."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


def load_state(model, weights):
    """Load canonical weights whose names are the model's own state_dict names (all four tasks' canonical layouts are
    PyTorch's). BatchNorm's `num_batches_tracked` step counters are bookkeeping, not part of the layout: they keep the
    model's values, so loading stays strict (a missing or unexpected name is an error)."""
    counters = {name: t for name, t in model.state_dict().items() if name.endswith("num_batches_tracked")}
    model.load_state_dict({**counters, **{name: torch.tensor(np.asarray(w)) for name, w in weights.items()}})


def train_batches(x_train, y_train, batch_size, epoch, device):
    """One epoch of (x, y) on `device` in the shared order. Each batch is gathered where the data lives; from host
    memory it is page-locked and copied asynchronously, so the copy overlaps the previous step's kernels."""
    pin = x_train.device.type == "cpu" and device.type == "cuda"
    for idx in batching.train_batches(len(x_train), batch_size, epoch):
        idx = torch.from_numpy(idx).to(x_train.device)
        x, y = x_train[idx], y_train[idx]
        if pin:
            x, y = x.pin_memory(), y.pin_memory()
        yield x.to(device, non_blocking=True), y.to(device, non_blocking=True)  # no-op where they already are


# ---- the tuned path (cells with tuning=tuned): PyTorch's own documented fast path, each piece a switch in TUNED ----
def compile_mode(device):
    """torch.compile's mode for a tuned cell: "reduce-overhead" on a GPU (the step captured as a CUDA graph: one
    launch per step instead of one per kernel), the default (Inductor's fused C++/OpenMP kernels) on the CPU."""
    return "reduce-overhead" if device.type == "cuda" else "default"


def compiled(train_step, mode):
    """`train_step` compiled in `mode`. A CUDA graph's outputs live in buffers its next replay overwrites, so each
    step's loss is cloned out of the graph (a one-element copy on the device: still no host sync)."""
    step = torch.compile(train_step, mode=None if mode == "default" else mode)
    if mode != "reduce-overhead":
        return step

    def graphed(*batch):
        torch.compiler.cudagraph_mark_step_begin()
        return step(*batch).clone()

    return graphed


def prefetched(batches, device):
    """The tuned input path on a GPU: batch i+1's host-to-device copy is queued on a side stream as step i is
    launched, so the copy engine works beside step i's kernels; the default stream waits for a batch's copy only
    before the step that reads it. `batches` yields page-locked host tensors; on the CPU they pass through."""
    if device.type != "cuda":
        yield from batches
        return
    side, compute = torch.cuda.Stream(device), torch.cuda.current_stream(device)

    def start(host):
        with torch.cuda.stream(side):
            return tuple(t.to(device, non_blocking=True) for t in host)

    def handed_over(batch):
        compute.wait_stream(side)  # only this batch's copy is queued on the side stream yet
        for t in batch:
            t.record_stream(compute)  # the allocator must not reuse it while the step still reads it
        return batch

    batches = iter(batches)
    first = next(batches, None)
    if first is None:
        return
    ready = start(first)
    for host in batches:
        current = handed_over(ready)
        ready = start(host)  # batch i+1's copy, beside step i
        yield current
    yield handed_over(ready)


def host_batches(x_train, y_train, batch_size, epoch, device):
    """One epoch of (x, y) gathered in host memory in the shared order, page-locked where a GPU will read them
    (prefetched copies them)."""
    pin = device.type == "cuda"
    for idx in batching.train_batches(len(x_train), batch_size, epoch):
        idx = torch.from_numpy(idx)
        x, y = x_train[idx], y_train[idx]
        yield (x.pin_memory(), y.pin_memory()) if pin else (x, y)


def fast_path(train_step, switches, x_train, y_train, batch_size, device):
    """What the tuned switches do around a train step: compiled (`compile`) and, on a GPU reading host data,
    each batch copied from page-locked memory on a side stream one step ahead (`prefetch`). Returns the step, one
    epoch's batches as `timed_epochs` reads them, and the compile mode and prefetch that ran (None/False by default)."""
    mode = compile_mode(device) if switches["compile"] else None
    if mode:
        train_step = compiled(train_step, mode)
    prefetch = switches["prefetch"] and device.type == "cuda" and x_train.device.type == "cpu"

    def batches(epoch):
        if prefetch:
            return prefetched(host_batches(x_train, y_train, batch_size, epoch, device), device)
        return train_batches(x_train, y_train, batch_size, epoch, device)

    return train_step, batches, mode, prefetch
