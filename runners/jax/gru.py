"""JAX 0.10 + Flax NNX 0.12 · gru · embedding → GRU(100) → dense 2 on IMDB sentiment, optax Adam; the GRU is a small
NNX module in the cuDNN formulation, its time loop a jax.lax.scan inside one XLA-compiled train step."""

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx

from runners.jax import Stepper, count_parameters, multi_step, select_devices, set_precision, tuned_steps
from shared import batching, canonical, metrics, params
from shared.datasets import load_imdb
from shared.runner import resolve_switches
from shared.timing import WINDOW_STEPS, timed_epochs, train_metrics, train_timing

# ==== Config ====
SIZES = params.GRU  # the canonical sizes (max_features, embedding_dim, hidden, maxlen, num_classes)
# Hyperparameters come from shared/params.py through cfg.params (max_features, maxlen, hidden, epochs, lr, …).
SWITCHES = {
    "jit": True,  # compile the whole train step, time loop included, into one XLA program
    "donate": True,  # donate the old parameter/optimizer buffers so XLA updates them in place
    "scan_unroll": 1,  # time steps per lax.scan iteration: unrolling trades compile time for loop overhead
    "steps_per_dispatch": 1,  # training steps one jitted call runs (more: lax.scan over a chunk of batches)
    "data_placement": params.DATA_PLACEMENT,  # host: device_put each batch inside the clock (the rule for every
    # framework); device: the whole set on the device before the clock
}
TUNED = {  # tuning=tuned: JAX's own fast path (docs/tuned.md), same work
    "scan_unroll": 10,  # ten timesteps per loop iteration: XLA fuses their gate arithmetic, 15 iterations not 150
    "steps_per_dispatch": WINDOW_STEPS,  # one XLA program and one host-to-device copy per window of steps
}
# JAX has no fused cuDNN GRU (jax.experimental.rnn wraps cuDNN's LSTM only): XLA compiles the scan itself.


# ==== Data ====
def load_data(cfg, device, placement):
    """IMDB as int32 token ids (N, maxlen), Keras convention, front-padded; the training set in host memory (NumPy)
    or on `device` (`placement`). The test set stays on the host: evaluation is outside the clock and copies its
    batches."""
    p = cfg.params
    x_train, y_train, x_test, y_test = (
        np.asarray(a, np.int32)
        for a in load_imdb(cfg.data, p["max_features"], p["maxlen"], p.get("train_samples"), p.get("test_samples"))
    )
    if placement not in params.DATA_PLACEMENTS:
        raise ValueError(f"data_placement={placement!r}: choose one of {', '.join(params.DATA_PLACEMENTS)}")
    if placement == "device":
        x_train, y_train = jax.device_put((x_train, y_train), device)
    return x_train, y_train, x_test, y_test


# ==== Model ====
class GRU(nnx.Module):
    """GRU in the cuDNN formulation (= PyTorch's nn.GRU = the canonical GRU): gates (r, z, n), separate input and
    hidden biases, reset gate applied after the recurrent matmul: n = tanh(W_n x + b_in + r * (U_n h + b_hn)).
    flax.nnx.GRUCell also resets after the matmul but has no hidden bias (300 parameters fewer, a different function
    whenever b_hn != 0), so it cannot load canonical weights; hence this module."""

    def __init__(self, in_features, hidden, dtype=jnp.float32, *, rngs):
        self.hidden, self.dtype = hidden, dtype
        self.kernel_ih = nnx.Param(nnx.initializers.glorot_uniform()(rngs.params(), (in_features, 3 * hidden)))
        self.kernel_hh = nnx.Param(nnx.initializers.orthogonal()(rngs.params(), (hidden, 3 * hidden)))
        self.bias_ih = nnx.Param(jnp.zeros(3 * hidden))
        self.bias_hh = nnx.Param(jnp.zeros(3 * hidden))

    def __call__(self, x, unroll=1):  # x: (N, T, E) -> last hidden state (N, H)
        H, dt = self.hidden, self.dtype
        # The input projection of all time steps is one big matmul, outside the sequential loop (as cuDNN does).
        gi = x.astype(dt) @ self.kernel_ih[...].astype(dt) + self.bias_ih[...].astype(dt)  # (N, T, 3H)
        U, b_hh = self.kernel_hh[...].astype(dt), self.bias_hh[...].astype(dt)

        # rosetta: model
        def step(h, gi_t):  # h: (N, H), gi_t: (N, 3H)
            gh = h @ U + b_hh
            r = jax.nn.sigmoid(gi_t[:, :H] + gh[:, :H])
            z = jax.nn.sigmoid(gi_t[:, H : 2 * H] + gh[:, H : 2 * H])
            n = jnp.tanh(gi_t[:, 2 * H :] + r * gh[:, 2 * H :])
            return (1 - z) * n + z * h, None

        h0 = jnp.zeros((x.shape[0], H), dt)
        h, _ = jax.lax.scan(step, h0, gi.swapaxes(0, 1), unroll=unroll)  # scan over time: (T, N, 3H)
        return h


