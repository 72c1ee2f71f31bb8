"""PyTorch Lightning 2.6 · densenet121 · torchvision DenseNet-121 fine-tuned on ChestX-ray14 (14 sigmoid outputs),
data-parallel over N devices by the Trainer's DDP strategy, one spawned process per device."""

import lightning as L
import numpy as np
import torch
import torch.nn.functional as F
import torchvision

from runners.lightning import (
    AMP_HOST_SYNC,
    EpochTimer,
    accelerator,
    count_parameters,
    load_state,
    set_precision,
    timing_of,
    trainer,
)
from shared import batching, canonical, metrics, params, threads
from shared.datasets import ChestXray
from shared.runner import resolve_switches
from shared.sysinfo import usable_cpus
from shared.timing import InputWait, train_metrics, train_timing, window_steps

# ==== Config ====
# Epochs, batch size per device, lr (× devices), crop and stored sizes come from shared/params.py.
SWITCHES = {
    "cudnn_benchmark": True,  # Trainer(benchmark=True): fixed 224² crops, autotune convolutions once
    "channels_last": False,  # NHWC for tensor cores under amp/bf16; NCHW is cuDNN's classic layout
}
# Data placement is "host" by the nature of the task (and shared.params.DATA_PLACEMENT): ChestX-ray14 does not fit on a
# device, so DataLoader workers crop each batch in host memory and Lightning copies it (pinned, asynchronously) inside
# the clock. The input rule (README): each rank builds one DataLoader before the clock with params' `loader_workers`
# worker processes, kept across epochs (persistent_workers); the record says how long the loop waited for them.


# ==== Data ====
class ChestBatches(torch.utils.data.Dataset):
    """One rank's training batches: DataLoader workers crop/flip/normalize them (shared.datasets) in parallel."""

    def __init__(self, data, crop, rank):
        self.data, self.crop, self.rank = data, crop, rank

    def __len__(self):
        return len(self.data)

    def __getitem__(self, key):  # what the sampler yields: (epoch, indices), one whole batch
        epoch, idx = key  # persistent workers learn the epoch (the crop seed) from each key
        rng = np.random.default_rng([params.SEED, epoch, self.rank, int(idx[0])])
        x, y = self.data.batch(idx, self.crop, rng)
        return torch.from_numpy(x), torch.from_numpy(y)


class EpochBatches(torch.utils.data.Sampler):
    """This rank's batches in the shared order (shared.batching) of the epoch Lightning gives `set_epoch` before each
    epoch (as it does DistributedSampler's); each batch goes out with its epoch number."""

    def __init__(self, n, batch_size, rank, world):
        self.n, self.batch_size, self.rank, self.world, self.epoch = n, batch_size, rank, world, 0

    def set_epoch(self, epoch):
        self.epoch = epoch

    def __iter__(self):
        for idx in batching.train_batches(self.n, self.batch_size, self.epoch, self.rank, self.world):
            yield self.epoch, idx

    def __len__(self):
        return batching.steps_per_epoch(self.n, self.batch_size, self.world)


class WaitedLoader(torch.utils.data.DataLoader):
    """A DataLoader whose every wait for the next batch is timed (shared.timing.InputWait), the same measure in every
    DenseNet-121 runner: Lightning's loop pulls the batches through this iterator."""

    def __init__(self, *args, wait, **kwargs):
        super().__init__(*args, **kwargs)
        self.wait = wait

    def __iter__(self):
        return self.wait(super().__iter__())


class TestCrops(torch.utils.data.Dataset):
    """The test images' centre crops (no flip), a batch per index array: `trainer.predict`'s input."""

    def __init__(self, data, crop):
        self.data, self.crop = data, crop

    def __len__(self):
        return len(self.data)

    def __getitem__(self, idx):
        return (torch.from_numpy(self.data.batch(idx, self.crop)[0]),)


def load_data(cfg):
    p = cfg.params
    train = ChestXray(cfg.data, "train", p.get("train_samples"), p["stored_size"])
    test = ChestXray(cfg.data, "test", p.get("test_samples"), p["stored_size"])
    return train, test


# ==== Model ====
# rosetta: model
def build_model(cfg=None, memory_format=torch.contiguous_format):
    """torchvision's DenseNet-121 with a new 14-way head in a LightningModule. Its initialization does not matter:
    main loads the canonical weights (ImageNet with the shared seeded head, or the shared seeded init throughout)."""
    return LitDenseNet(cfg, memory_format)


def load_canonical(model, weights):
    """The canonical DenseNet-121 names are torchvision's state_dict names."""
    load_state(model.net, weights)


def predict_logits(model, x):
    """14 logits per image in inference mode: BatchNorm uses its running statistics."""
    model.eval()
    with torch.inference_mode():
        return model(torch.as_tensor(x)).numpy()


