"""PyTorch Lightning runners (lightning 2.6 over torch 2.14): the Trainer, its precision, the data order and the clock
shared by the four task modules. Lightning owns the loop (`trainer.fit`); the networks are plain `nn.Module`s."""

import time
import warnings
from contextlib import ExitStack

import lightning as L
import numpy as np
import torch

from shared import batching
from shared.record import GpuMissing, Skip
from shared.timing import WINDOW_STEPS, edge, stopwatch

# Lightning's "16-mixed" plugin steps through GradScaler, whose step reads its inf/NaN check back to the host
# (`found_inf.item()`) before the optimizer steps: under amp every step waits for the device there, as in PyTorch.
AMP_HOST_SYNC = "amp: GradScaler.step reads its inf/NaN check on the host every step (a sync PyTorch imposes)"
# The data sit in memory already, gathered with one indexing per batch: loader worker processes would only copy them
# (Lightning's docs name this filter for the warning it gives about loaders without workers).
warnings.filterwarnings("ignore", ".*does not have many workers.*")
# The cell's precision -> the Trainer's `precision` (Lightning's own names: autocast and, for fp16, loss scaling).
TRAINER_PRECISION = {"fp32": "32-true", "tf32": "32-true", "amp": "16-mixed", "bf16": "bf16-mixed"}


