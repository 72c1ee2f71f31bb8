"""PyTorch 2.14 · cnn · a VGG-style CNN trained on CIFAR-10 with SGD + momentum, eager mode (torch.compile optional)."""

import contextlib

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from runners.pytorch import (
    AMP_HOST_SYNC,
    compile_mode,
    compiled,
    count_parameters,
    fast_path,
    select_device,
    set_precision,
    sync,
)
from shared import batching, canonical, metrics, params
from shared.datasets import load_cifar10
from shared.runner import resolve_switches
from shared.timing import timed_epochs, train_metrics, train_timing

# ==== Config ====
# Hyperparameters come from shared/params.py through cfg.params (epochs, batch_size, lr, momentum, samples).
SWITCHES = {
    "cudnn_benchmark": True,  # autotune the fastest conv algorithm for our fixed shapes (seed lesson CNN 3)
    "channels_last": False,  # NHWC memory format; NCHW is cuDNN's classic layout (lesson 2), NHWC helps tensor cores
    "compile": False,  # torch.compile the train step; compile time is reported as warm-up
    "fused_optimizer": False,  # the SGD update of every parameter in one fused kernel (fused=True)
    "prefetch": False,  # GPU: batch i+1 copied from pinned memory on a side stream while step i runs
    "dropout": True,  # off only in the training-equivalence test (its step must be deterministic)
    "data_placement": params.DATA_PLACEMENT,  # host: copy each batch inside the clock (the rule for every framework);
    # device: the whole set on the device before the clock (lesson 13)
}
TUNED = {  # tuning=tuned: PyTorch's own documented fast path (docs/tuned.md), same work
    "compile": True,  # Inductor's fused kernels; on a GPU mode="reduce-overhead": the step as a CUDA graph
    "fused_optimizer": True,  # also takes GradScaler's inf check on the device: no host read per amp step
    "channels_last": True,  # NHWC for the convolutions and their input: tensor-core and oneDNN kernels' layout
    "prefetch": True,  # the copy engine beside the SMs (no effect on the CPU, where batches are gathered)
}


# ==== Data ====
def load_data(cfg, device, placement):
    """CIFAR-10 as float32 NCHW tensors and int64 labels, training set in host memory or on `device` (`placement`).
    The test set stays on the host: evaluation is outside the clock and copies its batches."""
    p = cfg.params
    x_train, y_train, x_test, y_test = load_cifar10(cfg.data, p.get("train_samples"), p.get("test_samples"))
    if placement not in params.DATA_PLACEMENTS:
        raise ValueError(f"data_placement={placement!r}: choose one of {', '.join(params.DATA_PLACEMENTS)}")
    train_device = device if placement == "device" else "cpu"
    x_train, y_train = torch.as_tensor(x_train, device=train_device), torch.as_tensor(y_train, device=train_device)
    return x_train, y_train.long(), torch.as_tensor(x_test), torch.as_tensor(y_test).long()


# ==== Model ====
# rosetta: model
class CNN(nn.Module):
    def __init__(self, num_classes=10, dropout=True):
        super().__init__()
        self.rates = (0.25, 0.25, 0.5) if dropout else (0.0, 0.0, 0.0)
        self.conv1 = nn.Conv2d(3, 50, 3, padding="same")
        self.conv2 = nn.Conv2d(50, 50, 3, padding="same")
        self.conv3 = nn.Conv2d(50, 100, 3, padding="same")
        self.conv4 = nn.Conv2d(100, 100, 3, padding="same")
        self.fc1 = nn.Linear(100 * 8 * 8, 512)
        self.fc2 = nn.Linear(512, num_classes)
        # No init here: main loads the shared canonical start (Glorot uniform, zero biases; lesson 7), drawn in NumPy.

    # rosetta: model
    def forward(self, x):  # x: (N, 3, 32, 32)
        x = F.relu(self.conv1(x))
        x = F.relu(F.max_pool2d(self.conv2(x), 2))  # ReLU after pooling: 4x fewer elements (lesson 10)
        x = F.dropout(x, self.rates[0], self.training)  # (N, 50, 16, 16)
        x = F.relu(self.conv3(x))
        x = F.relu(F.max_pool2d(self.conv4(x), 2))
        x = F.dropout(x, self.rates[1], self.training)  # (N, 100, 8, 8)
        x = F.relu(self.fc1(torch.flatten(x, 1)))  # flatten C·H·W = 6400, the canonical order
        x = F.dropout(x, self.rates[2], self.training)
        return self.fc2(x)  # logits; softmax lives in the loss (lesson 6)


def build_model(cfg=None, dropout=True):
    return CNN(dropout=dropout)


# rosetta: init
def load_canonical(model, weights):
    """Canonical weights (conv OIHW, dense (out, in), names conv1..fc2) are PyTorch's own layout and names."""
    model.load_state_dict({name: torch.from_numpy(np.asarray(w)) for name, w in weights.items()})


