"""PaddlePaddle 3.3 · densenet121 · paddle.vision's DenseNet-121 fine-tuned on ChestX-ray14 (14 sigmoid outputs),
data-parallel over N devices with paddle.DataParallel, one process per device started by paddle.distributed.spawn."""

import multiprocessing
import os
import re

import numpy as np
import paddle
import paddle.distributed as dist
import paddle.nn.functional as F

from runners.paddle import AMP_HOST_SYNC, count_parameters, load_state, paddle_name, select_device, set_precision, sync
from shared import batching, canonical, metrics, params, threads
from shared.datasets import ChestXray
from shared.runner import resolve_switches
from shared.sysinfo import usable_cpus
from shared.timing import InputWait, timed_epochs, train_metrics, train_timing, window_steps

# ==== Config ====
# Epochs, batch size per device, lr (× devices), crop and stored sizes come from shared/params.py.
SWITCHES = {
    "to_static": False,  # paddle.jit.to_static on the model (converted per process; reported as warm-up)
}
# Data placement is "host" by the nature of the task (and shared.params.DATA_PLACEMENT): ChestX-ray14 does not fit on a
# device, so paddle.io.DataLoader workers crop each batch in host memory and it is copied inside the clock.
# The input rule (README): each rank builds one DataLoader before the clock with params' `loader_workers` worker
# processes, kept across epochs (persistent_workers); the record says how long the loop waited for them.
# On the CPU the ranks are processes that all-reduce over gloo (paddle.distributed.spawn's `backend="gloo"`), on GPUs
# over NCCL: the same DataParallel code either way.
# Formulation difference from torchvision's DenseNet-121 (recorded in `differences`): Paddle's BatchNorm updates its
# running variance with the biased batch variance, PyTorch with the unbiased one (a factor n / (n - 1), n = batch ×
# height × width: negligible at 224², visible in the tiny scale's 1×1 last block).
BIASED_VAR = (
    "BatchNorm running variance updated with the biased batch variance (Paddle); torchvision uses the unbiased one"
)


# ==== Data ====
class ChestBatches(paddle.io.Dataset):
    """One rank's training batches: DataLoader workers crop/flip/normalize them (shared.datasets) in parallel. A key
    is a whole batch, (epoch, indices), as the batch sampler below yields it."""

    def __init__(self, data, crop, rank):
        self.data, self.crop, self.rank = data, crop, rank

    def __len__(self):
        return len(self.data)

    def __getitem__(self, key):
        epoch, idx = key  # persistent workers learn the epoch (the crop seed) from each key
        rng = np.random.default_rng([params.SEED, epoch, self.rank, int(idx[0])])
        return self.data.batch(idx, self.crop, rng)


class EpochBatchSampler(paddle.io.Sampler):
    """This rank's batches in the shared order (shared.batching) of the epoch given to set_epoch, as
    DistributedBatchSampler.set_epoch does; each batch goes out as one key carrying its epoch number."""

    def __init__(self, n, batch_size, rank, world):
        super().__init__()
        self.n, self.batch_size, self.rank, self.world, self.epoch = n, batch_size, rank, world, 0

    def set_epoch(self, epoch):
        self.epoch = epoch

    def __iter__(self):
        for idx in batching.train_batches(self.n, self.batch_size, self.epoch, self.rank, self.world):
            yield [(self.epoch, idx)]

    def __len__(self):
        return batching.steps_per_epoch(self.n, self.batch_size, self.world)


def load_data(cfg):
    p = cfg.params
    train = ChestXray(cfg.data, "train", p.get("train_samples"), p["stored_size"])
    test = ChestXray(cfg.data, "test", p.get("test_samples"), p["stored_size"])
    return train, test


def loader(train, cfg, rank, world):
    """One DataLoader for the whole run: its worker processes start with the first epoch and persist. They fork from
    this rank, sharing the memory-mapped images, which spawn would pickle whole into every worker. Paddle's DataLoader
    takes multiprocessing's default start method (it has no `multiprocessing_context`), and a rank that
    paddle.distributed.spawn made defaults to spawn, so the rank asks for fork."""
    p = cfg.params
    multiprocessing.set_start_method("fork", force=True)
    return paddle.io.DataLoader(
        ChestBatches(train, p["crop_size"], rank),
        batch_sampler=EpochBatchSampler(len(train), p["batch_size"], rank, world),
        collate_fn=lambda keys: keys[0],  # one key per batch: the dataset already returns the batch
        num_workers=p["loader_workers"],
        persistent_workers=True,
    )


# ==== Model ====
# rosetta: model
def build_model(cfg=None):
    """paddle.vision's DenseNet-121 (BN-ReLU-conv layers, growth 32, blocks 6/12/24/16) with a new 14-way head. Its
    initialization does not matter: the workers load the canonical weights (ImageNet with the shared seeded head, or
    the shared seeded init throughout)."""
    return paddle.vision.models.densenet121(num_classes=params.DENSENET121["num_classes"])


# torchvision's module names (the canonical layout) -> paddle.vision's, which PaddleClas gave them
DENSENET_NAMES = [
    (r"^features\.(conv0|norm0)\.", lambda m: f"conv1_func.{'_conv' if m[1] == 'conv0' else '_batch_norm'}."),
    (
        r"^features\.denseblock(\d)\.denselayer(\d+)\.(norm|conv)(\d)\.",
        lambda m: (
            f"db_conv_{int(m[1]) + 1}.conv{int(m[1]) + 1}_{m[2]}.bn_ac_func{m[4]}."
            + ("_batch_norm." if m[3] == "norm" else "_conv.")
        ),
    ),
    (
        r"^features\.transition(\d)\.(norm|conv)\.",
        lambda m: f"tr_conv{int(m[1]) + 1}_blk.conv_ac_func.{'_batch_norm' if m[2] == 'norm' else '_conv'}.",
    ),
    (r"^features\.norm5\.", lambda m: "batch_norm."),
    (r"^classifier\.", lambda m: "out."),
]


