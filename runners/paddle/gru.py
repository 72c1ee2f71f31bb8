"""PaddlePaddle 3.3 · gru · embedding → GRU(100) → dense 2 on IMDB sentiment, Adam; paddle.nn.GRU is cuDNN's on GPU."""

import contextlib

import numpy as np
import paddle
import paddle.nn.functional as F
from paddle import nn

from runners.paddle import (
    AMP_HOST_SYNC,
    count_parameters,
    load_state,
    read_state,
    select_device,
    set_precision,
    sync,
    train_batches,
)
from shared import batching, canonical, metrics, params
from shared.datasets import load_imdb
from shared.runner import resolve_switches
from shared.timing import timed_epochs, train_metrics, train_timing

# ==== Config ====
SIZES = params.GRU  # the canonical sizes (max_features, embedding_dim, hidden, maxlen, num_classes)
# Hyperparameters come from shared/params.py through cfg.params (max_features, maxlen, hidden, epochs, lr, …).
SWITCHES = {
    "to_static": False,  # paddle.jit.to_static on the model: forward and backward run as one static program
    "multi_tensor": False,  # the Adam update of every parameter in one fused call (use_multi_tensor=True)
    "data_placement": params.DATA_PLACEMENT,  # host: copy each batch inside the clock (the rule for every framework);
    # device: the whole set on the device before the clock
}
TUNED = {  # tuning=tuned: Paddle's own documented fast path (docs/tuned.md), same work
    "to_static": True,  # dynamic-to-static: the program is built once and run by Paddle's executor (warm-up)
    "multi_tensor": True,  # one fused optimizer call instead of one per parameter
}


# ==== Data ====
def load_data(cfg, placement):
    """IMDB as int64 token ids (N, maxlen), Keras convention, front-padded; the training set in host memory (NumPy)
    or as tensors on the current place (`placement`). The test set stays on the host: evaluation is outside the
    clock and copies its batches."""
    p = cfg.params
    x_train, y_train, x_test, y_test = load_imdb(
        cfg.data, p["max_features"], p["maxlen"], p.get("train_samples"), p.get("test_samples")
    )
    if placement not in params.DATA_PLACEMENTS:
        raise ValueError(f"data_placement={placement!r}: choose one of {', '.join(params.DATA_PLACEMENTS)}")
    x_train, y_train, x_test, y_test = (np.asarray(a, np.int64) for a in (x_train, y_train, x_test, y_test))
    if placement == "device":
        x_train, y_train = paddle.to_tensor(x_train), paddle.to_tensor(y_train)
    return x_train, y_train, x_test, y_test


# ==== Model ====
# rosetta: model
class GRUClassifier(nn.Layer):
    def __init__(
        self,
        max_features=SIZES["max_features"],
        embedding_dim=SIZES["embedding_dim"],
        hidden=SIZES["hidden"],
        num_classes=SIZES["num_classes"],
    ):
        super().__init__()
        self.embedding = nn.Embedding(max_features, embedding_dim)  # dense gradient (sparse=False), as canonical Adam
        # Paddle's GRU is the cuDNN formulation: gates (r, z, c), the reset gate applied after the recurrent matmul
        # (c = tanh(W_ic x + b_ic + r * (W_hc h + b_hc))), separate input and hidden biases, h = z * h' + (1 - z) * c:
        # exactly the canonical GRU, so the weights load as they are.
        self.gru = nn.GRU(embedding_dim, hidden)  # batch first (time_major=False)
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
    """The GRU's arrays keep their canonical (3·hidden, in) layout; only the dense kernel is transposed."""
    load_state(model, weights, rename=CANONICAL_NAMES.__getitem__)


def read_canonical(model):
    return read_state(model, CANONICAL_NAMES, rename=CANONICAL_NAMES.__getitem__)


def predict_logits(model, x):
    model.eval()
    with paddle.no_grad():
        return model(paddle.to_tensor(np.asarray(x, np.int64))).numpy()


