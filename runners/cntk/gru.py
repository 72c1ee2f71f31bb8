"""CNTK 2.7 · gru · embedding → GRU(100) → dense 2 on IMDB sentiment, trained by a `C.Trainer` with Adam; the GRU is
cuDNN's fused RNN (`C.optimized_rnnstack`) on the GPU and `Recurrence(GRU)` on the CPU."""

import cntk as C
import numpy as np

from runners.cntk import (
    ADAM_EPSILON_HAT,
    LOSS_HOST_READ,
    check_precision,
    count_parameters,
    is_gpu,
    one_hot,
    select_device,
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
    "cudnn_rnn": True,  # GPU cells: C.optimized_rnnstack, one cuDNN call for the whole sequence (the seed's
    # CUDNN=True, RNN lesson 1); it has no CPU kernel, so CPU cells always run Recurrence(GRU)
}
# The two GRUs compute different functions (tests/test_equivalence.py's GRU_VARIANT names the CPU one):
# - C.optimized_rnnstack(recurrent_op="gru") is cuDNN's GRU: the reset gate applied after the recurrent matmul,
#   n = tanh(W_n·x + b_in + r ⊙ (U_n·h + b_hn)), an input and a hidden bias: the canonical GRU.
# - C.layers.GRU (cntk/layers/blocks.py) is the original GRU (Cho et al. 2014): the reset gate applied to h before the
#   matmul, n = tanh(W_n·x + U_n·(r ⊙ h) + b_n), and one bias per gate. With the reset gate before the matmul the two
#   canonical biases only ever appear as their sum, so b = b_ih + b_hh loads them exactly (as CNTK's own converter
#   from cuDNN stacks to C.layers does for LSTMs and RNNs, cntk/misc/optimized_rnnstack_converter.py; it refuses GRU
#   stacks because of the reset-gate difference), and the layer has 3·hidden = 300 fewer parameters.
GRU_RESET_BEFORE = (
    "CPU GRU: C.layers.GRU applies the reset gate before the recurrent matmul (the original GRU; "
    "cuDNN and the canonical GRU apply it after)"
)
GRU_ONE_BIAS = (
    "CPU GRU: C.layers.GRU has one bias per gate (b = b_ih + b_hh, exact for its formulation): "
    "300 fewer trainable parameters than the canonical two"
)


# ==== Data ====
def load_data(cfg):
    """IMDB token ids (N, maxlen), Keras convention, front-padded, as float32 (CNTK's inputs are floating point; ids
    < 2²⁴ are exact): fed as is, each row is one sequence of maxlen scalar steps. Training labels one-hot (CNTK's
    loss takes a target distribution), test labels kept as integers for the shared accuracy."""
    p = cfg.params
    x_train, y_train, x_test, y_test = load_imdb(
        cfg.data, p["max_features"], p["maxlen"], p.get("train_samples"), p.get("test_samples")
    )
    return x_train.astype(np.float32), one_hot(y_train, p["num_classes"]), x_test.astype(np.float32), y_test


# ==== Model ====
def Embedding(vocabulary, dim, name=""):
    """A learnable lookup table E (vocabulary, dim) indexed by token ids: (T,) -> (T, dim). C.layers.Embedding
    multiplies sparse one-hot tokens by E instead (the seed's idiom); its gradient is then sparse, and CNTK's CPU Adam
    has no sparse kernel ("AdamUpdate -> Feature Not Implemented"). C.gather's gradient is dense, the one every other
    runner's Adam sees, on either device."""
    E = C.parameter((vocabulary, dim), init=C.uniform(0.05), name="E")  # Keras' U(±0.05)

    @C.BlockFunction("Embedding", name)
    def lookup(ids):
        return C.gather(E, ids)

    return lookup


def CuDNNGRU(hidden, name=""):
    """A GRU layer on cuDNN's RNN stack (GPU only). All its weights are one parameter W whose shape CNTK infers from
    the input, (3·(input + hidden + 2), hidden): cuDNN's packed buffer, [W_ih (3H, in), W_hh (3H, H), b_ih (3H),
    b_hh (3H)] with gate rows (r, z, n), each raveled row-major (set_gru)."""
    W = C.parameter((C.InferredDimension, hidden), init=C.glorot_uniform(), name="W")

    @C.BlockFunction("OptimizedRNNStack", name)
    def gru(x):
        return C.optimized_rnnstack(x, W, hidden, num_layers=1, recurrent_op="gru")

    return gru


