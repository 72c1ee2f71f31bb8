"""PyTorch Lightning 2.6 · gru · embedding → GRU(100) → dense 2 on IMDB sentiment, Adam, trained by `trainer.fit`;
nn.GRU is cuDNN's fused GRU on a GPU."""

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
from shared.datasets import load_imdb
from shared.runner import resolve_switches
from shared.timing import train_metrics, train_timing

# ==== Config ====
SIZES = params.GRU  # the canonical sizes (max_features, embedding_dim, hidden, maxlen, num_classes)
# Hyperparameters come from shared/params.py through cfg.params (max_features, maxlen, hidden, epochs, lr, …).
SWITCHES = {
    "cudnn_benchmark": True,  # Trainer(benchmark=True): cuDNN picks its fastest kernels for the fixed (batch, 150)
    "compile": False,  # torch.compile the LightningModule before fit (the cuDNN GRU itself stays one fused call)
    "fused_optimizer": False,  # the Adam update of every parameter in one fused kernel (fused=True)
    "data_placement": params.DATA_PLACEMENT,  # host: the loader's batches copied inside the clock (every framework's
    # rule); device: the whole set on the device before the clock
}
TUNED = {  # tuning=tuned: Lightning's documented speed-ups over torch (docs/tuned.md), same work
    "compile": True,  # Inductor's fused kernels around the GRU
    "fused_optimizer": True,  # also takes GradScaler's inf check on the device: no host read per amp step
}


# ==== Data ====
def load_data(cfg, device, placement):
    """IMDB as int64 token ids (N, maxlen), Keras convention, front-padded; the training set in host memory or on
    `device` (`placement`). The test set stays on the host: evaluation is outside the clock."""
    p = cfg.params
    x_train, y_train, x_test, y_test = load_imdb(
        cfg.data, p["max_features"], p["maxlen"], p.get("train_samples"), p.get("test_samples")
    )
    if placement not in params.DATA_PLACEMENTS:
        raise ValueError(f"data_placement={placement!r}: choose one of {', '.join(params.DATA_PLACEMENTS)}")
    train_device = device if placement == "device" else "cpu"
    to = lambda a, where="cpu": torch.as_tensor(a, dtype=torch.long, device=where)
    return to(x_train, train_device), to(y_train, train_device), to(x_test), to(y_test)


# ==== Model ====
# rosetta: model
class GRUClassifier(nn.Module):
    def __init__(
        self,
        max_features=SIZES["max_features"],
        embedding_dim=SIZES["embedding_dim"],
        hidden=SIZES["hidden"],
        num_classes=SIZES["num_classes"],
    ):
        super().__init__()
        self.embedding = nn.Embedding(max_features, embedding_dim)
        # PyTorch's GRU is the cuDNN formulation: gates (r, z, n), reset applied after the recurrent matmul,
        # separate input and hidden biases — exactly the canonical GRU, so no conversion is needed.
        self.gru = nn.GRU(embedding_dim, hidden, batch_first=True)
        self.fc = nn.Linear(hidden, num_classes)
        # No init here: main loads the shared canonical start (Keras' GRU initializers, drawn once in NumPy).

    # rosetta: model
    def forward(self, x):  # x: (N, T) token ids
        out, _ = self.gru(self.embedding(x))  # (N, T, hidden)
        return self.fc(out[:, -1])  # last time step only (front padding makes it real text)


def build_model(cfg=None, fused=False):
    return LitGRU(params.GRU if cfg is None else cfg.params, fused)


# rosetta: init
CANONICAL_NAMES = {
    "embedding.weight": "embedding.weight",
    "gru.weight_ih": "gru.weight_ih_l0",
    "gru.weight_hh": "gru.weight_hh_l0",
    "gru.bias_ih": "gru.bias_ih_l0",
    "gru.bias_hh": "gru.bias_hh_l0",
    "fc.weight": "fc.weight",
    "fc.bias": "fc.bias",
}


# rosetta: init
def load_canonical(model, weights):
    model.net.load_state_dict({CANONICAL_NAMES[name]: torch.from_numpy(np.asarray(w)) for name, w in weights.items()})


def read_canonical(net):
    state = net.state_dict()
    return {name: state[ours].detach().cpu().numpy().copy() for name, ours in CANONICAL_NAMES.items()}


def predict_logits(model, x):
    model.eval()
    with torch.inference_mode():
        return model(torch.as_tensor(x, dtype=torch.long)).numpy()


# ==== Train step ====
# Lightning owns the loop: `trainer.fit` zeroes the gradients, calls training_step, runs backward and the optimizer's
# step under the Trainer's precision (autocast; GradScaler for "16-mixed"). The LightningModule says what a step is.
class LitGRU(L.LightningModule):
    """The network with its training step, optimizer and prediction: what `trainer.fit` and `trainer.predict` run."""

    def __init__(self, p=params.GRU, fused=False):
        super().__init__()
        self.p, self.fused = p, fused
        self.net = GRUClassifier()

    def forward(self, x):
        return self.net(x)

    # rosetta: train-step
    def training_step(self, batch, batch_idx):
        x, y = batch
        # rosetta: loss
        return F.cross_entropy(self(x), y)  # no .item(): the step never waits for the device

    # rosetta: optimizer
    def configure_optimizers(self):
        p = self.p
        return torch.optim.Adam(
            self.parameters(), lr=p["lr"], betas=(p["beta1"], p["beta2"]), eps=p["eps"], fused=self.fused or None
        )

    def predict_step(self, batch, batch_idx):
        (x,) = batch
        return self(x)


def train_step(trainer, model, loader):
    """Lightning's loop is the train step: `fit` runs the module's training_step on every batch of every epoch (its
    EpochTimer callback keeps the clock), as Keras' `fit` does."""
    trainer.fit(model, loader)


def prepare(model, switches):
    """torch.compile as Lightning's docs do it: compile the LightningModule, pass the compiled module to `fit`."""
    return torch.compile(model) if switches["compile"] else model


def train_steps(cfg, weights, x, y, steps):
    """The training-equivalence test's entry (tests/test_training_equivalence.py): from canonical `weights`, `steps`
    steps of `trainer.fit` on the one batch (x, y) with main's module, optimizer and step (a tuned cell's switches
    included); (each step's loss, weights after each)."""
    switches = resolve_switches(SWITCHES, cfg, TUNED)
    model = build_model(cfg, switches["fused_optimizer"])
    load_canonical(model, weights)
    x, y = torch.as_tensor(x, dtype=torch.long), torch.as_tensor(y).long()
    return fit_steps(prepare(model, switches), x, y, steps, read_canonical)


# ==== Evaluate ====
# rosetta: evaluate
def evaluate(trainer, model, x_test, y_test, batch_size):
    """Test accuracy from `trainer.predict` (eval and inference mode, the cell's precision), which hands each batch's
    logits back on the host."""
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
    model = build_model(cfg, switches["fused_optimizer"])
    load_canonical(model, canonical.init_weights("gru"))  # the same start in every framework (docs/design.md)
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
            "cudnn_rnn": device.type == "cuda" and torch.backends.cudnn.enabled,
            "trainer_precision": precision,
            "device": str(device),
        },
    }
