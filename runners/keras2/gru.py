"""Keras 2.3 (CNTK 2.7 / Theano 1.0 backend) · gru · embedding → GRU(100) → dense 2 on IMDB sentiment, Adam, via
`model.fit`; layers.GRU(reset_after=True) is the cuDNN formulation, run as the backend's own loop (CNTK's recurrence,
Theano's scan)."""

import keras
import numpy as np
from keras import layers

from runners.keras2 import (
    ADAM_EPSILON_HAT,
    EpochBatches,
    EpochTimer,
    backend_switches,
    check_device,
    check_precision,
    count_parameters,
    differences,
    fit_steps,
)
from shared import canonical, metrics, params
from shared.datasets import load_imdb
from shared.runner import resolve_switches
from shared.timing import train_metrics, train_timing

# ==== Config ====
SIZES = params.GRU  # the canonical sizes (max_features, embedding_dim, hidden, maxlen, num_classes)
# Hyperparameters come from shared/params.py through cfg.params (max_features, maxlen, hidden, epochs, lr, …).
SWITCHES = {
    "implementation": 2,  # GRUCell: 2 = one matmul for all three gates per step (Keras 2.3's default), 1 = three
    "workers": 0,  # fit's batch-gathering threads; 0 gathers each batch in the training thread like every
    # other runner (Keras 2's OrderedEnqueuer polls its queue with 0.1 s sleeps per epoch)
}
# No cuDNN GRU: Keras 2.3's CuDNNGRU layer is TensorFlow-only, so the GPU runs the same loop as the CPU, without the
# fused kernel that RNN lesson 1 found fastest. Adam: ε = 1e-8 as everywhere, but Keras adds it before the bias
# correction (runners.keras2.ADAM_EPSILON_HAT; recorded in `differences`). Data placement is "host" (the only choice
# with `fit` on a Sequence).


# ==== Data ====
def load_data(cfg):
    """IMDB as int32 token ids (N, maxlen), Keras convention, front-padded (so the last step is real text)."""
    p = cfg.params
    x_train, y_train, x_test, y_test = load_imdb(
        cfg.data, p["max_features"], p["maxlen"], p.get("train_samples"), p.get("test_samples")
    )
    return x_train.astype(np.int32), y_train.astype(np.int32), x_test.astype(np.int32), y_test.astype(np.int32)


# ==== Model ====
# rosetta: model
def build_model(
    cfg=None,
    implementation=2,
    max_features=SIZES["max_features"],
    embedding_dim=SIZES["embedding_dim"],
    hidden=SIZES["hidden"],
    num_classes=SIZES["num_classes"],
):
    """Keras' default initializers are the canonical ones (uniform ±0.05 embedding, Glorot-uniform kernels,
    orthogonal recurrent kernel, zero biases). Keras 2's GRU defaults to reset_after=False (the reset gate applied
    before the recurrent matmul), so the canonical cuDNN formulation is asked for; the activations are spelled out
    because Keras 2.3.0 still used hard_sigmoid. unroll=False: the backend's symbolic loop over any length."""
    return keras.models.Sequential(
        [
            layers.Embedding(max_features, embedding_dim, name="embedding"),  # (N, T, 125)
            layers.GRU(
                hidden,
                activation="tanh",
                recurrent_activation="sigmoid",
                reset_after=True,
                implementation=implementation,
                unroll=False,
                name="gru",
            ),  # last output only: (N, 100)
            layers.Dense(num_classes, name="fc"),  # logits
        ],
        name="gru_classifier",
    )


# rosetta: init
def zrn(w):
    """Canonical gate blocks (r, z, n) stacked along axis 0 → Keras' order (z, r, h)."""
    r, z, n = np.split(w, 3, axis=0)
    return np.concatenate([z, r, n], axis=0)


# rosetta: init
def load_canonical(model, weights):
    """Canonical → Keras: dense (out, in) → (in, out); GRU kernels transposed to (in, 3·units) in gate order (z, r, h);
    the input and hidden biases become the rows of Keras' (2, 3·units) bias (reset_after=True)."""
    w = {name: np.asarray(a) for name, a in weights.items()}
    model.get_layer("embedding").set_weights([w["embedding.weight"]])
    model.get_layer("gru").set_weights(
        [zrn(w["gru.weight_ih"]).T, zrn(w["gru.weight_hh"]).T, np.stack([zrn(w["gru.bias_ih"]), zrn(w["gru.bias_hh"])])]
    )
    model.get_layer("fc").set_weights([w["fc.weight"].T, w["fc.bias"]])


