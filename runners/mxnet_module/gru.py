"""MXNet 1.9 Module · gru · embedding → GRU(100) → dense 2 on IMDB sentiment as an mx.sym graph with the fused RNN
operator (cuDNN's GRU on GPU), trained by a Module with Adam."""

import mxnet as mx
import numpy as np

from runners.mxnet_gluon import GLOROT_UNIFORM
from runners.mxnet_module import (
    ADAM_EPSILON_HAT,
    check_precision,
    contexts,
    count_parameters,
    cross_entropy,
    data_batches,
    predict,
    set_canonical,
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
    "data_placement": params.DATA_PLACEMENT,  # host: copy each batch inside the clock (the rule for every framework);
    # device: the whole set on the device before the clock (lesson 13)
}
# The GRU is always the fused `RNN` operator (cuDNN's RNN on a GPU, MXNet's own fused CPU kernel otherwise), in the
# time-major layout it wants (RNN lesson 2): only the (N, T) token matrix is transposed, not the embedded sequence.


# ==== Data ====
def load_data(cfg, ctx, placement):
    """IMDB as token ids (N, maxlen), Keras convention, front-padded, in float32 NDArrays (what Embedding and
    SoftmaxOutput take; ids < 2²⁴ are exact); the training set in host memory or on `ctx` (`placement`). The test set
    stays in NumPy: evaluation is outside the clock and its iterator copies the batches."""
    p = cfg.params
    x_train, y_train, x_test, y_test = load_imdb(
        cfg.data, p["max_features"], p["maxlen"], p.get("train_samples"), p.get("test_samples")
    )
    if placement not in params.DATA_PLACEMENTS:
        raise ValueError(f"data_placement={placement!r}: choose one of {', '.join(params.DATA_PLACEMENTS)}")
    train_ctx = ctx if placement == "device" else mx.cpu()
    return mx.nd.array(x_train, ctx=train_ctx), mx.nd.array(y_train, ctx=train_ctx), x_test, y_test


# ==== Model ====
# rosetta: model
def gru_symbol(
    max_features=SIZES["max_features"],
    embedding_dim=SIZES["embedding_dim"],
    hidden=SIZES["hidden"],
    num_classes=SIZES["num_classes"],
):
    """Tokens `data` (N, T) -> embedding -> fused GRU -> last time step -> dense -> SoftmaxOutput.

    MXNet's `RNN` operator in mode "gru" is the cuDNN formulation (= PyTorch's nn.GRU = the canonical GRU): gates
    (r, z, n), separate input and hidden biases, the reset gate applied after the recurrent matmul. All its weights
    are one flat vector `gru_parameters`: [W_ih (3H, E), W_hh (3H, H), b_ih (3H), b_hh (3H)], each with gate rows
    (r, z, n) — the canonical arrays raveled and concatenated (load_canonical)."""
    tokens = mx.sym.transpose(mx.sym.Variable("data"))  # (T, N): time-major for RNN
    x = mx.sym.Embedding(tokens, input_dim=max_features, output_dim=embedding_dim, name="embedding")  # (T, N, E)
    weights = mx.sym.Variable("gru_parameters", init=mx.init.FusedRNN(None, hidden, 1, "gru"))
    h0 = mx.sym.zeros(shape=(1, 0, hidden))  # (layers, N, H); 0 = "infer the batch size when binding"
    out = mx.sym.RNN(x, weights, h0, state_size=hidden, num_layers=1, mode="gru", name="gru")  # (T, N, H)
    last = mx.sym.SequenceLast(out)  # (N, H): the last step (front padding makes it real text)
    logits = mx.sym.FullyConnected(last, num_hidden=num_classes, name="fc")
    # rosetta: loss
    return mx.sym.SoftmaxOutput(logits, name="softmax")  # cross-entropy gradient from integer labels (lesson 11)


class KerasGRUInit(mx.init.Initializer):
    """Keras' initializers, so every framework starts from the same distribution: embedding U(±0.05), dense kernels
    Glorot uniform, zero biases (Initializer's default for `*_bias`). mx.init.FusedRNN hands the packed GRU vector
    over gate by gate (`l0_i2h_r_weight`, `l0_h2h_z_weight`, …), so each gate's input kernel gets the Glorot bound of
    the whole (3H, E) matrix and each recurrent block is orthogonal scaled by 1/√3, the size of one (H, H) block
    of an orthogonal (3H, H) matrix."""

    def __init__(self, embedding_dim=SIZES["embedding_dim"], hidden=SIZES["hidden"]):
        super().__init__(embedding_dim=embedding_dim, hidden=hidden)
        self.gate_input = mx.init.Uniform(np.sqrt(6 / (embedding_dim + 3 * hidden)))
        self.gate_recurrent = mx.init.Orthogonal(scale=3**-0.5)

    def _init_weight(self, name, arr):
        if name == "embedding_weight":
            arr[:] = mx.nd.random.uniform(-0.05, 0.05, arr.shape)
        elif "_i2h_" in name:
            self.gate_input._init_weight(name, arr)
        elif "_h2h_" in name:
            self.gate_recurrent._init_weight(name, arr)
        else:
            GLOROT_UNIFORM._init_weight(name, arr)


