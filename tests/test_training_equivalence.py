"""Same start, same batch, same optimizer → the same training step in every framework (docs/design.md, "Equivalence").

From the canonical start (shared.canonical.init_weights), on one fixed batch of the task's batch size with dropout off
(the cnn's recorded `dropout` switch), each runner takes STEPS optimizer steps as its `main` configures them (its own
`train_steps`, built from the same model, optimizer and step functions) and the test compares, with the NumPy
reference of tests/train_reference.py (float64):
- the loss of every step (the forward pass before its update): |loss − reference| ≤ LOSS_TOLERANCE;
- the update of every canonical array after the first step and after the last (state: momentum, Adam's moments and
  bias correction), per array, as a whole and element by element (TOLERANCE).
A framework whose rule differs by design is checked against that variant of the reference (VARIANTS), and its
record names the difference in `metrics.differences`.
"""

import functools

import numpy as np
import probe
import pytest
import train_reference
from conftest import framework_tasks
from probe import batch

from shared import canonical, params

STEPS = probe.TRAIN_STEPS
LOSS_TOLERANCE = 1e-4  # float32 forward passes differ from the float64 reference by < 1e-6 here
# Per array, after step 1 and after the last: (norm, largest element) of the update's error relative to the
# reference update's. The norm checks the update as a whole (rate, momentum, loss reduction), the largest element any
# one weight (Adam's ε acts on the few with tiny gradients). Measured (CPU, float32): a conv kernel's gradient at the
# start is a sum of ~16,000 terms that mostly cancel, so float32 accumulation decides its last digits: oneDNN
# (PyTorch, TensorFlow) and XLA (JAX) stay within 1e-5 of the float64 reference after one step, a plain im2col GEMM
# (Chainer; PyTorch with oneDNN off) within 1.5e-3; after three steps all but XLA within 3.8e-3 (largest element
# 5.4e-3), XLA within 1e-6. The GRUs stay within 1e-4 (largest element 2e-3). The bounds sit 2.5× and more above
# that; the mutations the bounds must catch (a rate or ε 10× off, momentum 0.8, a summed loss, Nesterov, a per-sample
# rate) move them by 5e-2 to 10².
TOLERANCE = {1: (1e-2, 5e-2), STEPS: (1e-2, 5e-2)}
# (framework, task) -> the documented variant of the reference it computes: `epsilon_hat` (Adam's ε added before the
# bias correction, runners' ADAM_EPSILON_HAT), `reset_after` (the GRU formulation, tests/test_equivalence.py).
EPSILON_HAT = {"epsilon_hat": True}  # Keras, TensorFlow, MXNet, Chainer, CNTK: their records say ADAM_EPSILON_HAT
VARIANTS = {
    (framework, "gru"): EPSILON_HAT
    for framework in (
        "tensorflow",
        "keras-tf",
        "keras-jax",
        "keras-torch",
        "mxnet-gluon",
        "mxnet-module",
        "chainer",
        "cntk",
        "keras2-cntk",
        "keras2-theano",
        "r-keras",
        "r-mxnet",
    )
}
# Keras 3's Adam on TensorFlow squares the embedding's sparse gradient per token occurrence (runners.keras.
# ADAM_SPARSE_SQUARES), which this test found: 0.93 of the largest embedding update off at step 1 without the variant.
for framework in ("tensorflow", "keras-tf", "r-keras"):
    VARIANTS[framework, "gru"] = {**EPSILON_HAT, "sparse_squares": True}
# CNTK's CPU GRU, Recurrence(C.layers.GRU): the original GRU with one bias per gate (tests/test_equivalence.py).
VARIANTS["cntk", "gru"] = {**EPSILON_HAT, "reset_after": False, "one_bias": True}


def update_rule(task, variant):
    p = params.TASK_PARAMS[task]
    if task == "cnn":
        return train_reference.sgd_momentum(p["lr"], p["momentum"])
    return train_reference.adam(
        p["lr"],
        p["beta1"],
        p["beta2"],
        p["eps"],
        epsilon_hat=variant.get("epsilon_hat", False),
        sparse_squares=variant.get("sparse_squares", False),
    )


def reference(framework, task):
    """The float64 reference's (losses, weights after each step) from the canonical start on the fixed batch, for
    the rule `framework` computes; computed once per task and rule in a session (most frameworks share one)."""
    return _reference(task, tuple(sorted(VARIANTS.get((framework, task), {}).items())))