# rosetta: model
def build_model(
    cfg=None,
    cudnn=False,
    max_features=SIZES["max_features"],
    embedding_dim=SIZES["embedding_dim"],
    hidden=SIZES["hidden"],
    num_classes=SIZES["num_classes"],
):
    """Token ids -> embedding -> GRU -> last step -> dense: a Function of the sequence input `tokens`, whose output is
    the logits. `cudnn` picks the GPU-only fused GRU, else Recurrence(GRU); both start from Keras' initializers."""
    tokens = C.sequence.input_variable((), np.float32, name="tokens")  # one token id per step
    model = C.layers.Sequential(
        [
            Embedding(max_features, embedding_dim, name="embedding"),  # (T, 125)
            CuDNNGRU(hidden, name="gru")
            if cudnn
            else C.layers.Recurrence(C.layers.GRU(hidden), name="gru"),  # (T, 100)
            C.sequence.last,  # the last step (front padding makes it real text): (100,)
            C.layers.Dense(num_classes, init=C.glorot_uniform(), init_bias=0, name="fc"),  # logits
        ]
    )(tokens)
    # Keras' GRU initializers, so every framework starts from the same distribution: Glorot uniform over the stacked
    # (3H, E) input kernel, an orthogonal stacked recurrent kernel, zero biases. Drawn in canonical layout, loaded
    # like canonical weights.
    rng = np.random.default_rng(0)
    bound = np.sqrt(6 / (embedding_dim + 3 * hidden))
    q, r = np.linalg.qr(rng.standard_normal((3 * hidden, hidden)))
    set_gru(
        model,
        rng.uniform(-bound, bound, (3 * hidden, embedding_dim)),
        q * np.sign(np.diag(r)),
        np.zeros(3 * hidden),
        np.zeros(3 * hidden),
    )
    return model


def set_gru(model, w_ih, w_hh, b_ih, b_hh):
    """Canonical GRU arrays (gate rows r, z, n; PyTorch's layout) -> the model's GRU, whichever it is.

    The fused stack takes them packed as cuDNN does (CuDNNGRU). C.layers.GRU keeps (in, out) matrices with the gates
    stacked along the output axis in the order (z, r, n): W (E, 3H) for the input, H (H, 2H) for z and r on the
    hidden state and H1 (H, H) for the candidate on r ⊙ h, and one bias b (3H)."""
    gru = model.gru
    if gru.op_name == "OptimizedRNNStack":
        flat = np.concatenate([np.ravel(w_ih), np.ravel(w_hh), b_ih, b_hh])
        gru.W.value = flat.reshape(gru.W.shape).astype(np.float32)
        return
    (wr, wz, wn), (ur, uz, un) = np.split(w_ih, 3), np.split(w_hh, 3)
    br, bz, bn = np.split(b_ih + b_hh, 3)
    gru.W.value = np.ascontiguousarray(np.concatenate([wz, wr, wn]).T, np.float32)
    gru.H.value = np.ascontiguousarray(np.concatenate([uz, ur]).T, np.float32)
    gru.H1.value = np.ascontiguousarray(un.T, np.float32)
    gru.b.value = np.concatenate([bz, br, bn]).astype(np.float32)


def read_canonical(model):
    """load_canonical's inverse for Recurrence(GRU) (the CPU path the equivalence tests run): its one bias comes back as
    `gru.bias_ih`, with `gru.bias_hh` zero."""
    gru = model.gru
    wz, wr, wn = np.split(gru.W.value.T, 3)
    uz, ur = np.split(gru.H.value.T, 2)
    bz, br, bn = np.split(gru.b.value, 3)
    return {
        "embedding.weight": model.embedding.E.value,
        "gru.weight_ih": np.concatenate([wr, wz, wn]),
        "gru.weight_hh": np.concatenate([ur, uz, gru.H1.value.T]),
        "gru.bias_ih": np.concatenate([br, bz, bn]),
        "gru.bias_hh": np.zeros(3 * len(bn), np.float32),
        "fc.weight": model.fc.W.value.T,
        "fc.bias": model.fc.b.value,
    }


# rosetta: init
def load_canonical(model, weights):
    """The embedding (vocabulary, E) is CNTK's layout; the dense kernel is (in, out), the canonical transposed."""
    model.embedding.E.value = np.asarray(weights["embedding.weight"], np.float32)
    set_gru(model, *(weights[f"gru.{k}"] for k in ("weight_ih", "weight_hh", "bias_ih", "bias_hh")))
    model.fc.W.value = np.ascontiguousarray(weights["fc.weight"].T, np.float32)
    model.fc.b.value = np.asarray(weights["fc.bias"], np.float32)


def predict_logits(model, x):
    return model.eval({model.arguments[0]: np.asarray(x, np.float32)})  # eval: inference mode


# ==== Train step ====
# rosetta: optimizer
def make_learner(parameters, p):
    """Adam as in the paper: unit_gain=True is its m = β1·m + (1 − β1)·g (lesson 8's plain momentum concerns SGD; the
    seed's notebook turned unit gain off here too, which scales Adam's first moment by 1/(1 − β1)). CNTK's criterion
    is the minibatch sum: the per-sample rate makes the steps lr, and ε·batch is ε on the mean gradient
    (tests/test_cntk_learners.py checks the steps against NumPy)."""
    return C.adam(
        parameters,
        lr=C.learning_parameter_schedule_per_sample(p["lr"]),
        momentum=C.momentum_schedule(p["beta1"]),
        variance_momentum=C.momentum_schedule(p["beta2"]),
        epsilon=p["eps"] * p["batch_size"],
        unit_gain=True,
    )


