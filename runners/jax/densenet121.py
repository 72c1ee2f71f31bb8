"""JAX 0.10 + Flax NNX 0.12 · densenet121 · DenseNet-121 written in NNX with a new 14-way sigmoid head, trained on
ChestX-ray14, data-parallel over N devices in one process: the batch is sharded over a device mesh, parameters are
replicated, and XLA inserts the gradient all-reduce (jax.sharding's global-view SPMD, no per-device code)."""

import collections
import itertools
import re
from concurrent.futures import ThreadPoolExecutor

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from runners.jax import count_parameters, load_torchvision_names, select_devices, set_precision
from shared import batching, canonical, metrics, params
from shared.datasets import ChestXray
from shared.runner import resolve_switches
from shared.timing import InputWait, timed_epochs, train_metrics, train_timing, window_steps

# ==== Config ====
# Epochs, batch size per device, lr (× devices), crop and stored sizes come from shared/params.py.
SWITCHES = {
    "jit": True,  # compile forward, backward, all-reduce and Adam update into one XLA program per step
    "donate": True,  # donate the old parameter/optimizer buffers so XLA updates them in place
}
# Layout: NHWC inside the model; the shared NCHW batches are transposed by the model's first op. Weights: Flax has no
# model zoo, so the network is written here with torchvision's module names and loads the canonical weights (ImageNet
# from the `weights` step with the shared seeded head, else the shared seeded init; record field `weights`).
# Data placement is "host" by the nature of the task: each global batch is cropped in host memory and device_put inside
# the clock (asynchronously, while the devices still run the previous step).
# The input rule (README): JAX has no input pipeline of its own (its docs point to Grain, tf.data or a PyTorch
# DataLoader, none of which this image installs), so a concurrent.futures thread pool of params' `loader_workers`
# threads per device, made once before the clock and kept for the run, crops the global batches ahead of the loop in
# order (the NumPy crop holds the GIL part of the time, which threads share); the record says how long the loop waited.
# Formulation differences from torchvision's DenseNet-121 (recorded in `differences`):
# - under jit over a sharded batch, BatchNorm's mean and variance are computed over the *global* batch (XLA all-reduces
#   them), i.e. synchronized BatchNorm; PyTorch's DDP normalizes each device's slice on its own;
# - Flax updates BatchNorm's running variance with the biased batch variance, PyTorch with the unbiased one (a factor
#   n / (n - 1), n = batch × height × width: negligible at 224², visible in the tiny scale's 1×1 last block).
DIFFERENCES = {
    "sync_bn": "BatchNorm statistics synchronized over devices (global-batch BN under jit); PyTorch DDP normalizes "
    "per device",
    "biased_var": "BatchNorm running variance updated with the biased batch variance (Flax); torchvision uses the "
    "unbiased one",
}


# ==== Data ====
def load_data(cfg):
    p = cfg.params
    train = ChestXray(cfg.data, "train", p.get("train_samples"), p["stored_size"])
    test = ChestXray(cfg.data, "test", p.get("test_samples"), p["stored_size"])
    return train, test


def global_batch(train, crop, epoch, slices):
    """One global batch on the host: the `world` per-device slices side by side, every slice cropped and flipped with
    the same seeds as PyTorch's rank of that number, so both frameworks see identical pixels."""
    parts = [
        train.batch(idx, crop, np.random.default_rng([params.SEED, epoch, rank, int(idx[0])]))
        for rank, idx in enumerate(slices)
    ]
    return np.concatenate([x for x, _ in parts]), np.concatenate([y for _, y in parts])


def global_batches(train, cfg, epoch, world, pool):
    """One epoch of global batches in the shared order, made by `pool`'s threads up to 2 per thread ahead of the loop
    (PyTorch's DataLoader prefetches as many)."""
    p = cfg.params
    per_rank = [batching.train_batches(len(train), p["batch_size"], epoch, rank, world) for rank in range(world)]
    keys = zip(*per_rank)
    ahead = collections.deque(
        pool.submit(global_batch, train, p["crop_size"], epoch, slices)
        for slices in itertools.islice(keys, 2 * p["loader_workers"] * world)
    )
    while ahead:
        batch = ahead.popleft().result()
        ahead.extend(pool.submit(global_batch, train, p["crop_size"], epoch, s) for s in itertools.islice(keys, 1))
        yield batch


# ==== Model ====
# Module and attribute names are torchvision's (features.conv0, features.denseblock1.denselayer1.norm1, …,
# classifier), so that canonical weights load by name; nnx.Dict plays the part of torchvision's named nn.Sequential.
# torchvision's paddings too: explicit and symmetric (XLA's "SAME" would pad 7×7/2 asymmetrically).
class DenseLayer(nnx.Module):
    """BN-ReLU-conv1×1 (bn_size × growth) → BN-ReLU-conv3×3 (growth); its output is concatenated to its input."""

    def __init__(self, cin, growth, bn_size, conv, norm):
        self.norm1, self.conv1 = norm(cin), conv(cin, bn_size * growth, 1)
        self.norm2, self.conv2 = norm(bn_size * growth), conv(bn_size * growth, growth, 3)

    def __call__(self, x):
        y = self.conv1(nnx.relu(self.norm1(x)))
        y = self.conv2(nnx.relu(self.norm2(y)))
        return jnp.concatenate([x, y], axis=-1)  # channels grow by `growth`


