"""Chainer 7.8 · gru · embedding → GRU(100) → dense 2 on IMDB sentiment, Adam; L.NStepGRU is cuDNN's fused GRU
on the GPU."""

import chainer
import chainer.functions as F
import chainer.links as L
import numpy as np
from chainer import initializers, optimizers

from runners.chainer import (
    ADAM_EPSILON_HAT,
    count_parameters,
    select_device,
    set_precision,
    setup_optimizer,
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
    "use_cudnn": "auto",  # NStepGRU runs as one cuDNN RNN call on the GPU ('never' = Chainer's step-by-step loop)
    "type_check": False,  # skip Chainer's per-call shape/dtype checks: pure Python overhead on every function call
    "data_placement": params.DATA_PLACEMENT,  # host: send each batch to the device inside the clock (the rule for
    # every framework); device: the whole set on the device before the clock
}
# Chainer's Adam adds ε before the bias correction (runners.chainer.ADAM_EPSILON_HAT; recorded in `differences`).


# ==== Data ====
def load_data(cfg, device, placement):
    """IMDB as int32 token ids (N, maxlen), Keras convention, front-padded, and int32 labels; the training set in host
    memory or on `device` (`placement`). The test set stays on the host: evaluation is outside the clock."""
    p = cfg.params
    x_train, y_train, x_test, y_test = load_imdb(
        cfg.data, p["max_features"], p["maxlen"], p.get("train_samples"), p.get("test_samples")
    )
    if placement not in params.DATA_PLACEMENTS:
        raise ValueError(f"data_placement={placement!r}: choose one of {', '.join(params.DATA_PLACEMENTS)}")
    if placement == "device":
        x_train, y_train = device.send((x_train, y_train))
    return x_train, y_train, x_test, y_test


# ==== Model ====
# rosetta: model
class GRUClassifier(chainer.Chain):
    def __init__(
        self,
        max_features=SIZES["max_features"],
        embedding_dim=SIZES["embedding_dim"],
        hidden=SIZES["hidden"],
        num_classes=SIZES["num_classes"],
    ):
        super().__init__()
        with self.init_scope():
            self.embedding = L.EmbedID(max_features, embedding_dim, initialW=initializers.Uniform(0.05))
            # NStepGRU computes the cuDNN formulation (chainer/functions/rnn/n_step_gru.py): gates r, z, n with the
            # input weights w0, w1, w2 and biases b0, b1, b2, the recurrent weights w3, w4, w5 and biases b3, b4, b5,
            # and the reset gate applied after the recurrent matmul, n = tanh(w2·x + b2 + r ⊙ (w5·h + b5)):
            # exactly the canonical GRU.
            self.gru = L.NStepGRU(1, embedding_dim, hidden, dropout=0.0)
            self.fc = L.Linear(hidden, num_classes, initialW=initializers.GlorotUniform())
        # Keras' initializers, so every framework starts from the same distribution: Glorot over the stacked (r, z, n)
        # input kernel and an orthogonal stacked recurrent kernel (gain 1; Chainer's default is 1.1), zero biases.
        kernel = np.empty((3 * hidden, embedding_dim), np.float32)  # rows r, z, n
        recurrent = np.empty((3 * hidden, hidden), np.float32)
        initializers.GlorotUniform()(kernel)  # Chainer's initializers fill an array in place
        initializers.Orthogonal(scale=1.0)(recurrent)
        for j, w in enumerate([*np.split(kernel, 3), *np.split(recurrent, 3)]):
            getattr(self.gru[0], f"w{j}").array[...] = w

    # rosetta: model
    def forward(self, x):  # x: (N, T) int32 token ids
        xs = F.separate(self.embedding(x), axis=0)  # N sequences of (T, embedding_dim), NStepGRU's input
        hy, _ = self.gru(None, xs)  # hy: (layers, N, hidden), the state after the last step
        return self.fc(hy[-1])  # last time step only (front padding makes it real text)


def build_model(cfg=None):
    return GRUClassifier()


# rosetta: init
def load_canonical(model, weights):
    """Canonical GRU weights stack the gates (r, z, n) in rows; NStepGRU keeps one matrix per gate: r, z, n -> w0, w1,
    w2 (input) and w3, w4, w5 (recurrent), biases likewise b0..b2 and b3..b5. Dense (out, in) is Chainer's layout."""
    model.embedding.W.array[...] = weights["embedding.weight"]
    layer = model.gru[0]
    for kind, first in (("ih", 0), ("hh", 3)):
        for j, (w, b) in enumerate(
            zip(np.split(weights[f"gru.weight_{kind}"], 3), np.split(weights[f"gru.bias_{kind}"], 3)), start=first
        ):
            getattr(layer, f"w{j}").array[...] = w
            getattr(layer, f"b{j}").array[...] = b
    model.fc.W.array[...] = weights["fc.weight"]
    model.fc.b.array[...] = weights["fc.bias"]