def densenet_name(name):
    for pattern, replace in DENSENET_NAMES:
        name = re.sub(pattern, replace, name)
    return paddle_name(name)


def load_canonical(model, weights):
    load_state(model, weights, rename=densenet_name)


def predict_logits(model, x):
    """14 logits per image in inference mode: BatchNorm uses its running statistics."""
    model.eval()
    with paddle.no_grad():
        return model(paddle.to_tensor(x)).numpy()


# ==== Train step ====
# rosetta: train-step
def make_train_step(model, optimizer, autocast, scaler):
    def train_step(x, y):
        with autocast():
            # rosetta: loss
            loss = F.binary_cross_entropy_with_logits(model(x), y)  # sigmoid inside the loss (lesson 6)
        if scaler:
            scaler.scale(loss).backward()  # DataParallel all-reduces gradients during backward
            scaler.step(optimizer)
            scaler.update()
        else:
            loss.backward()
            optimizer.step()
        optimizer.clear_grad()
        return loss.detach()

    return train_step


# ==== Evaluate ====
# rosetta: evaluate
def evaluate(model, test, crop, batch_size, autocast):
    """Mean AUC over the 14 findings on every test image (centre crop, no flip)."""
    model.eval()
    scores = []
    with paddle.no_grad(), autocast():
        for idx in batching.eval_batches(len(test), batch_size):
            x, _ = test.batch(idx, crop)
            scores.append(F.sigmoid(model(paddle.to_tensor(x)).astype("float32")).numpy())
    model.train()
    return metrics.mean_auc(np.concatenate(scores), test.labels)


# ==== Main ====
def worker(cfg):
    """One process per device. Rank 0 evaluates and reports; all ranks train."""
    p, switches = cfg.params, resolve_switches(SWITCHES, cfg)
    world = max(cfg.gpus, 1)
    # rosetta: data-parallel
    if world > 1:
        dist.init_parallel_env()  # the rank, world and rendezvous come from spawn's environment
    rank = dist.get_rank()
    # rosetta: end
    place = select_device(cfg, rank)  # spawn gives rank i the i-th GPU (FLAGS_selected_gpus)
    autocast, scaler = set_precision(cfg.precision, place)
    paddle.seed(0)
    train, test = load_data(cfg)
    model = build_model()
    # rosetta: init
    weights, source = canonical.load(cfg.data, "densenet121")  # the same start in every framework and on every rank
    load_canonical(model, weights)
    # rosetta: end
    # rosetta: data-parallel
    parallel = paddle.DataParallel(model) if world > 1 else model
    # rosetta: optimizer
    optimizer = paddle.optimizer.Adam(learning_rate=p["lr"] * world, parameters=parallel.parameters())
    # rosetta: end
    if switches["to_static"]:
        parallel = paddle.jit.to_static(parallel)
    train_step = make_train_step(parallel, optimizer, autocast, scaler)
    batches, wait = loader(train, cfg, rank, world), InputWait()

    def epoch_batches(epoch):
        batches.batch_sampler.set_epoch(epoch)
        return wait(batches)  # times each wait for the workers' next batch

    losses = []  # every step's loss, left on the device
    epoch_seconds, warmup, _, windows = timed_epochs(
        p["epochs"],
        epoch_batches,
        lambda batch: train_step(*batch),
        sync(place),
        outputs=losses,
        window=window_steps("densenet121"),
    )

    result = None
    if rank == 0:
        auc, classes = evaluate(model, test, p["crop_size"], p["batch_size"], autocast)
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
                **metrics.loss_metrics([float(loss) for loss in losses], steps),
                devices=world,
                weights=source,
                global_batch=p["batch_size"] * world,
                parameters=count_parameters(model),
                train_samples=len(train),
                test_samples=len(test),
                crop_size=p["crop_size"],
                epochs=p["epochs"],
                data_placement="host",
                differences=[BIASED_VAR] + ([AMP_HOST_SYNC] if scaler else []),
                input_pipeline=f"paddle.io.DataLoader, {p['loader_workers']} persistent worker processes per device",
                loader_workers=p["loader_workers"],
                input_wait_seconds=wait.seconds,  # rank 0's
                input_wait_fraction=wait.fraction(sum(epoch_seconds)),
            ),
            "timing": train_timing(windows, warmup=warmup, window=window_steps("densenet121")),
            "switches": {
                **switches,
                "data_parallel": world > 1,
                "backend": ("nccl" if place.is_gpu_place() else "gloo") if world > 1 else None,
                "device": str(place),
            },
        }
    if world > 1:
        dist.barrier()
    return result


def main(cfg):
    world = max(cfg.gpus, 1)
    select_device(cfg)  # fail early when the GPUs are not there
    load_data(cfg)  # and on a damaged data file, with its own message
    if world == 1:
        return worker(cfg)
    if cfg.device == "cpu":  # each rank's share of the cores (shared.threads), read by oneDNN's OpenMP at its start
        os.environ["OMP_NUM_THREADS"] = str(threads.per_device(threads.rule(usable_cpus())["intra_op"], world))
    # rosetta: data-parallel
    context = dist.spawn(worker, args=(cfg,), nprocs=world, backend="gloo" if cfg.device == "cpu" else "nccl")
    return context.return_queues[0].get()
