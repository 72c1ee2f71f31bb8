"""CNTK's learning-rate spellings, checked against NumPy (runners/cntk/__init__.py says why they are these): the
runners' own `make_learner` — the cnn's `momentum_sgd(learning_parameter_schedule(lr), unit_gain=False)` and the gru's
`adam(learning_parameter_schedule_per_sample(lr), epsilon=eps·batch, unit_gain=True)` — over CNTK's summed criterion
must take the steps of mean-loss SGD with plain momentum (PyTorch's SGD) and of mean-loss Adam (ε before the bias
correction: CNTK's form, the difference from PyTorch's Adam that the gru records)."""

import json
import subprocess

import numpy as np
import pytest
from conftest import ROOT, framework_python

from shared import params

# case -> (runner, its hyperparameters). The GRU's ε (1e-8) is far below √v here, so a wrong ε conversion would not
# show; "adam_eps" repeats Adam with an ε of the size of √v, where ε vs ε·batch changes every step.
CASES = {"sgd": ("cnn", params.CNN), "adam": ("gru", params.GRU), "adam_eps": ("gru", {**params.GRU, "eps": 1e-3})}

# Runs in CNTK's Python 3.6: a linear softmax classifier trained three steps on one fixed batch by the learner the
# runner builds (its `make_learner`, told this batch's size); prints the weights after each step.
PROBE = """
import importlib, json, sys
import numpy as np
import cntk as C
sys.path.insert(0, {root!r})
x, y, w0, cases = json.loads(sys.argv[1])
x, y, w0 = (np.array(a, np.float32) for a in (x, y, w0))
out = {{}}
for name, (runner, p) in cases.items():
    features = C.input_variable(x.shape[1], np.float32)
    labels = C.input_variable(y.shape[1], np.float32)
    w = C.parameter(init=w0)
    loss = C.cross_entropy_with_softmax(C.times(features, w), labels)
    learner = importlib.import_module("runners.cntk." + runner).make_learner([w], dict(p, batch_size=len(x)))
    trainer = C.Trainer(C.times(features, w), loss, [learner])
    steps = []
    for _ in range(3):
        trainer.train_minibatch({{features: x, labels: y}})
        steps.append(w.value.tolist())
    out[name] = steps
print(json.dumps(out))
"""


def mean_gradient(x, y, w):
    logits = x @ w
    p = np.exp(logits - logits.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    return x.T @ (p - y) / len(x)


def numpy_steps(x, y, w, optimizer, p):
    w, m, v, steps = w.astype(np.float64), 0.0, 0.0, []
    for t in range(1, 4):
        g = mean_gradient(x, y, w)
        if optimizer == "sgd":  # PyTorch's SGD momentum: v = μv + g, w -= lr·v
            m = p["momentum"] * m + g
            w = w - p["lr"] * m
        else:  # Adam, ε added to √v before the bias correction
            m = p["beta1"] * m + (1 - p["beta1"]) * g
            v = p["beta2"] * v + (1 - p["beta2"]) * g * g
            w = w - p["lr"] * np.sqrt(1 - p["beta2"] ** t) / (1 - p["beta1"] ** t) * m / (np.sqrt(v) + p["eps"])
        steps.append(w)
    return steps


@pytest.fixture(scope="module")
def problem():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(8, 5)).astype(np.float32)
    y = np.eye(3, dtype=np.float32)[rng.integers(0, 3, 8)]
    w = rng.normal(scale=0.1, size=(5, 3)).astype(np.float32)
    return x, y, w


@pytest.fixture(scope="module")
def cntk_steps(problem):
    """The weights after each of three CNTK steps, per case (one CNTK process for all cases)."""
    out = subprocess.run(
        [
            str(framework_python("cntk")),
            "-c",
            PROBE.format(root=str(ROOT)),
            json.dumps([a.tolist() for a in problem] + [CASES]),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.framework
@pytest.mark.parametrize("case", CASES)
def test_cntk_learners_take_the_mean_loss_steps(case, problem, cntk_steps):
    optimizer = "sgd" if case == "sgd" else "adam"
    expected = numpy_steps(*problem, optimizer, CASES[case][1])
    for step, (got, want) in enumerate(zip(cntk_steps[case], expected, strict=False), start=1):
        np.testing.assert_allclose(np.array(got), want, rtol=1e-4, atol=1e-6, err_msg=f"{case}, step {step}")


@pytest.mark.unit
def test_adam_eps_case_has_teeth(problem):
    """The large-ε case tells ε from ε·batch: the two NumPy trajectories differ far beyond the tolerance."""
    p = CASES["adam_eps"][1]
    right = numpy_steps(*problem, "adam", p)[-1]
    wrong = numpy_steps(*problem, "adam", {**p, "eps": p["eps"] * len(problem[0])})[-1]
    assert np.abs(right - wrong).max() > 10 * (1e-6 + 1e-4 * np.abs(right).max())
