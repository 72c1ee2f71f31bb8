"""PyTorch 2.14 · densenet121 · torchvision DenseNet-121 fine-tuned on ChestX-ray14 (14 sigmoid outputs),
data-parallel over N devices with DistributedDataParallel, one process per device, launched by this runner."""

import socket

import numpy as np
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn.functional as F
import torchvision
from torch.nn.parallel import DistributedDataParallel

from runners.pytorch import AMP_HOST_SYNC, count_parameters, load_state, select_device, set_precision, sync
from shared import batching, canonical, metrics, params, threads
from shared.datasets import ChestXray
from shared.runner import resolve_switches
from shared.sysinfo import usable_cpus
from shared.timing import InputWait, timed_epochs, train_metrics, train_timing, window_steps

# ==== Config ====
# Epochs, batch size per device, lr (× devices), crop and stored sizes come from shared/params.py.
SWITCHES = {
    "cudnn_benchmark": True,  # fixed 224² crops: autotune convolutions once
    "channels_last": False,  # NHWC for tensor cores under amp/bf16; NCHW is cuDNN's classic layout
    "compile": False,  # torch.compile the DDP model (compiles per process; reported as warm-up)
}
# Data placement is "host" by the nature of the task (and shared.params.DATA_PLACEMENT): ChestX-ray14 does not fit on a
# device, so DataLoader workers crop each batch in host memory and it is copied (pinned, asynchronous) inside the clock.
# The input rule (README): each rank builds one DataLoader before the clock with params' `loader_workers` worker
# processes, kept across epochs (persistent_workers); the record says how long the loop waited for them.


# ==== Data ====
class ChestBatches(torch.utils.data.Dataset):
    """One rank's training batches: DataLoader workers crop/flip/normalize them (shared.datasets) in parallel."""

    def __init__(self, data, crop, rank):
        self.data, self.crop, self.rank = data, crop, rank

    def __len__(self):
        return len(self.data)

    def __getitems__(self, key):  # DataLoader passes what the batch sampler yields: (epoch, indices)
        epoch, idx = key  # persistent workers learn the epoch (the crop seed) from each key
        rng = np.random.default_rng([params.SEED, epoch, self.rank, int(idx[0])])
        x, y = self.data.batch(idx, self.crop, rng)
        return torch.from_numpy(x), torch.from_numpy(y)


class EpochBatchSampler(torch.utils.data.Sampler):
    """This rank's batches in the shared order (shared.batching) of the epoch given to set_epoch, as
    DistributedSampler.set_epoch does; each batch goes out with its epoch number."""

    def __init__(self, n, batch_size, rank, world):
        self.n, self.batch_size, self.rank, self.world, self.epoch = n, batch_size, rank, world, 0

    def set_epoch(self, epoch):
        self.epoch = epoch

    def __iter__(self):
        for idx in batching.train_batches(self.n, self.batch_size, self.epoch, self.rank, self.world):
            yield self.epoch, idx

    def __len__(self):
        return batching.steps_per_epoch(self.n, self.batch_size, self.world)


def load_data(cfg):
    p = cfg.params
    train = ChestXray(cfg.data, "train", p.get("train_samples"), p["stored_size"])
    test = ChestXray(cfg.data, "test", p.get("test_samples"), p["stored_size"])
    return train, test


def loader(train, cfg, rank, world, device):
    """One DataLoader for the whole run: its worker processes start with the first epoch and persist. They fork from
    this rank (mp.spawn made the rank, so spawn would be the default), sharing the memory-mapped images, which spawn
    would pickle whole into every worker."""
    p = cfg.params
    return torch.utils.data.DataLoader(
        ChestBatches(train, p["crop_size"], rank),
        batch_sampler=EpochBatchSampler(len(train), p["batch_size"], rank, world),
        collate_fn=lambda batch: batch,
        num_workers=p["loader_workers"],
        persistent_workers=True,
        multiprocessing_context="fork",
        pin_memory=device.type == "cuda",
    )


# ==== Model ====
# rosetta: model
def build_model(cfg=None):
    """torchvision's DenseNet-121 with a new 14-way head. Its initialization does not matter: the workers load the
    canonical weights (ImageNet with the shared seeded head, or the shared seeded init throughout)."""
    return torchvision.models.densenet121(weights=None, num_classes=params.DENSENET121["num_classes"])


def load_canonical(model, weights):
    """The canonical DenseNet-121 names are torchvision's state_dict names."""
    load_state(model, weights)


def predict_logits(model, x):
    """14 logits per image in inference mode: BatchNorm uses its running statistics."""
    model.eval()
    with torch.inference_mode():
        return model(torch.as_tensor(x)).numpy()


# ==== Train step ====
# rosetta: train-step
def make_train_step(model, optimizer, autocast, scaler, device):
    def train_step(x, y):
        x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
        optimizer.zero_grad(set_to_none=True)
        with autocast():
            # rosetta: loss
            loss = F.binary_cross_entropy_with_logits(model(x), y)  # sigmoid inside the loss (lesson 6)
        if scaler:
            scaler.scale(loss).backward()  # DDP all-reduces gradients during backward
            scaler.step(optimizer)
            scaler.update()
        else:
            loss.backward()
            optimizer.step()
        return loss.detach()

    return train_step