# rosetta: model
def build_model(cfg=None, ctx=(mx.cpu(),), batch_size=1, maxlen=SIZES["maxlen"], for_training=False):
    """A Module bound to (batch_size, maxlen) token batches on `ctx`, initialized like Keras (KerasGRUInit). The
    bound length is not baked into the weights: predict binds other lengths to the same parameters."""
    model = mx.mod.Module(gru_symbol(), data_names=("data",), label_names=("softmax_label",), context=list(ctx))
    model.bind(
        data_shapes=[("data", (batch_size, maxlen))],
        label_shapes=[("softmax_label", (batch_size,))],
        for_training=for_training,
    )
    model.init_params(KerasGRUInit())
    return model


# rosetta: init
def load_canonical(model, weights):
    """Pack the canonical GRU arrays into the fused operator's one vector (layout in gru_symbol); the embedding and
    dense layer are the canonical names with `_` for `.` and the same layouts."""
    gru = np.concatenate([np.ravel(weights[f"gru.{k}"]) for k in ("weight_ih", "weight_hh", "bias_ih", "bias_hh")])
    set_canonical(model, {**{k: w for k, w in weights.items() if not k.startswith("gru.")}, "gru.parameters": gru})


def read_canonical(model):
    """load_canonical's inverse: the fused vector cut back into the canonical GRU arrays."""
    arrays = {name.replace("_", "."): a.asnumpy() for name, a in model.get_params()[0].items()}
    flat, out = arrays.pop("gru.parameters"), arrays
    E, H = SIZES["embedding_dim"], SIZES["hidden"]
    for key, shape in (
        ("weight_ih", (3 * H, E)),
        ("weight_hh", (3 * H, H)),
        ("bias_ih", (3 * H,)),
        ("bias_hh", (3 * H,)),
    ):
        size = int(np.prod(shape))
        out[f"gru.{key}"], flat = flat[:size].reshape(shape), flat[size:]
    return out


def predict_logits(model, x):
    return predict(model.symbol.get_internals()["fc_output"], model, np.asarray(x, np.float32))  # below SoftmaxOutput


# ==== Train step ====
# rosetta: optimizer
def make_optimizer(model, p):
    model.init_optimizer(
        optimizer="adam",
        optimizer_params={"learning_rate": p["lr"], "beta1": p["beta1"], "beta2": p["beta2"], "epsilon": p["eps"]},
    )


# rosetta: train-step
def train_step(model, batch):
    """forward_backward then Adam's update, queued on MXNet's engine: nothing here waits for the device (lesson 14)."""
    model.forward_backward(batch)
    model.update()
    return cross_entropy(model, batch)  # the step's loss, an NDArray on the engine


def train_steps(cfg, weights, x, y, steps):
    """The training-equivalence test's entry (tests/test_training_equivalence.py): from canonical `weights`, `steps`
    steps on the one batch (x, y) with main's Module, optimizer and step; (each step's loss, weights after each)."""
    model = build_model(batch_size=len(x), maxlen=x.shape[1], for_training=True)
    load_canonical(model, weights)
    make_optimizer(model, cfg.params)
    batch = mx.io.DataBatch(data=[mx.nd.array(x)], label=[mx.nd.array(y)])
    losses, after = [], []
    for _ in range(steps):
        losses.append(float(train_step(model, batch).asscalar()))
        after.append(read_canonical(model))
    return losses, after


# ==== Evaluate ====
# rosetta: evaluate
def evaluate(model, x_test, y_test, batch_size):
    """Test accuracy outside the clock (no dropout or batch norm here: training and inference compute the same
    function). The iterator pads the last partial batch to the bound batch size; predict drops the padding."""
    probabilities = model.predict(
        mx.io.NDArrayIter(x_test.astype(np.float32), batch_size=batch_size, last_batch_handle="pad")
    )
    return metrics.accuracy(probabilities.asnumpy(), y_test)


# ==== Main ====
def main(cfg):
    p, switches = cfg.params, resolve_switches(SWITCHES, cfg)
    check_precision(cfg.precision)
    # rosetta: device
    ctx = contexts(cfg)[:1]
    # rosetta: end
    mx.random.seed(0)
    x_train, y_train, x_test, y_test = load_data(cfg, ctx[0], switches["data_placement"])
    model = build_model(ctx=ctx, batch_size=p["batch_size"], maxlen=p["maxlen"], for_training=True)
    load_canonical(model, canonical.init_weights("gru"))  # the same start in every framework (docs/design.md)
    make_optimizer(model, p)

    # rosetta: barrier
    losses = []  # every step's loss, on the engine
    epoch_seconds, warmup, _, windows = timed_epochs(
        p["epochs"],
        lambda epoch: data_batches(x_train, y_train, p["batch_size"], epoch),
        lambda batch: train_step(model, batch),
        sync(),
        outputs=losses,
    )

    accuracy = evaluate(model, x_test, y_test, p["batch_size"])
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
            **metrics.loss_metrics([loss.asscalar() for loss in losses], steps),
            epochs=p["epochs"],
            train_samples=len(x_train),
            test_samples=len(x_test),
            data_placement=switches["data_placement"],
            differences=[ADAM_EPSILON_HAT],
        ),
        "timing": train_timing(windows, warmup=warmup),
        "switches": {**switches, "cudnn_rnn": ctx[0].device_type == "gpu", "layout": "TNC", "device": str(ctx[0])},
    }
