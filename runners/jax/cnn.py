"""JAX 0.10 + Flax NNX 0.12 · cnn · a VGG-style CNN trained on CIFAR-10 with optax SGD + momentum, one XLA-compiled
train step (jax.jit over nnx.split state)."""

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx

from runners.jax import Stepper, count_parameters, multi_step, select_devices, set_precision, tuned_steps
from shared import batching, canonical, metrics, params
from shared.datasets import load_cifar10
from shared.runner import resolve_switches
from shared.timing import WINDOW_STEPS, timed_epochs, train_metrics, train_timing

# ==== Config ====
# Hyperparameters come from shared/params.py through cfg.params (epochs, batch_size, lr, momentum, samples).
SWITCHES = {
    "jit": True,  # compile the whole train step (forward, backward, update) into one XLA program; off = op by op
    "donate": True,  # donate the old parameter/optimizer buffers to the step, so XLA updates them in place
    "dropout": True,  # off only in the training-equivalence test (its step must be deterministic)
    "steps_per_dispatch": 1,  # training steps one jitted call runs (more: lax.scan over a chunk of batches)
    "data_placement": params.DATA_PLACEMENT,  # host: device_put each batch inside the clock (the rule for every
    # framework); device: the whole set on the device before the clock
}
TUNED = {  # tuning=tuned: JAX's own fast path (docs/tuned.md), same work
    "steps_per_dispatch": WINDOW_STEPS,  # one XLA program and one host-to-device copy per window of steps: the host
    # dispatches 5× less often, and XLA sees the steps back to back
}
# Layout: NHWC inside the model (XLA's and Flax's native conv layout); the shared batches are NCHW and are transposed
# by the model's first op, which XLA folds into the first convolution.


# ==== Data ====
def load_data(cfg, device, placement):
    """CIFAR-10 as float32 NCHW arrays and int labels, the training set in host memory (NumPy) or on `device`
    (`placement`). The test set stays on the host: evaluation is outside the clock and copies its batches."""
    p = cfg.params
    x_train, y_train, x_test, y_test = load_cifar10(cfg.data, p.get("train_samples"), p.get("test_samples"))
    if placement not in params.DATA_PLACEMENTS:
        raise ValueError(f"data_placement={placement!r}: choose one of {', '.join(params.DATA_PLACEMENTS)}")
    if placement == "device":
        x_train, y_train = jax.device_put((x_train, y_train), device)
    return x_train, y_train, x_test, y_test


# ==== Model ====
glorot, zeros = nnx.initializers.glorot_uniform(), nnx.initializers.zeros  # like Keras (lesson 7)


# rosetta: model
class CNN(nnx.Module):
    def __init__(self, num_classes=10, dtype=jnp.float32, dropout=True, *, rngs):
        conv = lambda cin, cout: nnx.Conv(
            cin, cout, (3, 3), padding="SAME", kernel_init=glorot, bias_init=zeros, dtype=dtype, rngs=rngs
        )
        self.conv1, self.conv2 = conv(3, 50), conv(50, 50)
        self.conv3, self.conv4 = conv(50, 100), conv(100, 100)
        self.fc1 = nnx.Linear(100 * 8 * 8, 512, kernel_init=glorot, bias_init=zeros, dtype=dtype, rngs=rngs)
        self.fc2 = nnx.Linear(512, num_classes, kernel_init=glorot, bias_init=zeros, dtype=dtype, rngs=rngs)
        rates = (0.25, 0.25, 0.5) if dropout else (0.0, 0.0, 0.0)
        self.drop1, self.drop2, self.drop3 = (nnx.Dropout(rate, rngs=rngs) for rate in rates)

    # rosetta: model
    def __call__(self, x):  # x: (N, 3, 32, 32), the shared NCHW layout
        x = x.transpose(0, 2, 3, 1)  # -> NHWC
        x = nnx.relu(self.conv1(x))
        x = nnx.relu(nnx.max_pool(self.conv2(x), (2, 2), (2, 2)))  # ReLU after pooling: 4x fewer elements (lesson 10)
        x = self.drop1(x)  # (N, 16, 16, 50)
        x = nnx.relu(self.conv3(x))
        x = nnx.relu(nnx.max_pool(self.conv4(x), (2, 2), (2, 2)))
        x = self.drop2(x)  # (N, 8, 8, 100)
        x = x.transpose(0, 3, 1, 2).reshape(len(x), -1)  # flatten C·H·W = 6400, the canonical order
        x = self.drop3(nnx.relu(self.fc1(x)))
        return self.fc2(x)  # logits; softmax lives in the loss (lesson 6)


