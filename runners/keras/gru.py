"""Keras 3.15 (TF / JAX / PyTorch backend) · gru · embedding → GRU(100) → dense 2 on IMDB sentiment, Adam, via
`model.fit`; layers.GRU runs cuDNN's fused GRU on a GPU under TF and torch (JAX: a compiled lax.scan)."""

import keras
import numpy as np
from keras import layers

from runners.keras import (
    ADAM_EPSILON_HAT,
    FAST_PATH,
    FIT_HOST_SYNCS,
    SPARSE_SQUARES,
    EpochBatches,
    EpochTimer,
    check_device,
    count_parameters,
    cudnn_gru,
    fit_steps,
    set_precision,
)
from shared import canonical, metrics, params
from shared.datasets import load_imdb
from shared.runner import resolve_switches
from shared.timing import train_metrics, train_timing

# ==== Config ====
SIZES = params.GRU  # the canonical sizes (max_features, embedding_dim, hidden, maxlen, num_classes)
# Hyperparameters come from shared/params.py through cfg.params (max_features, maxlen, hidden, epochs, lr, …).
SWITCHES = {
    "use_cudnn": "auto",  # layers.GRU's fused cuDNN kernel where the backend has one and the GRU allows it
    "jit_compile": "auto",  # XLA-compile the train step; Keras' "auto": JAX always, TF on GPU only, torch never
    "steps_per_execution": 1,  # batches per compiled call; >1 saves Python overhead but coarsens the warm-up timing
}
TUNED = FAST_PATH  # tuning=tuned: jit_compile, steps_per_execution 5 but on torch (runners.keras)
# Adam: ε = 1e-8 as everywhere, but Keras adds it before the bias correction (runners.keras.ADAM_EPSILON_HAT; recorded
# in `differences`). Data placement is "host" (the only choice with `fit` on a PyDataset): every batch is gathered in
# host memory in the shared order and copied to the device inside the clock.


# ==== Data ====
def load_data(cfg):
    """IMDB as int32 token ids (N, maxlen), Keras convention, front-padded."""
    p = cfg.params
    x_train, y_train, x_test, y_test = load_imdb(
        cfg.data, p["max_features"], p["maxlen"], p.get("train_samples"), p.get("test_samples")
    )
    return x_train.astype(np.int32), y_train.astype(np.int32), x_test.astype(np.int32), y_test.astype(np.int32)


# ==== Model ====
# rosetta: model
def build_model(
    cfg=None,
    use_cudnn="auto",
    max_features=SIZES["max_features"],
    embedding_dim=SIZES["embedding_dim"],
    hidden=SIZES["hidden"],
    num_classes=SIZES["num_classes"],
):
    """Keras' default initializers draw the canonical init's distributions (uniform ±0.05 embedding, Glorot-uniform
    kernels, orthogonal recurrent kernel, zero biases); main loads the shared canonical numbers. reset_after=True,
    tanh/sigmoid, no recurrent dropout and unroll=False are the conditions for cuDNN's GRU (the seed's CUDNN=True), and
    reset_after=True is also the canonical GRU."""
    return keras.Sequential(
        [
            keras.Input((None,), dtype="int32"),
            layers.Embedding(max_features, embedding_dim, name="embedding"),
            layers.GRU(
                hidden,
                activation="tanh",
                recurrent_activation="sigmoid",
                reset_after=True,
                recurrent_dropout=0.0,
                unroll=False,
                use_cudnn=use_cudnn,
                name="gru",
            ),  # last output only
            layers.Dense(
                num_classes, name="fc", dtype="float32"
            ),  # logits; float32 under mixed precision (Keras guide)
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
    return keras.ops.convert_to_numpy(model(np.asarray(x, np.int32), training=False))


# ==== Train step ====
# rosetta: train-step
# Keras owns the training loop: `compile()` fixes loss and optimizer and `fit()` runs the step. This function is the
# whole of what a Keras user writes for it.
def compile_model(model, cfg, switches):
    p = cfg.params
    model.compile(
        # rosetta: optimizer
        # Keras' Adam default epsilon is 1e-7; the canonical value is 1e-8.
        optimizer=keras.optimizers.Adam(learning_rate=p["lr"], beta_1=p["beta1"], beta_2=p["beta2"], epsilon=p["eps"]),
        # rosetta: loss
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        jit_compile=switches["jit_compile"],
        steps_per_execution=switches["steps_per_execution"],
    )


def train_step(model, batches, cfg, switches, timer):
    compile_model(model, cfg, switches)
    model.fit(batches, epochs=cfg.params["epochs"], shuffle=False, callbacks=[batches.callback, timer], verbose=0)


def train_steps(cfg, weights, x, y, steps):
    """The training-equivalence test's entry (tests/test_training_equivalence.py): from canonical `weights`, `steps`
    steps of `fit` on the one batch (x, y) as main compiles the model; (each step's loss, weights after each). A
    tuned cell's step is compiled as main compiles it, one step per call: its steps_per_execution loop repeats that
    step and would hide the steps in between."""
    switches = {**resolve_switches(SWITCHES, cfg, TUNED), "steps_per_execution": 1}
    model = build_model(use_cudnn=switches["use_cudnn"])
    load_canonical(model, weights)
    compile_model(model, cfg, switches)
    return fit_steps(model, np.asarray(x, np.int32), np.asarray(y, np.int32), steps, read_canonical)


# ==== Evaluate ====
# rosetta: evaluate
def evaluate(model, x_test, y_test, batch_size):
    """predict() runs in inference mode over every test sample, the last partial batch too."""
    logits = model.predict(x_test, batch_size=batch_size, verbose=0)
    return metrics.accuracy(np.asarray(logits, np.float32), y_test)


# ==== Main ====
def main(cfg):
    p, switches = cfg.params, resolve_switches(SWITCHES, cfg, TUNED)
    check_device(cfg)
    policy = set_precision(cfg.precision, cfg.device)
    keras.utils.set_random_seed(0)
    x_train, y_train, x_test, y_test = load_data(cfg)
    model = build_model(
        use_cudnn=switches["use_cudnn"],
        max_features=p["max_features"],
        embedding_dim=p["embedding_dim"],
        hidden=p["hidden"],
        num_classes=p["num_classes"],
    )
    load_canonical(model, canonical.init_weights("gru"))  # the same start in every framework (docs/design.md)
    batches = EpochBatches(len(x_train), p["batch_size"], lambda idx, epoch, rank: (x_train[idx], y_train[idx]))
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
            **metrics.loss_metrics(timer.step_losses(), len(batches)),
            epochs=p["epochs"],
            train_samples=len(x_train),
            test_samples=len(x_test),
            data_placement="host",
            differences=[ADAM_EPSILON_HAT, *SPARSE_SQUARES, *FIT_HOST_SYNCS],
        ),
        "timing": train_timing(timer.windows, warmup=timer.warmup),
        # What ran, not what the device allows: the switch, the device and Keras' own dispatch test together.
        "switches": {
            **switches,
            "cudnn_rnn": cudnn_gru(model.get_layer("gru"), cfg.device, model.jit_compile),
            "dtype_policy": policy,
            "jit_compile_resolved": model.jit_compile,
            "backend": keras.backend.backend(),
            "adam_epsilon": f"{p['eps']:g}, before bias correction (Keras)",
        },
    }