def framework_info():
    cuda = torch.cuda.is_available()
    return {
        "framework_version": L.__version__,
        "torch_version": torch.__version__,
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
def accelerator(cfg):
    """The Trainer's `accelerator` and `devices`: "gpu" with the cell's GPUs, else the CPU (with `--gpus N` on the CPU,
    N processes). Too few visible GPUs is a broken install or launch (status failed), never an unsupported cell."""
    devices = max(cfg.gpus, 1)
    if cfg.device == "cpu":
        return "cpu", devices
    if torch.cuda.device_count() < devices:
        raise GpuMissing(devices, torch.cuda.device_count(), f"Lightning {L.__version__} on torch {torch.__version__}")
    return "gpu", devices


def device_of(cfg):
    """The torch device rank 0 trains on (for the calibration and for inference outside a Trainer)."""
    return torch.device("cuda", 0) if accelerator(cfg)[0] == "gpu" else torch.device("cpu")


# rosetta: barrier
def sync(device):
    """The clock's barrier: CUDA runs asynchronously, so wait for queued kernels before reading the time."""
    return (lambda: torch.cuda.synchronize(device)) if device.type == "cuda" else (lambda: None)


def gemm(cfg, n, dtype):
    """The calibration GEMM (shared/calibration.py): an n×n product of `dtype` on the cell's device, and its barrier.
    "tfloat32" is float32 on TF32 tensor cores; "float32" turns TF32 off for its product, whatever the cell set."""
    device = device_of(cfg)
    tf32 = dtype == "tfloat32"
    a = torch.randn(n, n, device=device).to(torch.float32 if tf32 else getattr(torch, dtype))

    def matmul():
        torch.backends.cuda.matmul.allow_tf32 = tf32
        return a @ a

    return matmul, sync(device)


def device_copy(cfg, nbytes, pinned):
    """The calibration's host-to-device copy (shared/calibration.py): `nbytes` from pinned or pageable host memory."""
    device = device_of(cfg)
    source = torch.empty(nbytes, dtype=torch.uint8, pin_memory=pinned)
    target = torch.empty(nbytes, dtype=torch.uint8, device=device)
    return (lambda: target.copy_(source, non_blocking=pinned)), sync(device)


def set_precision(cfg):
    """The Trainer's `precision` for the cell (a GPU cell without its GPUs fails first, in `accelerator`). fp32 turns
    TF32 off explicitly (PyTorch allows it for cuDNN convolutions by default) and tf32 on: Lightning's "32-true" leaves
    both to torch's flags; amp is "16-mixed" (fp16 autocast with dynamic loss scaling), bf16 is "bf16-mixed" (bf16
    autocast, no scaling: the same exponent as fp32)."""
    precision, gpu = cfg.precision, accelerator(cfg)[0] == "gpu"
    if precision in ("tf32", "amp") and not gpu:
        raise Skip(f"{precision} needs an NVIDIA GPU (tensor cores); this cell runs on the CPU")
    # The compute capability, not torch.cuda.is_bf16_supported(): that also says yes where bf16 is only emulated.
    capability = torch.cuda.get_device_capability(0) if gpu else None
    if precision in ("tf32", "bf16") and gpu and capability < (8, 0):
        raise Skip(
            f"{precision} needs an Ampere or newer GPU (compute capability 8.0+); "
            f"{torch.cuda.get_device_name(0)} is {capability[0]}.{capability[1]}"
        )
    # rosetta: precision
    tf32 = precision == "tf32"
    torch.backends.cuda.matmul.allow_tf32 = tf32
    torch.backends.cudnn.allow_tf32 = tf32
    torch.set_float32_matmul_precision("high" if tf32 else "highest")
    return TRAINER_PRECISION[precision]


def trainer(cfg, precision, callbacks=(), devices=None, **kwargs):
    """A Trainer that adds nothing to the timed loop: no logger (no logging syncs), no checkpoints, no progress bar or
    model summary, no sanity-check validation before training. `devices`: the cell's unless given."""
    hardware, cell_devices = accelerator(cfg)
    return L.Trainer(
        accelerator=hardware,
        devices=devices or cell_devices,
        precision=precision,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        num_sanity_val_steps=0,
        callbacks=list(callbacks),
        **kwargs,
    )


def count_parameters(model):
    """Trainable parameters; BatchNorm running statistics are buffers, not parameters, so they are not counted."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


def load_state(model, weights):
    """Load canonical weights whose names are the network's own state_dict names (all four tasks' canonical layouts
    are PyTorch's). BatchNorm's `num_batches_tracked` counters keep the model's values, so loading stays strict."""
    counters = {name: t for name, t in model.state_dict().items() if name.endswith("num_batches_tracked")}
    model.load_state_dict({**counters, **{name: torch.tensor(np.asarray(w)) for name, w in weights.items()}})


# ==== the data order: every framework's (shared.batching), through a DataLoader ====
class EpochOrder(torch.utils.data.Sampler):
    """This rank's training batches of the epoch given to `set_epoch`, in the shared order (shared.batching), each as
    an index array. Lightning calls `set_epoch` on a loader's sampler before every epoch, as it does for
    DistributedSampler; the loader's `batch_size=None` hands each index array to the dataset whole, so a
    TensorDataset gathers a batch in one indexing, as the PyTorch runner does."""

    def __init__(self, n, batch_size, rank=0, world=1):
        self.n, self.batch_size, self.rank, self.world, self.epoch = n, batch_size, rank, world, 0

    def set_epoch(self, epoch):
        self.epoch = epoch

    def __iter__(self):
        yield from batching.train_batches(self.n, self.batch_size, self.epoch, self.rank, self.world)

    def __len__(self):
        return batching.steps_per_epoch(self.n, self.batch_size, self.world)


def train_loader(x_train, y_train, batch_size):
    """The training set in the shared order (no shuffling of the loader's own); host batches are page-locked where a
    GPU reads them, and Lightning copies each to the device asynchronously. The loader draws each epoch's base seed
    from a generator of its own, not from torch's global one, whose stream stays the dropout masks' alone: the same
    masks as the PyTorch runner's, which has no DataLoader."""
    return torch.utils.data.DataLoader(
        torch.utils.data.TensorDataset(x_train, y_train),
        sampler=EpochOrder(len(x_train), batch_size),
        batch_size=None,
        pin_memory=x_train.device.type == "cpu" and torch.cuda.is_available(),
        generator=torch.Generator(),
    )


def test_loader(x_test, batch_size):
    """The test set in order, every sample once (the last batch may be smaller): `trainer.predict`'s input."""
    return torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x_test), batch_size=batch_size, shuffle=False)