# ==== Evaluate ====
# rosetta: evaluate
def evaluate(model, test, crop, batch_size, device, autocast):
    """Mean AUC over the 14 findings on every test image (centre crop, no flip)."""
    model.eval()
    scores = []
    with torch.inference_mode(), autocast():
        for idx in batching.eval_batches(len(test), batch_size):
            x, _ = test.batch(idx, crop)
            scores.append(torch.sigmoid(model(torch.from_numpy(x).to(device)).float()).cpu())
    model.train()
    return metrics.mean_auc(torch.cat(scores).numpy(), test.labels)


# ==== Main ====
def worker(rank, world, cfg, port, results):
    """One process per device. Rank 0 evaluates and reports; all ranks train."""
    p, switches = cfg.params, resolve_switches(SWITCHES, cfg)
    device = select_device(cfg, rank)
    # rosetta: data-parallel
    if world > 1:
        backend = "nccl" if device.type == "cuda" else "gloo"  # gloo lets the CPU tests exercise the same code
        dist.init_process_group(backend, init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    # rosetta: end
    if device.type == "cpu":
        torch.set_num_threads(threads.per_device(threads.rule(usable_cpus())["intra_op"], world))  # shared.threads
    autocast, scaler = set_precision(cfg.precision, device)
    torch.backends.cudnn.benchmark = switches["cudnn_benchmark"]
    torch.manual_seed(0)
    train, test = load_data(cfg)
    model = build_model()
    # rosetta: init
    weights, source = canonical.load(cfg.data, "densenet121")  # the same start in every framework and on every rank
    load_canonical(model, weights)
    # rosetta: end
    memory_format = torch.channels_last if switches["channels_last"] else torch.contiguous_format
    model = model.to(device, memory_format=memory_format)
    # rosetta: data-parallel
    ddp = DistributedDataParallel(model, device_ids=[rank] if device.type == "cuda" else None) if world > 1 else model
    # rosetta: optimizer
    optimizer = torch.optim.Adam(ddp.parameters(), lr=p["lr"] * world)  # linear scaling with the global batch
    # rosetta: end
    train_step = make_train_step(ddp, optimizer, autocast, scaler, device)
    if switches["compile"]:
        train_step = torch.compile(train_step)
    batches, wait = loader(train, cfg, rank, world, device), InputWait()

    def epoch_batches(epoch):
        batches.batch_sampler.set_epoch(epoch)
        return wait(batches)  # times each wait for the workers' next batch

    losses = []  # every step's loss, left on the device
    epoch_seconds, warmup, _, windows = timed_epochs(
        p["epochs"],
        epoch_batches,
        lambda batch: train_step(*batch),
        sync(device),
        outputs=losses,
        window=window_steps("densenet121"),
    )

    if rank == 0:
        auc, classes = evaluate(model, test, p["crop_size"], p["batch_size"], device, autocast)
        steps = batching.steps_per_epoch(len(train), p["batch_size"], world)
        result = {
            "metrics": train_metrics(
                epoch_seconds,
                steps * p["batch_size"] * world,
                warmup=warmup,
                steps=steps,
                windows=windows,
                auc=auc,
                auc_classes=classes,
                train_minutes=sum(epoch_seconds) / 60,
                **metrics.loss_metrics([loss.item() for loss in losses], steps),
                devices=world,
                weights=source,
                global_batch=p["batch_size"] * world,
                parameters=count_parameters(model),
                train_samples=len(train),
                test_samples=len(test),
                crop_size=p["crop_size"],
                epochs=p["epochs"],
                data_placement="host",
                differences=[AMP_HOST_SYNC] if scaler else [],
                input_pipeline=f"torch DataLoader, {p['loader_workers']} persistent worker processes per device",
                loader_workers=p["loader_workers"],
                input_wait_seconds=wait.seconds,  # rank 0's
                input_wait_fraction=wait.fraction(sum(epoch_seconds)),
            ),
            "timing": train_timing(windows, warmup=warmup, window=window_steps("densenet121")),
            "switches": {
                **switches,
                "ddp": world > 1,
                "backend": ("nccl" if device.type == "cuda" else "gloo") if world > 1 else None,
                "memory_format": "NHWC" if switches["channels_last"] else "NCHW",
                "device": str(device),
            },
        }
        if results is not None:
            results.put(result)
    else:
        result = None
    if world > 1:
        dist.barrier()
        dist.destroy_process_group()
    return result


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main(cfg):
    world = max(cfg.gpus, 1)
    select_device(cfg)  # fail early when the GPUs are not there
    load_data(cfg)  # and on a damaged data file, with its own message
    if world == 1:
        return worker(0, 1, cfg, None, None)
    # rosetta: data-parallel
    results = mp.get_context("spawn").SimpleQueue()
    mp.spawn(worker, args=(world, cfg, free_port(), results), nprocs=world, join=True)
    return results.get()
