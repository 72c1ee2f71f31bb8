"""Chainer 7.8 · densenet121 · DenseNet-121 written as a `chainer.Chain` with a new 14-way sigmoid head, fine-tuned on
ChestX-ray14, data-parallel over N devices with ChainerMN: one MPI process per device, launched by this runner."""

import importlib.util
import itertools
import os
import pickle
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import chainer
import chainer.functions as F
import chainer.links as L
import numpy as np
from chainer import optimizers

from runners.chainer import (
    ADAM_EPSILON_HAT,
    count_parameters,
    load_torchvision_names,
    select_device,
    set_precision,
    setup_optimizer,
    sync,
)
from shared import batching, canonical, metrics, params, threads
from shared.datasets import ChestXray
from shared.record import Skip
from shared.runner import resolve_switches
from shared.sysinfo import usable_cpus
from shared.timing import InputWait, timed_epochs, train_metrics, train_timing, window_steps

# ==== Config ====
# Epochs, batch size per device, lr (× devices), crop and stored sizes come from shared/params.py.
SWITCHES = {
    "autotune": True,  # fixed crops: cuDNN benchmarks its conv algorithms once per shape
    "type_check": False,  # skip Chainer's per-call shape/dtype checks: pure Python overhead on every function call
    "communicator": None,  # ChainerMN communicator; None = pure_nccl on GPUs (NCCL all-reduce), naive on the CPU (MPI)
}
# Data parallelism the way Chainer users did it from 2017 on: ChainerMN (part of Chainer since v6). `mpiexec -n N`
# starts one process per device; each trains on its own slice of every global batch, and the multi-node optimizer
# averages the gradients over all processes (an all-reduce) before each update. The one code path runs on GPUs
# (pure_nccl: NCCL) and on the CPU (naive: MPI over NumPy arrays), so the CPU tests exercise it. (Chainer's other
# multi-GPU route, MultiprocessParallelUpdater, is single-node, GPU-only and needs Chainer's Trainer loop.)
# BatchNorm normalizes each process's slice on its own, as PyTorch's DDP does.
# Weights: Chainer's model zoo has no DenseNet, so the network is written here with torchvision's link names and loads
# the canonical weights (ImageNet with the shared seeded head from the `weights` step, else the shared seeded init).
# Data placement is "host" by the nature of the task: each process crops its batch in host memory and sends it to its
# device inside the clock.
# The input rule (README): each process builds one MultiprocessIterator for the whole run before the clock; its pool of
# params' `loader_workers` processes (forked at the first batch, kept across epochs) crops the batches ahead of the
# loop, and the record says how long the loop waited for them. One example is one whole batch (batch_size=1 below),
# because the crops are seeded per batch, as in every framework; n_prefetch keeps every worker busy.
MPI_NEEDED = "pip install mpi4py mpich (MPI for Python and an MPI runtime with mpiexec)"


# ==== Data ====
def load_data(cfg):
    p = cfg.params
    train = ChestXray(cfg.data, "train", p.get("train_samples"), p["stored_size"])
    test = ChestXray(cfg.data, "test", p.get("test_samples"), p["stored_size"])
    return train, test


class RankBatches(chainer.dataset.DatasetMixin):
    """Every epoch's batches of this process in turn: its slice of each global batch in the shared order, cropped and
    flipped with the same seeds as PyTorch's rank of that number, so both frameworks see identical pixels."""

    def __init__(self, train, cfg, rank, world, dtype):
        p = cfg.params
        self.train, self.crop, self.rank, self.dtype = train, p["crop_size"], rank, dtype
        self.keys = [
            (epoch, idx)
            for epoch in range(p["epochs"])
            for idx in batching.train_batches(len(train), p["batch_size"], epoch, rank, world)
        ]

    def __len__(self):
        return len(self.keys)

    def get_example(self, i):  # runs in the iterator's worker processes
        epoch, idx = self.keys[i]
        x, y = self.train.batch(idx, self.crop, np.random.default_rng([params.SEED, epoch, self.rank, int(idx[0])]))
        return x.astype(self.dtype), y.astype(np.int32)  # int labels for sigmoid_cross_entropy


