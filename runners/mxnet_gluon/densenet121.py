"""MXNet 1.9 Gluon · densenet121 · DenseNet-121 written as Gluon HybridBlocks with a new 14-way sigmoid head, trained on
ChestX-ray14, data-parallel over N contexts in one process: `split_and_load` slices each batch over the devices and the
Trainer's kvstore sums the gradients."""

import os

import mxnet as mx
import numpy as np
from mxnet import autograd, gluon
from mxnet.contrib import amp
from mxnet.gluon import nn

from runners.mxnet_gluon import (
    ADAM_EPSILON_HAT,
    AMP_HOST_SYNC,
    batchnorm,
    check_precision,
    contexts,
    count_parameters,
    load_torchvision_names,
    named_sequential,
    sync,
)
from shared import batching, canonical, metrics, params
from shared.datasets import ChestXray
from shared.runner import resolve_switches
from shared.timing import InputWait, timed_epochs, train_metrics, train_timing, window_steps

# ==== Config ====
# Epochs, batch size per device, lr (× devices), crop and stored sizes come from shared/params.py.
SWITCHES = {
    "hybridize": True,  # run the cached symbolic graph, not op by op (seed lesson 15)
    "static_alloc": True,  # hybridize(static_alloc): allocate the graph's memory once, reuse it every step
    "static_shape": True,  # hybridize(static_shape): fixed crops and batch size, plan the graph once
    "cudnn_autotune": True,  # MXNET_CUDNN_AUTOTUNE_DEFAULT: pick the fastest conv algorithms for fixed 224² crops
    "kvstore": "device",  # gradient reduction: 'device' sums on the GPUs (P2P), 'local' on the host; with CPU
    # contexts both reduce in host memory
}
# Model: Gluon's model zoo densenet121 ends in a fixed AvgPool2D(7), right only for 224² inputs (the demo crops 128,
# the tests 32-64), and names its layers by position; so the network is written here in Gluon's idiom with
# torchvision's module names and a global average pool, and loads the canonical weights (ImageNet with the shared
# seeded head from the `weights` step, else the shared seeded init; record field `weights`).
# Data placement is "host" by the nature of the task: each global batch is cropped in host memory, and split_and_load
# copies one slice to each device inside the clock.
# The input rule (README): one gluon.data.DataLoader for the whole run, built before the clock, whose pool of params'
# `loader_workers` worker processes per device (forked once, in its constructor) crops the batches ahead of the loop;
# the record says how long the loop waited for them.
# Formulation differences from torchvision's DenseNet-121 (recorded in `differences`):
# - MXNet updates BatchNorm's running variance with the biased batch variance, PyTorch with the unbiased one (a factor
#   n / (n - 1), n = batch × height × width: negligible at 224², visible in the tiny scale's 1×1 last block).
# - MXNet's Adam adds ε before the bias correction (ADAM_EPSILON_HAT).
# BatchNorm is per device, as under PyTorch's DDP: each context normalizes its own slice and keeps its own running
# statistics; evaluation uses the first context's, as PyTorch's rank 0 (whose buffers DDP broadcasts) does.
BIASED_VAR = (
    "BatchNorm running variance updated with the biased batch variance (MXNet); torchvision uses the unbiased one"
)


# ==== Data ====
def load_data(cfg):
    p = cfg.params
    train = ChestXray(cfg.data, "train", p.get("train_samples"), p["stored_size"])
    test = ChestXray(cfg.data, "test", p.get("test_samples"), p["stored_size"])
    return train, test


class RankSlices(gluon.data.Dataset):
    """Items are keys (epoch, rank, indices): that rank's slice of a global batch, cropped and flipped with the same
    seeds as PyTorch's rank of that number, so all frameworks see the same pixels."""

    def __init__(self, data, crop):
        self.data, self.crop = data, crop

    def __getitem__(self, key):
        epoch, rank, idx = key
        return self.data.batch(idx, self.crop, np.random.default_rng([params.SEED, epoch, rank, int(idx[0])]))

    def __len__(self):
        return len(self.data)


class GlobalBatches(gluon.data.Sampler):
    """The keys of one epoch's global batches (set_epoch picks it) in the shared order: the `world` ranks' slices."""

    def __init__(self, n, batch_size, world):
        self.n, self.batch_size, self.world, self.epoch = n, batch_size, world, 0

    def set_epoch(self, epoch):
        self.epoch = epoch

    def __iter__(self):
        per_rank = [
            batching.train_batches(self.n, self.batch_size, self.epoch, r, self.world) for r in range(self.world)
        ]
        for slices in zip(*per_rank):
            yield [(self.epoch, rank, idx) for rank, idx in enumerate(slices)]

    def __len__(self):
        return batching.steps_per_epoch(self.n, self.batch_size, self.world)