def build_model(cfg=None, dtype=jnp.float32, seed=0, dropout=True):
    return CNN(dtype=dtype, dropout=dropout, rngs=nnx.Rngs(params=seed, dropout=seed + 1))


# rosetta: init
def load_canonical(model, weights):
    """Canonical conv kernels are OIHW and dense weights (out, in); Flax keeps HWIO and (in, out)."""
    for name in ("conv1", "conv2", "conv3", "conv4", "fc1", "fc2"):
        layer, w = getattr(model, name), np.asarray(weights[f"{name}.weight"])
        layer.kernel[...] = jnp.asarray(w.transpose(2, 3, 1, 0) if w.ndim == 4 else w.T)
        layer.bias[...] = jnp.asarray(weights[f"{name}.bias"])


def read_canonical(model):
    out = {}
    for name in ("conv1", "conv2", "conv3", "conv4", "fc1", "fc2"):
        layer = getattr(model, name)
        w = np.asarray(layer.kernel[...])
        out[f"{name}.weight"] = w.transpose(3, 2, 0, 1) if w.ndim == 4 else w.T
        out[f"{name}.bias"] = np.asarray(layer.bias[...])
    return out


@nnx.jit
def forward(model, x):
    return model(x)


def predict_logits(model, x):
    return np.asarray(forward(nnx.view(model, deterministic=True), jnp.asarray(x)), np.float32)


# ==== Train step ====
# rosetta: optimizer
def make_optimizer(model, p, loss_scale):
    tx = loss_scale.wrap(optax.sgd(p["lr"], momentum=p["momentum"]))  # plain momentum, like PyTorch (lesson 8)
    return nnx.Optimizer(model, tx, wrt=nnx.Param)


# rosetta: train-step
def make_train_step(graphdef, switches):
    """A pure function (state, x, y) -> (state, loss); `state` holds the model, optimizer and loss scale arrays."""

    def train_step(state, x, y):
        model, optimizer, loss_scale = nnx.merge(graphdef, state)

        # rosetta: loss
        def loss_fn(model):  # integer labels, no one-hot (lesson 11)
            logits = model(x).astype(jnp.float32)
            return optax.losses.softmax_cross_entropy_with_integer_labels(logits, y).mean()

        # rosetta: train-step
        loss, grads = loss_scale.value_and_grad(loss_fn, model)
        optimizer.update(model, grads)
        return nnx.state((model, optimizer, loss_scale)), loss  # loss stays on the device: no host sync

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
    model = build_model(dtype=dtype, dropout=switches["dropout"])
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
    model = nnx.view(model, deterministic=True)  # dropout off in evaluation (lesson 4)
    logits = [forward(model, x_test[idx]) for idx in batching.eval_batches(len(x_test), batch_size)]
    return metrics.accuracy(np.concatenate([np.asarray(batch, np.float32) for batch in logits]), np.asarray(y_test))


# ==== Main ====
def main(cfg):
    p, switches = cfg.params, resolve_switches(SWITCHES, cfg, TUNED)
    (device,) = select_devices(cfg)
    dtype, loss_scale = set_precision(cfg.precision, device)
    x_train, y_train, x_test, y_test = load_data(cfg, device, switches["data_placement"])
    model = build_model(dtype=dtype, dropout=switches["dropout"])
    load_canonical(model, canonical.init_weights("cnn"))  # the same start in every framework (docs/design.md)
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
            "memory_format": "NHWC",
            "compute_dtype": jnp.dtype(dtype).name,
            "matmul_precision": jax.config.jax_default_matmul_precision,
            "device": str(device),
        },
    }