def read_canonical(model):
    """load_canonical's inverse: NStepGRU's per-gate arrays stacked back in (r, z, n) rows."""
    host = lambda a: chainer.backends.cuda.to_cpu(a.array).copy()
    layer = model.gru[0]
    stack = lambda kind, first: np.concatenate([host(getattr(layer, f"{kind}{j}")) for j in range(first, first + 3)])
    return {
        "embedding.weight": host(model.embedding.W),
        "gru.weight_ih": stack("w", 0),
        "gru.weight_hh": stack("w", 3),
        "gru.bias_ih": stack("b", 0),
        "gru.bias_hh": stack("b", 3),
        "fc.weight": host(model.fc.W),
        "fc.bias": host(model.fc.b),
    }


def predict_logits(model, x):
    with chainer.using_config("train", False), chainer.using_config("enable_backprop", False):
        return model(np.asarray(x, np.int32)).array


# ==== Train step ====
# rosetta: optimizer
def make_optimizer(classifier, p, loss_scaling):
    return setup_optimizer(
        optimizers.Adam(alpha=p["lr"], beta1=p["beta1"], beta2=p["beta2"], eps=p["eps"]), classifier, loss_scaling
    )


# rosetta: train-step
def make_train_step(classifier, optimizer):
    def train_step(x, y):
        optimizer.update(classifier, x, y)  # clear grads, forward, backward, Adam update
        return classifier.loss.array  # the array, not the Variable (its graph); no sync

    return train_step


def train_steps(cfg, weights, x, y, steps):
    """The training-equivalence test's entry (tests/test_training_equivalence.py): from canonical `weights`, `steps`
    steps on the one batch (x, y) with main's model, optimizer and step; (each step's loss, weights after each)."""
    model = build_model()
    load_canonical(model, weights)
    classifier = L.Classifier(model, lossfun=F.softmax_cross_entropy)
    classifier.compute_accuracy = False
    train_step = make_train_step(classifier, make_optimizer(classifier, cfg.params, False))
    x, y = np.asarray(x, np.int32), np.asarray(y, np.int32)
    losses, after = [], []
    for _ in range(steps):
        losses.append(float(train_step(x, y)))
        after.append(read_canonical(model))
    return losses, after


# ==== Evaluate ====
# rosetta: evaluate
def evaluate(model, x_test, y_test, batch_size, device):
    logits = []
    with chainer.using_config("train", False), chainer.using_config("enable_backprop", False):
        for idx in batching.eval_batches(len(x_test), batch_size):
            logits.append(chainer.backends.cuda.to_cpu(model(device.send(x_test[idx])).array).astype(np.float32))
    return metrics.accuracy(np.concatenate(logits), y_test)


# ==== Main ====
def main(cfg):
    p, switches = cfg.params, resolve_switches(SWITCHES, cfg)
    device = select_device(cfg)
    loss_scaling = set_precision(cfg.precision, device)
    chainer.global_config.use_cudnn = switches["use_cudnn"]
    chainer.global_config.type_check = switches["type_check"]
    np.random.seed(0)  # Chainer's initializers draw from NumPy
    x_train, y_train, x_test, y_test = load_data(cfg, device, switches["data_placement"])
    model = build_model()
    load_canonical(model, canonical.init_weights("gru"))  # the same start in every framework (docs/design.md)
    model.to_device(device)
    # rosetta: loss
    classifier = L.Classifier(model, lossfun=F.softmax_cross_entropy)
    classifier.compute_accuracy = False  # accuracy is measured after training
    # rosetta: end
    optimizer = make_optimizer(classifier, p, loss_scaling)
    train_step = make_train_step(classifier, optimizer)

    losses = []  # every step's loss, on the device
    epoch_seconds, warmup, _, windows = timed_epochs(
        p["epochs"],
        lambda epoch: train_batches(x_train, y_train, p["batch_size"], epoch, device),
        lambda batch: train_step(*batch),
        sync(device),
        outputs=losses,
    )

    accuracy = evaluate(model, x_test, y_test, p["batch_size"], device)
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
            differences=[ADAM_EPSILON_HAT],
        ),
        "timing": train_timing(windows, warmup=warmup),
        "switches": {
            **switches,
            "cudnn_rnn": device.xp is not np and chainer.backends.cuda.should_use_cudnn(">=auto"),
            "dtype": "mixed16" if loss_scaling else "float32",
            "loss_scaling": "dynamic" if loss_scaling else None,
            "device": str(device),
        },
    }