def side_by_side(slices):
    """The workers' batchify: the ranks' (x, y) slices concatenated into shared-memory NDArrays (as Gluon's own
    default_mp_batchify_fn stacks), which the main process receives without a copy."""
    return [mx.nd.array(np.concatenate(part), ctx=mx.Context("cpu_shared", 0)) for part in zip(*slices)]


def loader(train, cfg, sampler, world, ctx):
    """One DataLoader for the whole run: its constructor forks the worker pool, which serves every epoch."""
    p = cfg.params
    return gluon.data.DataLoader(
        RankSlices(train, p["crop_size"]),
        batch_sampler=sampler,
        batchify_fn=side_by_side,
        num_workers=p["loader_workers"] * world,
        pin_memory=ctx.device_type == "gpu",
    )


# ==== Model ====
# Attribute names are torchvision's (features.conv0, features.denseblock1.denselayer1.norm1, …, classifier), so that
# canonical weights load by name (named_sequential plays torchvision's named nn.Sequential); paddings are symmetric.
class DenseLayer(gluon.HybridBlock):
    """BN-ReLU-conv1×1 (bn_size × growth) → BN-ReLU-conv3×3 (growth); its output is concatenated to its input."""

    def __init__(self, cin, growth, bn_size, **kwargs):
        super().__init__(**kwargs)
        with self.name_scope():
            self.norm1 = batchnorm(cin)
            self.conv1 = nn.Conv2D(bn_size * growth, 1, use_bias=False, in_channels=cin)
            self.norm2 = batchnorm(bn_size * growth)
            self.conv2 = nn.Conv2D(growth, 3, padding=1, use_bias=False, in_channels=bn_size * growth)

    def hybrid_forward(self, F, x):
        y = self.conv1(F.relu(self.norm1(x)))
        y = self.conv2(F.relu(self.norm2(y)))
        return F.concat(x, y, dim=1)  # channels grow by `growth`


def transition(cin, cout):
    """BN-ReLU-conv1×1 halving the channels (compression 0.5), then 2×2 average pooling."""
    return named_sequential(
        ("norm", batchnorm(cin)),
        ("relu", nn.Activation("relu")),
        ("conv", nn.Conv2D(cout, 1, use_bias=False, in_channels=cin)),
        ("pool", nn.AvgPool2D(2, 2)),
    )