# ==== Train step ====
# Lightning owns the loop: `trainer.fit` runs the LightningModule's training_step on every process, DDP all-reducing
# the gradients during backward, then the optimizer's step (under the Trainer's precision).
class LitDenseNet(L.LightningModule):
    """DenseNet-121 with its training step, optimizer, data and prediction. Each spawned process builds its own
    DataLoader (`train_dataloader`), so the memory-mapped images are opened in the process, never pickled to it."""

    def __init__(self, cfg=None, memory_format=torch.contiguous_format):
        super().__init__()
        self.cfg, self.memory_format, self.wait = cfg, memory_format, InputWait()
        self.net = torchvision.models.densenet121(weights=None, num_classes=params.DENSENET121["num_classes"])

    def forward(self, x):
        return self.net(x)

    def setup(self, stage):
        if self.cfg is not None and self.device.type == "cpu":  # each process's threads: shared.threads
            world = self.trainer.world_size
            torch.set_num_threads(threads.per_device(threads.rule(usable_cpus())["intra_op"], world))

    def train_dataloader(self):
        """One DataLoader for the whole run: its workers start with the first epoch and persist. They fork from this
        process (Lightning spawned it, so spawn would be the default), sharing the memory-mapped images."""
        p, rank, world = self.cfg.params, self.trainer.global_rank, self.trainer.world_size
        train = load_data(self.cfg)[0]
        return WaitedLoader(
            ChestBatches(train, p["crop_size"], rank),
            sampler=EpochBatches(len(train), p["batch_size"], rank, world),
            batch_size=None,
            num_workers=p["loader_workers"],
            persistent_workers=True,
            multiprocessing_context="fork",
            pin_memory=self.device.type == "cuda",
            wait=self.wait,
        )

    # rosetta: train-step
    def training_step(self, batch, batch_idx):
        x, y = batch
        x = x.contiguous(memory_format=self.memory_format)  # a no-op unless channels_last
        # rosetta: loss
        return F.binary_cross_entropy_with_logits(self(x), y)  # sigmoid inside the loss (lesson 6)

    # rosetta: optimizer
    def configure_optimizers(self):
        # rosetta: data-parallel
        return torch.optim.Adam(self.parameters(), lr=self.cfg.params["lr"] * self.trainer.world_size)  # linear
        # scaling with the global batch

    def on_train_end(self):
        if self.trainer.global_rank == 0:  # rank 0's wait goes back to the caller with the timer's numbers
            self.trainer.callback_metrics["input_wait_seconds"] = torch.tensor(self.wait.seconds, dtype=torch.float64)

    def predict_step(self, batch, batch_idx):
        (x,) = batch
        return torch.sigmoid(self(x)).float()


def train_step(trainer, model):
    """Lightning's loop is the train step: `fit` runs training_step on every rank's batches of every epoch (its
    EpochTimer callback keeps the clock); spawned, rank 0's weights and callback_metrics come back to this process."""
    trainer.fit(model)


# ==== Evaluate ====
# rosetta: evaluate
def evaluate(cfg, precision, model, test, crop, batch_size):
    """Mean AUC over the 14 findings on every test image (centre crop, no flip), by `trainer.predict` on one device."""
    crops = torch.utils.data.DataLoader(
        TestCrops(test, crop), sampler=list(batching.eval_batches(len(test), batch_size)), batch_size=None
    )
    scores = trainer(cfg, precision, devices=1).predict(model, crops)
    return metrics.mean_auc(torch.cat(scores).numpy(), test.labels)


# ==== Main ====
def main(cfg):
    p, switches = cfg.params, resolve_switches(SWITCHES, cfg)
    precision = set_precision(cfg)
    world = accelerator(cfg)[1]
    train, test = load_data(cfg)  # a damaged data file fails here, with its own message
    memory_format = torch.channels_last if switches["channels_last"] else torch.contiguous_format
    model = build_model(cfg, memory_format)
    # rosetta: init
    weights, source = canonical.load(cfg.data, "densenet121")  # the same start in every framework and on every rank
    load_canonical(model, weights)
    # rosetta: end
    model = model.to(memory_format=memory_format)
    timer = EpochTimer(window=window_steps("densenet121"))
    # rosetta: data-parallel
    fit = trainer(
        cfg,
        precision,
        [timer],
        max_epochs=p["epochs"],
        benchmark=switches["cudnn_benchmark"],
        # DDP with its processes spawned (torch.multiprocessing), gloo on the CPU and NCCL on GPUs, as the PyTorch
        # runner's mp.spawn: "ddp" would re-run this command line once per rank, and every rank would write a record.
        strategy="ddp_spawn" if world > 1 else "auto",
        use_distributed_sampler=False,  # each rank's slice of the shared order comes from EpochBatches
    )
    # rosetta: end
    train_step(fit, model)
    epoch_seconds, warmup, windows, losses = timing_of(fit)
    input_wait = float(fit.callback_metrics["input_wait_seconds"])

    auc, classes = evaluate(cfg, precision, model, test, p["crop_size"], p["batch_size"])
    steps = batching.steps_per_epoch(len(train), p["batch_size"], world)
    return {
        "metrics": train_metrics(
            epoch_seconds,
            steps * p["batch_size"] * world,
            warmup=warmup,
            steps=steps,
            windows=windows,
            auc=auc,
            auc_classes=classes,
            train_minutes=sum(epoch_seconds) / 60,
            **metrics.loss_metrics(losses, steps),
            devices=world,
            weights=source,
            global_batch=p["batch_size"] * world,
            parameters=count_parameters(model),
            train_samples=len(train),
            test_samples=len(test),
            crop_size=p["crop_size"],
            epochs=p["epochs"],
            data_placement="host",
            differences=[AMP_HOST_SYNC] if precision == "16-mixed" else [],
            input_pipeline=f"torch DataLoader, {p['loader_workers']} persistent worker processes per device",
            loader_workers=p["loader_workers"],
            input_wait_seconds=input_wait,  # rank 0's
            input_wait_fraction=input_wait / sum(epoch_seconds) if sum(epoch_seconds) > 0 else None,
        ),
        "timing": train_timing(windows, warmup=warmup, window=window_steps("densenet121")),
        "switches": {
            **switches,
            "ddp": world > 1,
            "strategy": "ddp_spawn" if world > 1 else "auto",
            "backend": ("nccl" if accelerator(cfg)[0] == "gpu" else "gloo") if world > 1 else None,
            "memory_format": "NHWC" if switches["channels_last"] else "NCHW",
            "trainer_precision": precision,
            "device": str(fit.strategy.root_device),
        },
    }