# rosetta: model
class GRUClassifier(nnx.Module):
    def __init__(
        self,
        max_features=SIZES["max_features"],
        embedding_dim=SIZES["embedding_dim"],
        hidden=SIZES["hidden"],
        num_classes=SIZES["num_classes"],
        dtype=jnp.float32,
        unroll=1,
        *,
        rngs,
    ):
        # Keras' initializers, so every framework starts from the same distribution.
        uniform = lambda key, shape, dtype=jnp.float32: jax.random.uniform(key, shape, dtype, -0.05, 0.05)
        self.embedding = nnx.Embed(max_features, embedding_dim, embedding_init=uniform, dtype=dtype, rngs=rngs)
        self.gru = GRU(embedding_dim, hidden, dtype, rngs=rngs)
        self.fc = nnx.Linear(
            hidden,
            num_classes,
            kernel_init=nnx.initializers.glorot_uniform(),
            bias_init=nnx.initializers.zeros,
            dtype=dtype,
            rngs=rngs,
        )
        self.unroll = unroll

    # rosetta: model
    def __call__(self, x):  # x: (N, T) token ids
        return self.fc(self.gru(self.embedding(x), self.unroll))  # last time step only (front padding: real text)


def build_model(cfg=None, dtype=jnp.float32, unroll=1, seed=0):
    return GRUClassifier(dtype=dtype, unroll=unroll, rngs=nnx.Rngs(seed))


# rosetta: init
def load_canonical(model, weights):
    """Canonical matrices are (out, in) with gate rows (r, z, n); ours are (in, out) with gate columns (r, z, n)."""
    w = {name: jnp.asarray(np.asarray(v)) for name, v in weights.items()}
    model.embedding.embedding[...] = w["embedding.weight"]
    model.gru.kernel_ih[...], model.gru.kernel_hh[...] = w["gru.weight_ih"].T, w["gru.weight_hh"].T
    model.gru.bias_ih[...], model.gru.bias_hh[...] = w["gru.bias_ih"], w["gru.bias_hh"]
    model.fc.kernel[...], model.fc.bias[...] = w["fc.weight"].T, w["fc.bias"]


def read_canonical(model):
    a = lambda v: np.asarray(v[...])
    return {
        "embedding.weight": a(model.embedding.embedding),
        "gru.weight_ih": a(model.gru.kernel_ih).T,
        "gru.weight_hh": a(model.gru.kernel_hh).T,
        "gru.bias_ih": a(model.gru.bias_ih),
        "gru.bias_hh": a(model.gru.bias_hh),
        "fc.weight": a(model.fc.kernel).T,
        "fc.bias": a(model.fc.bias),
    }


@nnx.jit
def forward(model, x):
    return model(x)


def predict_logits(model, x):
    return np.asarray(forward(model, jnp.asarray(x, jnp.int32)), np.float32)


# ==== Train step ====
# rosetta: optimizer
def make_optimizer(model, p, loss_scale):
    tx = loss_scale.wrap(optax.adam(p["lr"], b1=p["beta1"], b2=p["beta2"], eps=p["eps"]))
    return nnx.Optimizer(model, tx, wrt=nnx.Param)


