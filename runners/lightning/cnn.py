"""PyTorch Lightning 2.6 · cnn · a VGG-style CNN trained on CIFAR-10 with SGD + momentum by `trainer.fit`."""

import lightning as L
import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from runners.lightning import (
    AMP_HOST_SYNC,
    EpochTimer,
    count_parameters,
    fit_steps,
    set_precision,
    test_loader,
    timing_of,
    train_loader,
    trainer,
)
from shared import batching, canonical, metrics, params
from shared.datasets import load_cifar10
from shared.runner import resolve_switches
from shared.timing import train_metrics, train_timing

# ==== Config ====
# Hyperparameters come from shared/params.py through cfg.params (epochs, batch_size, lr, momentum, samples).
SWITCHES = {
    "cudnn_benchmark": True,  # Trainer(benchmark=True): autotune the fastest conv algorithm (seed lesson CNN 3)
    "channels_last": False,  # NHWC memory format; NCHW is cuDNN's classic layout (lesson 2), NHWC helps tensor cores
    "compile": False,  # torch.compile the LightningModule before fit (Lightning's docs); compile time is warm-up
    "fused_optimizer": False,  # the SGD update of every parameter in one fused kernel (fused=True)
    "dropout": True,  # off only in the training-equivalence test (its step must be deterministic)
    "data_placement": params.DATA_PLACEMENT,  # host: the loader's batches copied inside the clock (every framework's
    # rule); device: the whole set on the device before the clock (lesson 13)
}
TUNED = {  # tuning=tuned: Lightning's documented speed-ups over torch (docs/tuned.md), same work
    "compile": True,  # Inductor's fused kernels for the module's forward and backward
    "fused_optimizer": True,  # also takes GradScaler's inf check on the device: no host read per amp step
    "channels_last": True,  # NHWC for the convolutions and their input: tensor-core and oneDNN kernels' layout
}


# ==== Data ====
def load_data(cfg, device, placement):
    """CIFAR-10 as float32 NCHW tensors and int64 labels, training set in host memory or on `device` (`placement`).
    The test set stays on the host: evaluation is outside the clock and Lightning copies its batches."""
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


def build_model(cfg=None, dropout=True, fused=False, memory_format=torch.contiguous_format):
    return LitCNN(params.CNN if cfg is None else cfg.params, dropout, fused, memory_format)


# rosetta: init
def load_canonical(model, weights):
    """Canonical weights (conv OIHW, dense (out, in), names conv1..fc2) are PyTorch's own layout and names."""
    model.net.load_state_dict({name: torch.from_numpy(np.asarray(w)) for name, w in weights.items()})


def read_canonical(net):
    return {name: t.detach().cpu().numpy().copy() for name, t in net.state_dict().items()}


def predict_logits(model, x):
    model.eval()
    with torch.inference_mode():
        return model(torch.as_tensor(x)).numpy()


# ==== Train step ====
# Lightning owns the loop: `trainer.fit` zeroes the gradients, calls training_step, runs backward and the optimizer's
# step under the Trainer's precision (autocast; GradScaler for "16-mixed"). The LightningModule says what a step is.
class LitCNN(L.LightningModule):
    """The network with its training step, optimizer and prediction: what `trainer.fit` and `trainer.predict` run."""

    def __init__(self, p=params.CNN, dropout=True, fused=False, memory_format=torch.contiguous_format):
        super().__init__()
        self.p, self.fused, self.memory_format = p, fused, memory_format
        self.net = CNN(dropout=dropout)

    def forward(self, x):
        return self.net(x)

    # rosetta: train-step
    def training_step(self, batch, batch_idx):
        x, y = batch
        x = x.contiguous(memory_format=self.memory_format)  # a no-op unless channels_last
        # rosetta: loss
        return F.cross_entropy(self(x), y)  # integer labels, no one-hot (lesson 11); stays on the device

    # rosetta: optimizer
    def configure_optimizers(self):
        return torch.optim.SGD(
            self.parameters(),
            lr=self.p["lr"],
            momentum=self.p["momentum"],  # plain momentum (lesson 8)
            fused=self.fused or None,
        )

    def predict_step(self, batch, batch_idx):
        (x,) = batch
        return self(x)


def train_step(trainer, model, loader):
    """Lightning's loop is the train step: `fit` runs the module's training_step on every batch of every epoch (its
    EpochTimer callback keeps the clock), as Keras' `fit` does."""
    trainer.fit(model, loader)


def prepare(model, switches):
    """What the switches do to the module before fit: NHWC weights, and torch.compile (Lightning's docs: compile the
    LightningModule, then pass the compiled module to `fit`; Lightning unwraps it and runs the compiled forward)."""
    model = model.to(memory_format=model.memory_format)
    return torch.compile(model) if switches["compile"] else model


def train_steps(cfg, weights, x, y, steps):
    """The training-equivalence test's entry (tests/test_training_equivalence.py): from canonical `weights`, `steps`
    steps of `trainer.fit` on the one batch (x, y) with main's module, optimizer and step (a tuned cell's switches
    included); (each step's loss, weights after each)."""
    switches = resolve_switches(SWITCHES, cfg, TUNED)
    memory_format = torch.channels_last if switches["channels_last"] else torch.contiguous_format
    model = build_model(cfg, switches["dropout"], switches["fused_optimizer"], memory_format)
    load_canonical(model, weights)
    x, y = torch.as_tensor(x), torch.as_tensor(y).long()
    return fit_steps(prepare(model, switches), x, y, steps, read_canonical)


# ==== Evaluate ====
# rosetta: evaluate
def evaluate(trainer, model, x_test, y_test, batch_size):
    """Test accuracy from `trainer.predict` (eval mode, so dropout off (lesson 4); inference mode; the cell's
    precision), which hands each batch's logits back on the host."""
    logits = trainer.predict(model, test_loader(x_test, batch_size))
    return metrics.accuracy(torch.cat(logits).float().numpy(), y_test.numpy())


# ==== Main ====
def main(cfg):
    p, switches = cfg.params, resolve_switches(SWITCHES, cfg, TUNED)
    precision = set_precision(cfg)
    timer = EpochTimer()
    fit = trainer(cfg, precision, [timer], max_epochs=p["epochs"], benchmark=switches["cudnn_benchmark"])
    torch.manual_seed(0)
    device = fit.strategy.root_device
    x_train, y_train, x_test, y_test = load_data(cfg, device, switches["data_placement"])
    memory_format = torch.channels_last if switches["channels_last"] else torch.contiguous_format
    model = build_model(cfg, switches["dropout"], switches["fused_optimizer"], memory_format)
    load_canonical(model, canonical.init_weights("cnn"))  # the same start in every framework (docs/design.md)
    # rosetta: end

    train_step(fit, prepare(model, switches), train_loader(x_train, y_train, p["batch_size"]))
    epoch_seconds, warmup, windows, losses = timing_of(fit)

    accuracy = evaluate(fit, model, x_test, y_test, p["batch_size"])
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
            **metrics.loss_metrics(losses, steps),
            epochs=p["epochs"],
            train_samples=len(x_train),
            test_samples=len(x_test),
            data_placement=switches["data_placement"],
            differences=[AMP_HOST_SYNC] if precision == "16-mixed" and not switches["fused_optimizer"] else [],
        ),
        "timing": train_timing(windows, warmup=warmup),
        "switches": {
            **switches,
            "memory_format": "NHWC" if switches["channels_last"] else "NCHW",
            "trainer_precision": precision,
            "device": str(device),
        },
    }