# rosetta: train-step
def make_train_step(trainer, tokens, labels):
    """train_minibatch copies the batch to the device, runs forward and backward (through time, on the CPU) and
    Adam's update. It returns the step's loss, which CNTK hands over only on the host (LOSS_HOST_READ)."""

    def train_step(x, y):
        trainer.train_minibatch({tokens: x, labels: y})
        return trainer.previous_minibatch_loss_average

    return train_step


def train_steps(cfg, weights, x, y, steps):
    """The training-equivalence test's entry (tests/test_training_equivalence.py): from canonical `weights`, `steps`
    steps on the one batch (x, y) with main's model, learner and step; (each step's loss, weights after each)."""
    p = cfg.params
    model = build_model(
        max_features=p["max_features"],
        embedding_dim=p["embedding_dim"],
        hidden=p["hidden"],
        num_classes=p["num_classes"],
    )
    load_canonical(model, weights)
    labels = C.input_variable(p["num_classes"], np.float32, name="labels")
    trainer = C.Trainer(model, C.cross_entropy_with_softmax(model, labels), [make_learner(model.parameters, p)])
    train_step = make_train_step(trainer, model.arguments[0], labels)
    x, y = np.asarray(x, np.float32), one_hot(np.asarray(y), p["num_classes"])
    losses, after = [], []
    for _ in range(steps):
        losses.append(float(train_step(x, y)))
        after.append(read_canonical(model))
    return losses, after


# ==== Evaluate ====
# rosetta: evaluate
def evaluate(model, x_test, y_test, batch_size):
    """Test accuracy outside the clock (no dropout or batch norm here: training and inference compute the same
    function)."""
    tokens = model.arguments[0]
    logits = [model.eval({tokens: x_test[idx]}) for idx in batching.eval_batches(len(x_test), batch_size)]
    return metrics.accuracy(np.concatenate(logits), y_test)


# ==== Main ====
def main(cfg):
    p, switches = cfg.params, resolve_switches(SWITCHES, cfg)
    check_precision(cfg.precision)
    device = select_device(cfg)
    cudnn = is_gpu(device) and switches["cudnn_rnn"]
    C.cntk_py.set_fixed_random_seed(0)  # CNTK's initializers draw from it
    x_train, y_train, x_test, y_test = load_data(cfg)
    model = build_model(
        cudnn=cudnn,
        max_features=p["max_features"],
        embedding_dim=p["embedding_dim"],
        hidden=p["hidden"],
        num_classes=p["num_classes"],
    )
    load_canonical(model, canonical.init_weights("gru"))  # the same start in every framework (docs/design.md)
    labels = C.input_variable(p["num_classes"], np.float32, name="labels")
    learner = make_learner(model.parameters, p)
    # rosetta: loss
    trainer = C.Trainer(model, C.cross_entropy_with_softmax(model, labels), [learner])
    train_step = make_train_step(trainer, model.arguments[0], labels)

    losses = []  # every step's loss
    epoch_seconds, warmup, _, windows = timed_epochs(
        p["epochs"],
        lambda epoch: train_batches(x_train, y_train, p["batch_size"], epoch),
        lambda batch: train_step(*batch),
        sync(trainer),
        outputs=losses,
    )

    accuracy = evaluate(model, x_test, y_test, p["batch_size"])
    steps = batching.steps_per_epoch(len(x_train), p["batch_size"])
    differences = [ADAM_EPSILON_HAT, LOSS_HOST_READ] + ([] if cudnn else [GRU_RESET_BEFORE, GRU_ONE_BIAS])
    return {
        "metrics": train_metrics(
            epoch_seconds,
            steps * p["batch_size"],
            warmup=warmup,
            steps=steps,
            windows=windows,
            accuracy=accuracy,
            init="canonical",
            **metrics.loss_metrics(losses, steps),
            parameters=count_parameters(model),
            epochs=p["epochs"],
            train_samples=len(x_train),
            test_samples=len(x_test),
            data_placement="host",
            differences=differences,
        ),
        "timing": train_timing(windows, warmup=warmup),
        "switches": {
            **switches,
            "cudnn_rnn": cudnn,
            "gru": "optimized_rnnstack (cuDNN)" if cudnn else "Recurrence(GRU)",
            "gru_formulation": "reset after matmul (canonical)" if cudnn else "reset before matmul",
            "dtype": "float32",
            "device": "gpu(0)" if is_gpu(device) else "cpu",
        },
    }