def rzn(w):
    """Keras' gate order (z, r, h) along axis 0 → canonical (r, z, n)."""
    z, r, n = np.split(w, 3, axis=0)
    return np.concatenate([r, z, n], axis=0)


def read_canonical(model):
    kernel, recurrent, bias = model.get_layer("gru").get_weights()
    fc_kernel, fc_bias = model.get_layer("fc").get_weights()
    return {
        "embedding.weight": model.get_layer("embedding").get_weights()[0],
        "gru.weight_ih": rzn(kernel.T),
        "gru.weight_hh": rzn(recurrent.T),
        "gru.bias_ih": rzn(bias[0]),
        "gru.bias_hh": rzn(bias[1]),
        "fc.weight": fc_kernel.T,
        "fc.bias": fc_bias,
    }


def predict_logits(model, x):
    x = np.asarray(x, np.int32)
    return model.predict(x, batch_size=len(x))


# ==== Train step ====
# rosetta: train-step
# Keras owns the training loop: `compile()` fixes loss and optimizer and `fit()` runs the step. This function is the
# whole of what a Keras user writes for it.
def compile_model(model, cfg):
    p = cfg.params
    model.compile(
        # rosetta: optimizer
        # Keras' Adam default epsilon is 1e-7; the canonical value is 1e-8.
        optimizer=keras.optimizers.Adam(learning_rate=p["lr"], beta_1=p["beta1"], beta_2=p["beta2"], epsilon=p["eps"]),
        # rosetta: loss
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    )


def train_step(model, batches, cfg, switches, timer):
    compile_model(model, cfg)
    timer.start_fit()  # the train function is built (compiled) inside fit
    model.fit(
        batches,
        epochs=cfg.params["epochs"],
        shuffle=False,
        workers=int(switches["workers"]),
        callbacks=[timer],
        verbose=0,
    )


def train_steps(cfg, weights, x, y, steps):
    """The training-equivalence test's entry (tests/test_training_equivalence.py): from canonical `weights`, `steps`
    steps of `fit` on the one batch (x, y) as main compiles the model; (each step's loss, weights after each)."""
    switches = resolve_switches(SWITCHES, cfg)
    model = build_model(implementation=int(switches["implementation"]))
    load_canonical(model, weights)
    compile_model(model, cfg)
    return fit_steps(model, np.asarray(x, np.int32), np.asarray(y, np.int32), steps, read_canonical)


# ==== Evaluate ====
# rosetta: evaluate
def evaluate(model, x_test, y_test, batch_size):
    """predict() runs in inference mode over every test sample, the last partial batch too."""
    logits = model.predict(x_test, batch_size=batch_size)
    return metrics.accuracy(np.asarray(logits, np.float32), y_test)


# ==== Main ====
def main(cfg):
    p, switches = cfg.params, resolve_switches(SWITCHES, cfg)
    check_device(cfg)
    check_precision(cfg.precision)
    np.random.seed(0)  # Keras 2's initializers seed from NumPy
    x_train, y_train, x_test, y_test = load_data(cfg)
    model = build_model(
        implementation=int(switches["implementation"]),
        max_features=p["max_features"],
        embedding_dim=p["embedding_dim"],
        hidden=p["hidden"],
        num_classes=p["num_classes"],
    )
    load_canonical(model, canonical.init_weights("gru"))  # the same start in every framework (docs/design.md)
    batches = EpochBatches(len(x_train), p["batch_size"], lambda idx: (x_train[idx], y_train[idx]))
    timer = EpochTimer()
    train_step(model, batches, cfg, switches, timer)

    accuracy = evaluate(model, x_test, y_test, p["batch_size"])
    samples = len(batches) * p["batch_size"]
    return {
        "metrics": train_metrics(
            timer.epoch_seconds,
            samples,
            warmup=timer.warmup,
            steps=len(batches),
            windows=timer.windows,
            accuracy=accuracy,
            init="canonical",
            parameters=count_parameters(model),
            **metrics.loss_metrics(timer.losses, len(batches)),
            epochs=p["epochs"],
            train_samples=len(x_train),
            test_samples=len(x_test),
            data_placement="host",
            differences=[ADAM_EPSILON_HAT] + differences(),
        ),
        "timing": train_timing(timer.windows, warmup=timer.warmup),
        "switches": {
            **switches,
            "cudnn_rnn": False,
            "reset_after": True,
            "backend": keras.backend.backend(),
            "floatx": keras.backend.floatx(),
            "adam_epsilon": f"{p['eps']:g}, before bias correction (Keras)",
            **backend_switches(),
        },
    }
