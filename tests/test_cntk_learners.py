"""CNTK's learning-rate spellings, checked against NumPy (runners/cntk/__init__.py says why they are these): the cnn's
`momentum_sgd(learning_parameter_schedule(lr), unit_gain=False)` and the gru's
`adam(learning_parameter_schedule_per_sample(lr), epsilon=eps·batch, unit_gain=True)` over CNTK's summed criterion
must take the steps of mean-loss SGD with plain momentum and of mean-loss Adam (ε before bias correction)."""
import json
import subprocess

import numpy as np
import pytest

from conftest import ROOT, framework_python
from shared import params

# Runs in CNTK's Python 3.6: a linear softmax classifier trained three steps on one fixed batch, each learner spelt
# exactly as the runners spell it; prints the weights after each step.
PROBE = """
import json, sys
import numpy as np
import cntk as C
sys.path.insert(0, {root!r})
from shared import params
x, y, w0 = (np.array(a, np.float32) for a in json.loads(sys.argv[1]))
out = {{}}
for name in ("sgd", "adam"):
    features = C.input_variable(x.shape[1], np.float32)
    labels = C.input_variable(y.shape[1], np.float32)
    w = C.parameter(init=w0)
    loss = C.cross_entropy_with_softmax(C.times(features, w), labels)
    if name == "sgd":
        p = params.CNN
        learner = C.momentum_sgd([w], lr=C.learning_parameter_schedule(p["lr"]),
                                 momentum=C.momentum_schedule(p["momentum"]), unit_gain=False)
    else:
        p = params.GRU
        learner = C.adam([w], lr=C.learning_parameter_schedule_per_sample(p["lr"]),
                         momentum=C.momentum_schedule(p["beta1"]), variance_momentum=C.momentum_schedule(p["beta2"]),
                         epsilon=p["eps"] * len(x), unit_gain=True)
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


def numpy_steps(x, y, w, optimizer):
    w, m, v, steps = w.astype(np.float64), 0.0, 0.0, []
    for t in range(1, 4):
        g = mean_gradient(x, y, w)
        if optimizer == "sgd":                      # plain momentum: v = μv + g, w -= lr·v
            m = params.CNN["momentum"] * m + g
            w = w - params.CNN["lr"] * m
        else:                                        # Adam, ε added to √v before the bias correction
            p = params.GRU
            m = p["beta1"] * m + (1 - p["beta1"]) * g
            v = p["beta2"] * v + (1 - p["beta2"]) * g * g
            w = w - p["lr"] * np.sqrt(1 - p["beta2"] ** t) / (1 - p["beta1"] ** t) * m / (np.sqrt(v) + p["eps"])
        steps.append(w)
    return steps


@pytest.mark.parametrize("optimizer", ["sgd", "adam"])
def test_cntk_learners_take_the_mean_loss_steps(optimizer):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(8, 5)).astype(np.float32)
    y = np.eye(3, dtype=np.float32)[rng.integers(0, 3, 8)]
    w = rng.normal(scale=0.1, size=(5, 3)).astype(np.float32)
    out = subprocess.run([str(framework_python("cntk")), "-c", PROBE.format(root=str(ROOT)),
                          json.dumps([x.tolist(), y.tolist(), w.tolist()])],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    cntk = json.loads(out.stdout.strip().splitlines()[-1])[optimizer]
    for step, (got, expected) in enumerate(zip(cntk, numpy_steps(x, y, w, optimizer)), start=1):
        np.testing.assert_allclose(np.array(got), expected, rtol=1e-4, atol=1e-6, err_msg=f"step {step}")