def train_batches(train, cfg, rank, world, dtype):
    """One iterator over the whole run, in order, its workers kept across epochs."""
    workers = cfg.params["loader_workers"]
    return chainer.iterators.MultiprocessIterator(
        RankBatches(train, cfg, rank, world, dtype),
        batch_size=1,
        repeat=False,
        shuffle=False,
        n_processes=workers,
        n_prefetch=workers,
    )


# ==== Model ====
# Link names are torchvision's (features.conv0, features.denseblock1.denselayer1.norm1, …, classifier), so canonical
# weights load by name; torchvision's paddings too (symmetric), its BatchNorm ε 1e-5 (Chainer's default is 2e-5), and
# no conv biases. Global average pooling makes the head independent of the crop size.
def conv(cin, cout, k, stride=1):
    return L.Convolution2D(cin, cout, k, stride, k // 2, nobias=True)


def norm(channels):
    return L.BatchNormalization(channels, eps=1e-5)  # decay 0.9 = PyTorch's momentum 0.1


class DenseLayer(chainer.Chain):
    """BN-ReLU-conv1×1 (bn_size × growth) → BN-ReLU-conv3×3 (growth); its output is concatenated to its input."""

    def __init__(self, cin, growth, bn_size):
        super().__init__()
        with self.init_scope():
            self.norm1, self.conv1 = norm(cin), conv(cin, bn_size * growth, 1)
            self.norm2, self.conv2 = norm(bn_size * growth), conv(bn_size * growth, growth, 3)

    def forward(self, x):
        h = self.conv1(F.relu(self.norm1(x)))
        h = self.conv2(F.relu(self.norm2(h)))
        return F.concat((x, h), axis=1)  # channels grow by `growth`


class DenseBlock(chainer.Chain):
    def __init__(self, depth, cin, growth, bn_size):
        super().__init__()
        with self.init_scope():
            for i in range(1, depth + 1):
                setattr(self, f"denselayer{i}", DenseLayer(cin + (i - 1) * growth, growth, bn_size))
        self.depth = depth

    def forward(self, x):
        for i in range(1, self.depth + 1):
            x = getattr(self, f"denselayer{i}")(x)
        return x


class Transition(chainer.Chain):
    """BN-ReLU-conv1×1 halving the channels (compression 0.5), then 2×2 average pooling."""

    def __init__(self, cin, cout):
        super().__init__()
        with self.init_scope():
            self.norm, self.conv = norm(cin), conv(cin, cout, 1)

    def forward(self, x):
        return F.average_pooling_2d(self.conv(F.relu(self.norm(x))), 2, 2)


# rosetta: model
class DenseNet121(chainer.Chain):
    def __init__(self, num_classes=14, growth=32, blocks=(6, 12, 24, 16), bn_size=4):
        super().__init__()
        features = chainer.Chain()
        with features.init_scope():
            features.conv0, features.norm0 = conv(3, 64, 7, 2), norm(64)
            c = 64
            for b, depth in enumerate(blocks, start=1):
                setattr(features, f"denseblock{b}", DenseBlock(depth, c, growth, bn_size))
                c += depth * growth
                if b < len(blocks):
                    setattr(features, f"transition{b}", Transition(c, c // 2))
                    c //= 2
            features.norm5 = norm(c)  # c = 1024
        with self.init_scope():
            self.features = features
            self.classifier = L.Linear(c, num_classes)
        self.blocks = len(blocks)

    # rosetta: model
    def forward(self, x):  # x: (N, 3, H, W)
        f = self.features
        h = F.relu(f.norm0(f.conv0(x)))  # (N, 64, H/2, W/2)
        h = F.max_pooling_2d(h, 3, 2, 1, cover_all=False)  # (N, 64, H/4, W/4), floor like torch
        for b in range(1, self.blocks + 1):
            h = getattr(f, f"denseblock{b}")(h)
            if b < self.blocks:
                h = getattr(f, f"transition{b}")(h)  # halves channels and resolution
        h = F.relu(f.norm5(h))  # (N, 1024, H/32, W/32)
        return self.classifier(F.mean(h, axis=(2, 3)))  # 14 logits; sigmoid in the loss


def build_model(cfg=None):
    return DenseNet121(num_classes=params.DENSENET121["num_classes"])


def load_canonical(model, weights):
    """Canonical names are torchvision's, and so are our link paths; OIHW kernels are Chainer's layout too."""
    load_torchvision_names(model, weights)


def predict_logits(model, x):
    """14 logits per image in inference mode: BatchNorm uses its running statistics."""
    with chainer.using_config("train", False), chainer.using_config("enable_backprop", False):
        return model(np.asarray(x, np.float32)).array


# ==== Train step ====
# rosetta: train-step
def make_train_step(classifier, optimizer):
    """With ChainerMN the optimizer is the multi-node one: after backward it all-reduces (averages) the gradients over
    the processes, then runs Adam; on one device it is Adam itself."""

    def train_step(x, y):
        optimizer.update(classifier, x, y)
        return classifier.loss.array  # the array, not the Variable (its graph); no sync

    return train_step


# ==== Evaluate ====
# rosetta: evaluate
def evaluate(model, test, crop, batch_size, device):
    """Mean AUC over the 14 findings on every test image (centre crop, no flip)."""
    scores = []
    with chainer.using_config("train", False), chainer.using_config("enable_backprop", False):
        for idx in batching.eval_batches(len(test), batch_size):
            x, _ = test.batch(idx, crop)
            logits = model(device.send(x.astype(chainer.get_dtype())))
            scores.append(chainer.backends.cuda.to_cpu(F.sigmoid(logits).array).astype(np.float32))
    return metrics.mean_auc(np.concatenate(scores), test.labels)


# ==== Main ====
def worker(cfg, world):
    """One process per device (under mpiexec when world > 1). Rank 0 evaluates and returns the result; all train."""
    p, switches = cfg.params, resolve_switches(SWITCHES, cfg)
    gpu = cfg.device == "gpu"
    comm, rank, name = None, 0, None
    # rosetta: data-parallel
    if world > 1:
        import chainermn  # imports mpi4py: only multi-process cells need MPI

        name = switches["communicator"] or ("pure_nccl" if gpu else "naive")
        comm = chainermn.create_communicator(name)
        rank = comm.rank
    # rosetta: end
    device = select_device(cfg, comm.intra_rank if comm else 0)  # one GPU per process on each node
    loss_scaling = set_precision(cfg.precision, device)
    chainer.global_config.autotune = switches["autotune"]
    chainer.global_config.type_check = switches["type_check"]
    train, test = load_data(cfg)
    model = build_model()
    # rosetta: init
    weights, source = canonical.load(cfg.data, "densenet121")  # the same start in every framework and on every rank
    load_canonical(model, weights)
    model.to_device(device)
    # rosetta: loss
    classifier = L.Classifier(model, lossfun=F.sigmoid_cross_entropy)  # mean BCE over N × 14; sigmoid inside
    classifier.compute_accuracy = False
    # rosetta: optimizer
    adam = optimizers.Adam(alpha=p["lr"] * world, beta1=p["beta1"], beta2=p["beta2"], eps=p["eps"])  # linear scaling
    # rosetta: data-parallel
    if comm:
        adam = chainermn.create_multi_node_optimizer(adam, comm)
    # rosetta: end
    optimizer = setup_optimizer(adam, classifier, loss_scaling)
    if comm:
        # ChainerMN's optimizer spends its first call broadcasting rank 0's parameters instead of updating (meant for
        # lazily initialized links). Broadcast once here, before the clock, and let it note the parameter set, so every
        # timed step is a real update, as in the other frameworks.
        comm.bcast_data(classifier)
        optimizer.is_changed(classifier)
    train_step = make_train_step(classifier, optimizer)

    batches, wait = train_batches(train, cfg, rank, world, chainer.get_dtype()), InputWait()
    steps = batching.steps_per_epoch(len(train), p["batch_size"], world)

    def epoch_batches(epoch):
        for [(x, y)] in wait(itertools.islice(batches, steps)):  # times each wait for the workers' next batch
            yield device.send(x), device.send(y)

    losses = []  # every step's loss, on the device
    epoch_seconds, warmup, _, windows = timed_epochs(
        p["epochs"],
        epoch_batches,
        lambda batch: train_step(*batch),
        sync(device),
        outputs=losses,
        window=window_steps("densenet121"),
    )
    batches.finalize()  # ends the worker pool

    if rank != 0:
        return None
    auc, classes = evaluate(model, test, p["crop_size"], p["batch_size"], device)
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
            differences=[ADAM_EPSILON_HAT],
            input_pipeline=f"chainer MultiprocessIterator, {p['loader_workers']} worker "
            f"processes per device, one iterator for all epochs",
            loader_workers=p["loader_workers"],
            input_wait_seconds=wait.seconds,  # rank 0's
            input_wait_fraction=wait.fraction(sum(epoch_seconds)),
        ),
        "timing": train_timing(windows, warmup=warmup, window=window_steps("densenet121")),
        "switches": {
            **switches,
            "communicator": name,
            "data_parallel": "ChainerMN" if comm else None,
            "processes": world,
            "memory_format": "NCHW",
            "dtype": "mixed16" if loss_scaling else "float32",
            "loss_scaling": "dynamic" if loss_scaling else None,
            "device": str(device),
        },
    }


def mpiexec():
    """The MPI launcher beside this interpreter (a venv's `mpich` wheel puts it there), else the one on PATH."""
    beside = Path(sys.executable).parent / "mpiexec"
    return str(beside) if beside.exists() else shutil.which("mpiexec")


def launch(cfg, world):
    """`mpiexec -n world python -m runners.chainer.densenet121 CFG RESULT`: the processes run `worker`, rank 0 writes
    its result, which this process returns (so the record is still written by the runner that was started)."""
    missing = (
        "mpi4py is not installed"
        if importlib.util.find_spec("mpi4py") is None
        else "no mpiexec beside the interpreter or on PATH"
        if mpiexec() is None
        else None
    )
    if missing:
        message = f"data-parallel Chainer runs ChainerMN under MPI, and {missing} in {sys.prefix}: {MPI_NEEDED}"
        if cfg.device == "cpu":
            raise Skip(message)
        raise RuntimeError(message)  # a GPU image without MPI is a broken install
    env = dict(
        os.environ,
        PYTHONPATH=os.pathsep.join(
            filter(None, [str(Path(__file__).resolve().parents[2]), os.environ.get("PYTHONPATH")])
        ),
    )
    if cfg.device == "cpu":  # share the cores between the processes' BLAS threads
        count = str(threads.per_device(threads.rule(usable_cpus())["intra_op"], world))  # shared.threads' rule
        env.update(OMP_NUM_THREADS=count, OPENBLAS_NUM_THREADS=count, MKL_NUM_THREADS=count)
    with tempfile.TemporaryDirectory(prefix="chainermn-") as tmp:
        cfg_path, result_path = Path(tmp) / "cfg.pickle", Path(tmp) / "result.pickle"
        cfg_path.write_bytes(pickle.dumps(cfg))
        proc = subprocess.run(
            [mpiexec(), "-n", str(world), sys.executable, "-m", __spec__.name, str(cfg_path), str(result_path)],
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
        )
        print(proc.stdout, end="", flush=True)
        if proc.returncode != 0 or not result_path.exists():
            raise RuntimeError(f"mpiexec -n {world} exited with status {proc.returncode}:\n{proc.stderr[-3000:]}")
        return pickle.loads(result_path.read_bytes())


def main(cfg):
    world = max(cfg.gpus, 1)
    device = select_device(cfg)  # fail early when the GPUs or CuPy are not there
    set_precision(cfg.precision, device)  # and skip early where the precision is unsupported
    load_data(cfg)  # and on a damaged data file, with its own message
    return worker(cfg, 1) if world == 1 else launch(cfg, world)


if __name__ == "__main__":  # one MPI process of `launch`
    config_path, out_path = sys.argv[1:]
    config = pickle.loads(Path(config_path).read_bytes())
    result = worker(config, max(config.gpus, 1))
    if result is not None:
        Path(out_path).write_bytes(pickle.dumps(result))