def read_canonical(model):
    return {name: t.detach().cpu().numpy().copy() for name, t in model.state_dict().items()}


def predict_logits(model, x):
    model.eval()
    with torch.inference_mode():
        return model(torch.as_tensor(x)).numpy()


# ==== Train step ====
# rosetta: optimizer
def make_optimizer(model, p, fused=False):
    return torch.optim.SGD(
        model.parameters(),
        lr=p["lr"],
        momentum=p["momentum"],  # plain momentum (lesson 8)
        fused=fused or None,
    )


# rosetta: train-step
def make_train_step(model, optimizer, autocast, scaler, memory_format=torch.contiguous_format):
    def train_step(x, y):
        x = x.contiguous(memory_format=memory_format)  # a no-op unless channels_last
        optimizer.zero_grad(set_to_none=True)
        with autocast():
            # rosetta: loss
            loss = F.cross_entropy(model(x), y)  # integer labels, no one-hot (lesson 11)
        if scaler:  # amp: scale the loss so fp16 gradients don't underflow
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
        else:
            loss.backward()
            optimizer.step()
        return loss.detach()  # stays on the device: no host sync inside the step

    return train_step


def train_steps(cfg, weights, x, y, steps):
    """The training-equivalence test's entry (tests/test_training_equivalence.py): from canonical `weights`, `steps`
    steps on the one batch (x, y) with main's model, optimizer and step (a tuned cell's switches included); (each
    step's loss, weights after each)."""
    switches = resolve_switches(SWITCHES, cfg, TUNED)
    memory_format = torch.channels_last if switches["channels_last"] else torch.contiguous_format
    model = build_model(dropout=switches["dropout"])
    load_canonical(model, weights)
    model = model.to(memory_format=memory_format)
    model.train()
    train_step = make_train_step(
        model,
        make_optimizer(model, cfg.params, switches["fused_optimizer"]),
        contextlib.nullcontext,
        None,
        memory_format,
    )
    if switches["compile"]:
        train_step = compiled(train_step, compile_mode(torch.device("cpu")))
    x, y = torch.as_tensor(x), torch.as_tensor(y).long()
    losses, after = [], []
    for _ in range(steps):
        losses.append(train_step(x, y).item())
        after.append(read_canonical(model))
    return losses, after


# ==== Evaluate ====
# rosetta: evaluate
def evaluate(model, x_test, y_test, batch_size, device, autocast):
    model.eval()  # dropout off in evaluation (lesson 4)
    logits = []
    with torch.inference_mode(), autocast():
        for idx in batching.eval_batches(len(x_test), batch_size):
            logits.append(model(x_test[idx].to(device)).float().cpu())
    model.train()
    return metrics.accuracy(torch.cat(logits).numpy(), y_test.numpy())


# ==== Main ====
def main(cfg):
    p, switches = cfg.params, resolve_switches(SWITCHES, cfg, TUNED)
    device = select_device(cfg)
    autocast, scaler = set_precision(cfg.precision, device)
    torch.backends.cudnn.benchmark = switches["cudnn_benchmark"]
    torch.manual_seed(0)
    x_train, y_train, x_test, y_test = load_data(cfg, device, switches["data_placement"])
    memory_format = torch.channels_last if switches["channels_last"] else torch.contiguous_format
    model = build_model(dropout=switches["dropout"])
    load_canonical(model, canonical.init_weights("cnn"))  # the same start in every framework (docs/design.md)
    model = model.to(device, memory_format=memory_format)
    # rosetta: end
    optimizer = make_optimizer(model, p, switches["fused_optimizer"])
    train_step, batches, mode, prefetch = fast_path(
        make_train_step(model, optimizer, autocast, scaler, memory_format),
        switches,
        x_train,
        y_train,
        p["batch_size"],
        device,
    )

    model.train()
    losses = []  # every step's loss, left on the device
    epoch_seconds, warmup, _, windows = timed_epochs(
        p["epochs"], batches, lambda batch: train_step(*batch), sync(device), outputs=losses
    )

    accuracy = evaluate(model, x_test, y_test, p["batch_size"], device, autocast)
    steps = batching.steps_per_epoch(len(x_train), p["batch_size"])
    return {
        "metrics": train_metrics(
            epoch_seconds,
            steps * p["batch_size"],
            warmup=warmup,
            steps=steps,
            windows=windows,
            accuracy=accuracy,
            init="canonical",
            parameters=count_parameters(model),
            **metrics.loss_metrics([loss.item() for loss in losses], steps),
            epochs=p["epochs"],
            train_samples=len(x_train),
            test_samples=len(x_test),
            data_placement=switches["data_placement"],
            differences=[AMP_HOST_SYNC] if scaler and not switches["fused_optimizer"] else [],
        ),
        "timing": train_timing(windows, warmup=warmup),
        "switches": {
            **switches,
            "memory_format": "NHWC" if switches["channels_last"] else "NCHW",
            "compile_mode": mode,
            "prefetch": prefetch,
            "device": str(device),
        },
    }