# ==== Train step ====
# rosetta: optimizer
def make_optimizer(model, p, multi_tensor=False):
    # Paddle's Adam adds ε after the bias correction, as the paper and PyTorch do (its kernel scales ε by
    # sqrt(1 − β2^t) and folds the correction into the rate: the same update).
    return paddle.optimizer.Adam(
        learning_rate=p["lr"],
        beta1=p["beta1"],
        beta2=p["beta2"],
        epsilon=p["eps"],
        parameters=model.parameters(),
        use_multi_tensor=multi_tensor,
    )


# rosetta: train-step
def make_train_step(model, optimizer, autocast, scaler):
    def train_step(x, y):
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
        optimizer.clear_grad()
        return loss.detach()  # no float(): the step never waits for the device

    return train_step


def train_steps(cfg, weights, x, y, steps):
    """The training-equivalence test's entry (tests/test_training_equivalence.py): from canonical `weights`, `steps`
    steps on the one batch (x, y) with main's model, optimizer and step (a tuned cell's switches included); (each
    step's loss, weights after each)."""
    switches = resolve_switches(SWITCHES, cfg, TUNED)
    paddle.set_device("cpu")
    model = build_model()
    load_canonical(model, weights)
    model.train()
    optimizer = make_optimizer(model, cfg.params, switches["multi_tensor"])
    if switches["to_static"]:
        model = paddle.jit.to_static(model)
    train_step = make_train_step(model, optimizer, contextlib.nullcontext, None)
    x, y = paddle.to_tensor(np.asarray(x, np.int64)), paddle.to_tensor(np.asarray(y, np.int64))
    losses, after = [], []
    for _ in range(steps):
        losses.append(float(train_step(x, y)))
        after.append(read_canonical(model))
    return losses, after


# ==== Evaluate ====
# rosetta: evaluate
def evaluate(model, x_test, y_test, batch_size, autocast):
    model.eval()
    logits = []
    with paddle.no_grad(), autocast():
        for idx in batching.eval_batches(len(x_test), batch_size):
            logits.append(model(paddle.to_tensor(x_test[idx])).astype("float32").numpy())
    model.train()
    return metrics.accuracy(np.concatenate(logits), y_test)


# ==== Main ====
def main(cfg):
    p, switches = cfg.params, resolve_switches(SWITCHES, cfg, TUNED)
    place = select_device(cfg)
    autocast, scaler = set_precision(cfg.precision, place)
    paddle.seed(0)
    x_train, y_train, x_test, y_test = load_data(cfg, switches["data_placement"])
    model = build_model()
    load_canonical(model, canonical.init_weights("gru"))  # the same start in every framework (docs/design.md)
    # rosetta: end
    optimizer = make_optimizer(model, p, switches["multi_tensor"])
    if switches["to_static"]:
        model = paddle.jit.to_static(model)  # traced on the first step: compile time is reported as warm-up
    train_step = make_train_step(model, optimizer, autocast, scaler)

    model.train()
    losses = []  # every step's loss, left on the device
    epoch_seconds, warmup, _, windows = timed_epochs(
        p["epochs"],
        lambda epoch: train_batches(x_train, y_train, p["batch_size"], epoch),
        lambda batch: train_step(*batch),
        sync(place),
        outputs=losses,
    )

    accuracy = evaluate(model, x_test, y_test, p["batch_size"], autocast)
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
            **metrics.loss_metrics([float(loss) for loss in losses], steps),
            epochs=p["epochs"],
            train_samples=len(x_train),
            test_samples=len(x_test),
            data_placement=switches["data_placement"],
            differences=[AMP_HOST_SYNC] if scaler else [],
        ),
        "timing": train_timing(windows, warmup=warmup),
        "switches": {**switches, "cudnn_rnn": place.is_gpu_place(), "device": str(place)},
    }