class OneBatch(torch.utils.data.Dataset):
    """`steps` copies of one batch (x, y): the training-equivalence test's input to `fit`."""

    def __init__(self, x, y, steps):
        self.batch, self.steps = (x, y), steps

    def __len__(self):
        return self.steps

    def __getitem__(self, i):
        return self.batch


class Weights(L.Callback):
    """The canonical weights after every step (`read(network)`): the training-equivalence test's view of `fit`."""

    def __init__(self, read):
        self.read, self.after = read, []

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        self.after.append(self.read(pl_module.net))


def fit_steps(module, x, y, steps, read, precision="32-true"):
    """`trainer.fit` on one batch `steps` times (max_steps) with the module as its runner builds it: (each step's loss,
    the canonical weights after each step)."""
    timer, weights = EpochTimer(), Weights(read)
    loader = torch.utils.data.DataLoader(OneBatch(x, y, steps), batch_size=None)
    L.Trainer(
        accelerator="cpu",
        devices=1,
        precision=precision,
        max_steps=steps,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        num_sanity_val_steps=0,
        callbacks=[timer, weights],
    ).fit(module, loader)
    return [loss.item() for loss in timer.losses], weights.after


# ==== the clock inside trainer.fit ====
class EpochTimer(L.Callback):
    """The training clock inside `trainer.fit`, as shared.timing.timed_epochs keeps it: one interval per epoch (the
    shared stopwatch, barriers at both edges), the first step timed apart as the warm-up (compile, autotune), and a
    sample per `window` steps after it, each window closed on the barrier. It reads each step's loss from the hook's
    `outputs` and leaves it on the device: nothing here waits for the device between window edges.

    The barrier is the device's (torch.cuda.synchronize on a GPU), picked when training starts on this process's
    device. On rank 0 the numbers go back to the process that called `fit` through `trainer.callback_metrics`, the way
    a spawned DDP run returns its results (tensors, copied to the host after training)."""

    def __init__(self, window=WINDOW_STEPS):
        self.window = window
        self.epoch_seconds, self.warmup, self.windows, self.losses = [], None, [], []

    def on_train_start(self, trainer, pl_module):
        self.barrier = sync(trainer.strategy.root_device)

    def on_train_epoch_start(self, trainer, pl_module):
        self.clock = ExitStack()
        self.elapsed = self.clock.enter_context(stopwatch(self.barrier))
        self.probing, self.in_window, self.window_start = 0.0, 0, time.perf_counter()

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        self.losses.append(outputs["loss"].detach())  # left on the device: no host sync
        if self.warmup is None:  # the very first step: compile, autotune, lazy allocation
            self.barrier()
            self.warmup = time.perf_counter() - self.window_start  # from the epoch's start, its first batch included
            self.probing += edge()
            self.window_start = time.perf_counter()
            return
        self.in_window += 1
        if self.in_window >= self.window:
            self.barrier()
            self.windows.append((time.perf_counter() - self.window_start) / self.in_window)
            self.probing += edge()
            self.in_window, self.window_start = 0, time.perf_counter()

    # rosetta: barrier
    def on_train_epoch_end(self, trainer, pl_module):
        self.clock.close()  # the stopwatch's closing barrier
        self.epoch_seconds.append(self.elapsed() - self.probing)

    def on_train_end(self, trainer, pl_module):
        if trainer.global_rank == 0:
            trainer.callback_metrics.update(
                epoch_seconds=torch.tensor(self.epoch_seconds, dtype=torch.float64),
                warmup=torch.tensor(self.warmup, dtype=torch.float64),
                windows=torch.tensor(self.windows, dtype=torch.float64),
                losses=torch.stack(self.losses).float().cpu(),
            )


def timing_of(trainer):
    """The clock's numbers as rank 0's EpochTimer left them in `trainer.callback_metrics` (also after a spawned run):
    (epoch_seconds, warmup, windows, losses), as shared.timing.timed_epochs returns them."""
    m = trainer.callback_metrics
    return m["epoch_seconds"].tolist(), float(m["warmup"]), m["windows"].tolist(), m["losses"].tolist()