@functools.cache
def _reference(task, variant):
    variant = dict(variant)
    x, y = batch(task)
    forward = {key: variant[key] for key in ("reset_after", "one_bias") if key in variant}
    return train_reference.train(
        task, canonical.init_weights(task), x, y.astype(np.int64), update_rule(task, variant), STEPS, **forward
    )


def update_errors(out, start, expected, step):
    """Per canonical array after `step`: (‖Δw − Δw_ref‖ / ‖Δw_ref‖, max |Δw − Δw_ref| / max |Δw_ref|), the
    differences less two float32 spacings of the weight (a float32 weight holds its update no more finely)."""
    errors = {}
    for name, w0 in start.items():
        delta_ref = expected[step - 1][name] - w0
        delta = out[f"{step}:{name}"].astype(np.float64) - w0
        rounding = 2 * np.spacing(np.abs(expected[step - 1][name]).astype(np.float32)).astype(np.float64)
        off = np.maximum(np.abs(delta - delta_ref) - rounding, 0)
        errors[name] = (
            float(np.linalg.norm(off) / max(np.linalg.norm(delta_ref), 1e-30)),
            float(off.max() / max(np.abs(delta_ref).max(), 1e-30)),
        )
    return errors


# the runners with a tuned path (docs/tuned.md)
TUNED = [
    (f, t)
    for f in ("pytorch", "lightning", "jax", "keras-tf", "keras-jax", "keras-torch", "paddle")
    for t in ("cnn", "gru")
] + [("tensorflow", "cnn")]


@pytest.mark.framework
@pytest.mark.parametrize(
    "framework, task, tuning",
    [(f, t, "default") for f, t in framework_tasks(["cnn", "gru"])] + [(f, t, "tuned") for f, t in TUNED],
)
@probe.job("train")
def test_same_training_steps(framework, task, tuning, probes):
    """A tuned cell (compiled, fused, another memory layout) is held to the same reference as its default sibling:
    the same work, whatever path it takes. The probe ran the runner's train_steps on these inputs (tests/probe.py)."""
    job = probe.Job("train", task, tuning)
    out = np.load(probe.outcome(probes.result(framework, job), framework, job))
    weights = canonical.init_weights(task)
    x, y = batch(task)
    losses, expected = reference(framework, task)
    np.testing.assert_allclose(out["loss"], losses, rtol=0, atol=LOSS_TOLERANCE)
    start = train_reference.start(weights, VARIANTS.get((framework, task), {}).get("one_bias", False))
    for step in (1, STEPS):
        errors = update_errors(out, start, expected, step)
        summary = {name: f"{norm:.1e} / {largest:.1e}" for name, (norm, largest) in errors.items()}
        norm_tolerance, max_tolerance = TOLERANCE[step]
        assert all(norm <= norm_tolerance and largest <= max_tolerance for norm, largest in errors.values()), (
            f"step {step}: update off the reference by (norm, largest element) {summary}"
        )


@pytest.mark.unit
def test_reference_tells_the_update_rules_apart():
    """The check has teeth: each named variant moves the GRU's first-step update (or the CNN's third) far beyond the
    bounds, so a framework checked against the wrong rule fails (a short batch keeps this test fast)."""
    rng = np.random.default_rng(3)
    tokens, labels = rng.integers(1, 50, (16, 20)), rng.integers(0, 2, 16)  # a small vocabulary: repeated tokens
    weights = canonical.init_weights("gru")
    p = params.GRU
    runs = {
        name: train_reference.train(
            "gru",
            weights,
            tokens,
            labels,
            train_reference.adam(p["lr"], p["beta1"], p["beta2"], p["eps"], **rule),
            1,
            **forward,
        )[1]
        for name, rule, forward in [
            ("canonical", {}, {}),
            ("epsilon_hat", {"epsilon_hat": True}, {}),
            ("sparse_squares", {"sparse_squares": True}, {}),
            ("one_bias", {}, {"one_bias": True, "reset_after": False}),
        ]
    }
    start = train_reference.start(weights)
    for name in ("epsilon_hat", "sparse_squares", "one_bias"):
        out = {f"1:{k}": v for k, v in runs[name][0].items()}
        errors = update_errors(out, start, runs["canonical"], 1)
        assert max(largest for _, largest in errors.values()) > 10 * TOLERANCE[1][1], name