# rosetta: model
class DenseNet121(gluon.HybridBlock):
    def __init__(self, num_classes=14, growth=32, blocks=(6, 12, 24, 16), bn_size=4, **kwargs):
        super().__init__(**kwargs)
        with self.name_scope():
            stem = [
                ("conv0", nn.Conv2D(64, 7, 2, padding=3, use_bias=False, in_channels=3)),
                ("norm0", batchnorm(64)),
                ("relu0", nn.Activation("relu")),
                ("pool0", nn.MaxPool2D(3, 2, padding=1)),
            ]
            body, c = [], 64
            for b, depth in enumerate(blocks, start=1):
                body.append(
                    (
                        f"denseblock{b}",
                        named_sequential(
                            *[(f"denselayer{i + 1}", DenseLayer(c + i * growth, growth, bn_size)) for i in range(depth)]
                        ),
                    )
                )
                c += depth * growth
                if b < len(blocks):
                    body.append((f"transition{b}", transition(c, c // 2)))
                    c //= 2
            self.features = named_sequential(*stem, *body, ("norm5", batchnorm(c)))  # c = 1024
            self.pool = nn.GlobalAvgPool2D()  # any input size (the zoo's AvgPool2D(7) is not)
            self.classifier = nn.Dense(num_classes, in_units=c)

    # rosetta: model
    def hybrid_forward(self, F, x):  # x: (N, 3, H, W)
        x = F.relu(self.features(x))  # (N, 1024, H/32, W/32)
        return self.classifier(self.pool(x))  # 14 logits; sigmoid lives in the loss (lesson 6)


def build_model(cfg=None, ctx=mx.cpu()):
    """Its initialization does not matter: main loads the canonical weights (ImageNet with the shared seeded head, or
    the shared seeded init throughout), on every context."""
    net = DenseNet121(num_classes=params.DENSENET121["num_classes"])
    net.initialize(ctx=ctx)
    return net


def load_canonical(model, weights):
    """Canonical names are torchvision's, and so are the attribute paths (BatchNorm's γ, β renamed on the way)."""
    load_torchvision_names(model, weights)


def predict_logits(model, x):
    """14 logits per image in inference mode (outside autograd.record): BatchNorm uses its running statistics."""
    return model(mx.nd.array(x)).asnumpy()


# ==== Train step ====
def make_train_step(net, trainer, ctxs, use_amp):
    # rosetta: loss
    loss_fn = gluon.loss.SigmoidBinaryCrossEntropyLoss()  # sigmoid inside the loss (lesson 6)

    # rosetta: train-step
    def train_step(x, y):
        # rosetta: data-parallel
        xs = gluon.utils.split_and_load(x, ctxs)  # one slice per device: host -> device copies
        ys = gluon.utils.split_and_load(y, ctxs)
        # rosetta: end
        with autograd.record():
            losses = [loss_fn(net(xi), yi) for xi, yi in zip(xs, ys)]  # each context runs its own slice
            if use_amp:  # amp: the scaled losses, recorded too
                with amp.scale_loss(losses, trainer) as scaled:
                    autograd.backward(scaled)
            else:
                autograd.backward(losses)
        trainer.step(x.shape[0])  # kvstore sums the devices' gradients; / global batch = the mean
        return losses  # NDArrays: the step never waits (lesson 13)

    return train_step


# ==== Evaluate ====
# rosetta: evaluate
def evaluate(net, test, crop, batch_size, ctx):
    """Mean AUC over the 14 findings on every test image (centre crop, no flip), on the first context."""
    scores = []
    for idx in batching.eval_batches(len(test), batch_size):
        x, _ = test.batch(idx, crop)
        scores.append(mx.nd.sigmoid(net(mx.nd.array(x, ctx=ctx)).astype("float32")))
    return metrics.mean_auc(mx.nd.concat(*scores, dim=0).asnumpy(), test.labels)


# ==== Main ====
def main(cfg):
    p, switches = cfg.params, resolve_switches(SWITCHES, cfg)
    ctxs = contexts(cfg)
    world = len(ctxs)
    # rosetta: precision
    use_amp = check_precision(cfg.precision, ctxs[0])
    os.environ["MXNET_CUDNN_AUTOTUNE_DEFAULT"] = "1" if switches["cudnn_autotune"] else "0"
    if use_amp:
        amp.init()
    # rosetta: end
    train, test = load_data(cfg)
    # rosetta: data-parallel
    net = build_model(ctx=ctxs)  # one copy of the parameters per context
    # rosetta: init
    weights, source = canonical.load(cfg.data, "densenet121")  # the same start in every framework
    load_canonical(net, weights)
    # rosetta: end
    if switches["hybridize"]:
        net.hybridize(static_alloc=switches["static_alloc"], static_shape=switches["static_shape"])
    # rosetta: optimizer
    trainer = gluon.Trainer(
        net.collect_params(),
        "adam",
        {
            "learning_rate": p["lr"] * world,  # linear scaling with the global batch
            "beta1": p["beta1"],
            "beta2": p["beta2"],
            "epsilon": p["eps"],
        },
        kvstore=switches["kvstore"],
    )
    if use_amp:
        amp.init_trainer(trainer)
    # rosetta: end
    train_step = make_train_step(net, trainer, ctxs, use_amp)

    sampler = GlobalBatches(len(train), p["batch_size"], world)
    batches, wait = loader(train, cfg, sampler, world, ctxs[0]), InputWait()

    def epoch_batches(epoch):
        sampler.set_epoch(epoch)  # read when the epoch's iterator starts
        return wait(batches)  # times each wait for the workers' next batch

    losses = []  # every step's per-context losses, on the devices
    epoch_seconds, warmup, _, windows = timed_epochs(
        p["epochs"],
        epoch_batches,
        lambda batch: train_step(*batch),
        sync(),
        outputs=losses,
        window=window_steps("densenet121"),
    )

    auc, classes = evaluate(net, test, p["crop_size"], p["batch_size"], ctxs[0])
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
            **metrics.loss_metrics([np.mean([device.mean().asscalar() for device in step]) for step in losses], steps),
            devices=world,
            weights=source,
            global_batch=p["batch_size"] * world,
            parameters=count_parameters(net),
            train_samples=len(train),
            test_samples=len(test),
            crop_size=p["crop_size"],
            epochs=p["epochs"],
            data_placement="host",
            differences=[BIASED_VAR, ADAM_EPSILON_HAT] + ([AMP_HOST_SYNC] if use_amp else []),
            input_pipeline=f"gluon DataLoader, {p['loader_workers'] * world} worker processes "
            f"({p['loader_workers']} per device), one pool for all epochs",
            loader_workers=p["loader_workers"],
            input_wait_seconds=wait.seconds,
            input_wait_fraction=wait.fraction(sum(epoch_seconds)),
        ),
        "timing": train_timing(windows, warmup=warmup, window=window_steps("densenet121")),
        "switches": {
            **switches,
            "amp": use_amp,
            "kvstore": switches["kvstore"] if world > 1 else None,
            "memory_format": "NCHW",
            "device": ", ".join(map(str, ctxs)),
        },
    }
