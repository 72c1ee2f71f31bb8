"""PyTorch 2.14 · gru · embedding → GRU(100) → dense 2 on IMDB sentiment, Adam; nn.GRU is cuDNN's fused GRU on GPU."""

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
from shared.datasets import load_imdb
from shared.runner import resolve_switches
from shared.timing import timed_epochs, train_metrics, train_timing

# ==== Config ====
SIZES = params.GRU  # the canonical sizes (max_features, embedding_dim, hidden, maxlen, num_classes)
# Hyperparameters come from shared/params.py through cfg.params (max_features, maxlen, hidden, epochs, lr, …).
SWITCHES = {
    "cudnn_benchmark": True,  # let cuDNN pick its fastest kernels for the fixed (batch, 150) shape
    "compile": False,  # torch.compile the train step (the cuDNN GRU itself stays one fused call)
    "fused_optimizer": False,  # the Adam update of every parameter in one fused kernel (fused=True)
    "prefetch": False,  # GPU: batch i+1 copied from pinned memory on a side stream while step i runs
    "data_placement": params.DATA_PLACEMENT,  # host: copy each batch inside the clock (the rule for every framework);
    # device: the whole set on the device before the clock
}
TUNED = {  # tuning=tuned: PyTorch's own documented fast path (docs/tuned.md), same work
    "compile": True,  # Inductor's fused kernels around the GRU; on a GPU the step as a CUDA graph
    "fused_optimizer": True,  # also takes GradScaler's inf check on the device: no host read per amp step
    "prefetch": True,  # the copy engine beside the SMs (no effect on the CPU, where batches are gathered)
}


# ==== Data ====
def load_data(cfg, device, placement):
    """IMDB as int64 token ids (N, maxlen), Keras convention, front-padded; the training set in host memory or on
    `device` (`placement`). The test set stays on the host: evaluation is outside the clock and copies its batches."""
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


def build_model(cfg=None):
    return GRUClassifier()


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
    model.load_state_dict({CANONICAL_NAMES[name]: torch.from_numpy(np.asarray(w)) for name, w in weights.items()})


def read_canonical(model):
    state = model.state_dict()
    return {name: state[ours].detach().cpu().numpy().copy() for name, ours in CANONICAL_NAMES.items()}


def predict_logits(model, x):
    model.eval()
    with torch.inference_mode():
        return model(torch.as_tensor(x, dtype=torch.long)).numpy()


# ==== Train step ====
# rosetta: optimizer
def make_optimizer(model, p, fused=False):
    return torch.optim.Adam(
        model.parameters(), lr=p["lr"], betas=(p["beta1"], p["beta2"]), eps=p["eps"], fused=fused or None
    )


# rosetta: train-step
def make_train_step(model, optimizer, autocast, scaler):
    def train_step(x, y):
        optimizer.zero_grad(set_to_none=True)
        with autocast():
            # rosetta: loss
            loss = F.cross_entropy(model(x), y)
        if scaler:
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
        else:
            loss.backward()
            optimizer.step()
        return loss.detach()  # no .item(): the step never waits for the device

    return train_step


def train_steps(cfg, weights, x, y, steps):
    """The training-equivalence test's entry (tests/test_training_equivalence.py): from canonical `weights`, `steps`
    steps on the one batch (x, y) with main's model, optimizer and step (a tuned cell's switches included); (each
    step's loss, weights after each)."""
    switches = resolve_switches(SWITCHES, cfg, TUNED)
    model = build_model()
    load_canonical(model, weights)
    model.train()
    train_step = make_train_step(
        model, make_optimizer(model, cfg.params, switches["fused_optimizer"]), contextlib.nullcontext, None
    )
    if switches["compile"]:
        train_step = compiled(train_step, compile_mode(torch.device("cpu")))
    x, y = torch.as_tensor(x, dtype=torch.long), torch.as_tensor(y).long()
    losses, after = [], []
    for _ in range(steps):
        losses.append(train_step(x, y).item())
        after.append(read_canonical(model))
    return losses, after


# ==== Evaluate ====
# rosetta: evaluate
def evaluate(model, x_test, y_test, batch_size, device, autocast):
    model.eval()
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
    model = build_model()
    load_canonical(model, canonical.init_weights("gru"))  # the same start in every framework (docs/design.md)
    model = model.to(device)
    # rosetta: end
    optimizer = make_optimizer(model, p, switches["fused_optimizer"])
    train_step, batches, mode, prefetch = fast_path(
        make_train_step(model, optimizer, autocast, scaler), switches, x_train, y_train, p["batch_size"], device
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
            "cudnn_rnn": device.type == "cuda" and torch.backends.cudnn.enabled,
            "compile_mode": mode,
            "prefetch": prefetch,
            "device": str(device),
        },
    }