class Transition(nnx.Module):
    """BN-ReLU-conv1×1 halving the channels (compression 0.5), then 2×2 average pooling."""

    def __init__(self, cin, cout, conv, norm):
        self.norm, self.conv = norm(cin), conv(cin, cout, 1)

    def __call__(self, x):
        return nnx.avg_pool(self.conv(nnx.relu(self.norm(x))), (2, 2), (2, 2))


# rosetta: model
class DenseNet121(nnx.Module):
    def __init__(self, num_classes=14, growth=32, blocks=(6, 12, 24, 16), bn_size=4, dtype=jnp.float32, *, rngs):
        # The initializers only fill the arrays until the canonical weights are loaded.
        conv = lambda cin, cout, k, stride=1: nnx.Conv(
            cin, cout, (k, k), stride, padding=k // 2, use_bias=False, dtype=dtype, rngs=rngs
        )
        # Training mode (batch statistics) until nnx.view switches it; PyTorch's momentum 0.1 is Flax's decay 0.9.
        norm = lambda c: nnx.BatchNorm(c, momentum=0.9, epsilon=1e-5, dtype=dtype, rngs=rngs)
        self.features = nnx.Dict(conv0=conv(3, 64, 7, 2), norm0=norm(64))
        c = 64
        for b, depth in enumerate(blocks, start=1):
            self.features[f"denseblock{b}"] = nnx.List(
                [DenseLayer(c + i * growth, growth, bn_size, conv, norm) for i in range(depth)]
            )
            c += depth * growth
            if b < len(blocks):
                self.features[f"transition{b}"] = Transition(c, c // 2, conv, norm)
                c //= 2
        self.features["norm5"] = norm(c)  # c = 1024
        self.classifier = nnx.Linear(c, num_classes, dtype=dtype, rngs=rngs)
        self.blocks = len(blocks)

    # rosetta: model
    def __call__(self, x):  # x: (N, 3, H, W)
        f = self.features
        x = x.transpose(0, 2, 3, 1)  # -> NHWC
        x = nnx.relu(f.norm0(f.conv0(x)))  # (N, H/2, W/2, 64)
        x = nnx.max_pool(x, (3, 3), (2, 2), padding=((1, 1), (1, 1)))  # (N, H/4, W/4, 64)
        for b in range(1, self.blocks + 1):
            for layer in f[f"denseblock{b}"]:
                x = layer(x)
            if b < self.blocks:
                x = f[f"transition{b}"](x)  # halves channels and resolution
        x = nnx.relu(f.norm5(x))  # (N, H/32, W/32, 1024)
        return self.classifier(x.mean(axis=(1, 2)))  # 14 logits; sigmoid in the loss


def build_model(cfg=None, dtype=jnp.float32, seed=0):
    return DenseNet121(num_classes=params.DENSENET121["num_classes"], dtype=dtype, rngs=nnx.Rngs(seed))


def load_canonical(model, weights):
    """Canonical names are torchvision's, and so are our attribute paths, except that a dense block is an nnx.List
    (NNX sorts attributes by name when it rebuilds a module under jit, which would run `denselayer10` before
    `denselayer2`): torchvision's `denselayer7` is entry 6. Kernels go OIHW -> HWIO on the way."""
    renumber = lambda name: re.sub(r"denselayer(\d+)", lambda m: str(int(m[1]) - 1), name)
    load_torchvision_names(model, {renumber(name): w for name, w in weights.items()})


@nnx.jit
def forward(model, x):
    return model(x)


def predict_logits(model, x):
    """14 logits per image in inference mode: BatchNorm uses its running statistics."""
    return np.asarray(forward(nnx.view(model, use_running_average=True), jnp.asarray(x)), np.float32)


# ==== Train step ====
# rosetta: train-step
def make_train_step(graphdef, switches, batch_sharding, replicated):
    """A pure function (state, x, y) -> (state, loss). The shardings say where things live: the batch is split over
    the mesh's `data` axis, state is replicated; XLA turns the gradient's sum over the batch into an all-reduce."""

    def train_step(state, x, y):
        model, optimizer, loss_scale = nnx.merge(graphdef, state)

        # rosetta: loss
        def loss_fn(model):
            logits = model(x).astype(jnp.float32)
            return optax.losses.sigmoid_binary_cross_entropy(logits, y).mean()  # sigmoid inside the loss (lesson 6)

        # rosetta: train-step
        loss, grads = loss_scale.value_and_grad(loss_fn, model)
        optimizer.update(model, grads)
        return nnx.state((model, optimizer, loss_scale)), loss

    if not switches["jit"]:
        return train_step
    # rosetta: data-parallel
    return jax.jit(
        train_step,
        in_shardings=(replicated, batch_sharding, batch_sharding),
        out_shardings=(replicated, replicated),
        donate_argnums=0 if switches["donate"] else (),
    )


# ==== Evaluate ====
# rosetta: evaluate
def evaluate(model, test, crop, batch_size, batch_sharding):
    """Mean AUC over the 14 findings on every test image (centre crop, no flip); the last batch is padded to a
    multiple of the device count so that it shards, and the padding is dropped again."""
    model = nnx.view(model, use_running_average=True)  # BatchNorm: running statistics
    forward = nnx.jit(lambda model, x: jax.nn.sigmoid(model(x).astype(jnp.float32)))
    world, scores = batch_sharding.mesh.size, []
    for idx in batching.eval_batches(len(test), batch_size * world):
        x, _ = test.batch(idx, crop)
        x = np.concatenate([x, np.zeros((-len(x) % world, *x.shape[1:]), x.dtype)])
        scores.append(np.asarray(forward(model, jax.device_put(x, batch_sharding)))[: len(idx)])
    return metrics.mean_auc(np.concatenate(scores), test.labels)


# ==== Main ====
def main(cfg):
    p, switches = cfg.params, resolve_switches(SWITCHES, cfg)
    world = max(cfg.gpus, 1)
    devices = select_devices(cfg, world)
    dtype, loss_scale = set_precision(cfg.precision, devices[0])
    # rosetta: data-parallel
    mesh = Mesh(np.asarray(devices), ("data",))  # a 1-D mesh: pure data parallelism
    batch_sharding = NamedSharding(mesh, PartitionSpec("data"))  # batch axis split over devices
    replicated = NamedSharding(mesh, PartitionSpec())  # a full copy on every device
    # rosetta: end
    train, test = load_data(cfg)
    model = nnx.eval_shape(lambda: build_model(dtype=dtype))  # shapes only: no initializer runs (or compiles)
    # rosetta: init
    weights, source = canonical.load(cfg.data, "densenet121")  # the same start in every framework
    load_canonical(model, weights)
    # rosetta: optimizer
    tx = loss_scale.wrap(optax.adam(p["lr"] * world))  # linear scaling with the global batch
    optimizer = nnx.Optimizer(model, tx, wrt=nnx.Param)
    # rosetta: end
    graphdef, state = nnx.split((model, optimizer, loss_scale))
    state = jax.device_put(state, replicated)
    train_step = make_train_step(graphdef, switches, batch_sharding, replicated)

    pool, wait = ThreadPoolExecutor(p["loader_workers"] * world), InputWait()

    def epoch_batches(epoch):
        # The threads prepare the next batches while the devices still run step i: JAX dispatches steps asynchronously.
        for x, y in wait(global_batches(train, cfg, epoch, world, pool)):  # times each wait for the next batch
            yield jax.device_put((x, y), batch_sharding)  # each device receives its own slice

    def step(batch):
        nonlocal state
        state, loss = train_step(state, *batch)
        return loss

    # rosetta: barrier
    losses = []  # every step's loss, left on the device
    epoch_seconds, warmup, _, windows = timed_epochs(
        p["epochs"],
        epoch_batches,
        step,
        lambda: jax.block_until_ready(state),
        outputs=losses,
        window=window_steps("densenet121"),
    )
    # rosetta: end
    pool.shutdown()
    nnx.update((model, optimizer, loss_scale), state)

    auc, classes = evaluate(model, test, p["crop_size"], p["batch_size"], batch_sharding)
    steps = batching.steps_per_epoch(len(train), p["batch_size"], world)
    differences = [DIFFERENCES["biased_var"]] + ([DIFFERENCES["sync_bn"]] if world > 1 else [])
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
            differences=differences,
            input_pipeline=f"none in JAX: a concurrent.futures thread pool, {p['loader_workers']} "
            f"threads per device ({p['loader_workers'] * world}), kept for the run",
            loader_workers=p["loader_workers"],
            input_wait_seconds=wait.seconds,
            input_wait_fraction=wait.fraction(sum(epoch_seconds)),
        ),
        "timing": train_timing(windows, warmup=warmup, window=window_steps("densenet121")),
        "switches": {
            **switches,
            "data_parallel": "jax.sharding (mesh axis 'data')",
            "devices": world,
            "device_list": [str(d) for d in devices],
            "memory_format": "NHWC",
            "compute_dtype": jnp.dtype(dtype).name,
            "batchnorm": "synchronized over the global batch",
            "matmul_precision": jax.config.jax_default_matmul_precision,
            "device": str(devices[0]),
        },
    }