# rosetta: train-step
def make_train_step(graphdef, switches):
    """A pure function (state, x, y) -> (state, loss); `state` holds the model, optimizer and loss scale arrays."""

    def train_step(state, x, y):
        model, optimizer, loss_scale = nnx.merge(graphdef, state)

        # rosetta: loss
        def loss_fn(model):
            logits = model(x).astype(jnp.float32)
            return optax.losses.softmax_cross_entropy_with_integer_labels(logits, y).mean()

        # rosetta: train-step
        loss, grads = loss_scale.value_and_grad(loss_fn, model)
        optimizer.update(model, grads)
        return nnx.state((model, optimizer, loss_scale)), loss  # no float(loss): the step never waits

    if not switches["jit"]:
        return train_step
    return jax.jit(train_step, donate_argnums=0 if switches["donate"] else ())


def train_steps(cfg, weights, x, y, steps):
    """The training-equivalence test's entry (tests/test_training_equivalence.py): from canonical `weights`, `steps`
    steps on the one batch (x, y) with main's model, optimizer and step; (each step's loss, weights after each). A
    tuned cell's multi-step program runs step 1 alone, then the rest as one chunk: the weights in between are None."""
    switches = resolve_switches(SWITCHES, cfg, TUNED)
    (device,) = select_devices(cfg)
    dtype, loss_scale = set_precision(cfg.precision, device)
    model = build_model(dtype=dtype, unroll=int(switches["scan_unroll"]))
    load_canonical(model, weights)
    optimizer = make_optimizer(model, cfg.params, loss_scale)
    graphdef, state = nnx.split((model, optimizer, loss_scale))
    train_step = make_train_step(graphdef, switches)
    if switches["steps_per_dispatch"] > 1:
        return tuned_steps(
            multi_step(make_train_step(graphdef, {**switches, "jit": False}), switches["donate"]),
            state,
            (model, optimizer, loss_scale),
            read_canonical,
            x,
            y,
            steps,
        )
    losses, after = [], []
    for _ in range(steps):
        state, loss = train_step(state, jnp.asarray(x), jnp.asarray(y))
        nnx.update((model, optimizer, loss_scale), state)
        losses.append(float(loss))
        after.append(read_canonical(model))
    return losses, after


# ==== Evaluate ====
# rosetta: evaluate
def evaluate(model, x_test, y_test, batch_size):
    # No dropout or batch norm in this model: training and inference compute the same function.
    logits = [forward(model, x_test[idx]) for idx in batching.eval_batches(len(x_test), batch_size)]
    return metrics.accuracy(np.concatenate([np.asarray(batch, np.float32) for batch in logits]), np.asarray(y_test))


# ==== Main ====
def main(cfg):
    p, switches = cfg.params, resolve_switches(SWITCHES, cfg, TUNED)
    (device,) = select_devices(cfg)
    dtype, loss_scale = set_precision(cfg.precision, device)
    x_train, y_train, x_test, y_test = load_data(cfg, device, switches["data_placement"])
    model = build_model(dtype=dtype, unroll=int(switches["scan_unroll"]))
    load_canonical(model, canonical.init_weights("gru"))  # the same start in every framework (docs/design.md)
    # rosetta: end
    optimizer = make_optimizer(model, p, loss_scale)
    graphdef, state = nnx.split((model, optimizer, loss_scale))
    # Commit the state to the device: the step's outputs are committed, and committed and uncommitted inputs compile
    # to two different programs, so an uncommitted initial state would compile the step twice.
    state = jax.device_put(state, device)
    step = Stepper(make_train_step, graphdef, state, switches)  # a batch a call (tuned: a chunk of batches)

    # rosetta: barrier
    # The barrier waits for the newest state: steps run in order, so it is ready only when all queued work is done.
    losses = []  # every step's loss, left on the device
    epoch_seconds, warmup, _, windows = timed_epochs(
        p["epochs"],
        step.batches(x_train, y_train, p["batch_size"], device),
        step,
        lambda: jax.block_until_ready(step.state),
        outputs=losses,
        steps_of=step.steps_of,
    )
    nnx.update((model, optimizer, loss_scale), step.state)

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
            **metrics.loss_metrics([float(v) for out in losses for v in np.ravel(out)], steps),
            epochs=p["epochs"],
            train_samples=len(x_train),
            test_samples=len(x_test),
            data_placement=switches["data_placement"],
            differences=[],
        ),
        "timing": train_timing(windows, warmup=warmup),
        "switches": {
            **switches,
            "cudnn_rnn": False,
            "compute_dtype": jnp.dtype(dtype).name,
            "matmul_precision": jax.config.jax_default_matmul_precision,
            "device": str(device),
        },
    }
