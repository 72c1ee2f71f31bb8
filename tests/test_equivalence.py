"""Same canonical weights -> same outputs in every framework as in the NumPy reference; parameter counts match.

cnn and gru compare logits at a fixed tolerance. ResNet-50 (pooled features) and DenseNet-121 (logits) run 53 and
121 layers whose float32 rounding accumulates, and random canonical weights let ResNet's features grow to the
thousands, so they compare at a tolerance relative to the output's scale: |out - expected| <= 1e-4 * max|expected|.
Measured by hand (64×64, batch 2): the float32 reference and torchvision's float32 forward pass each differ from a
float64 run by < 1e-6 of that scale, so 1e-4 leaves ~100× room for other kernels' summation orders, while the
mistakes this test exists to catch move the output by 70× to 3000× more (test_reference_has_teeth below).
"""

import functools

import numpy as np
import probe
import pytest
from conftest import framework_tasks
from probe import inputs
from reference import cnn_forward, densenet121_forward, gru_forward, resnet50_forward

from shared import canonical, params

TASKS = ["cnn", "gru", "resnet50", "densenet121"]
# Frameworks whose layer computes a documented variant of the canonical function (docs/design.md, "Equivalence").
GRU_VARIANT = {  # framework id -> {"reset_after": False} where a GRU applies the reset gate before the matmul
    # cntk: this test runs its CPU path, Recurrence(C.layers.GRU), the original GRU (reset before the matmul, one bias
    # b = b_ih + b_hh); its GPU path, C.optimized_rnnstack (cuDNN), computes the canonical reset-after GRU.
    "cntk": {"reset_after": False},
}
SCALE_TOLERANCE = 1e-4  # resnet50, densenet121: atol as a fraction of max |expected| (see the module docstring)
# Parameter counts read off torchvision 0.29 by hand (resnet50 with fc removed; densenet121(num_classes=14)); they
# pin canonical.SHAPES to the published architectures.
TORCHVISION_PARAMETERS = {"resnet50": 23_508_032, "densenet121": 6_968_206}


def reference(framework, task):
    """The NumPy reference's output for the task's canonical weights and input, in the variant `framework` computes;
    computed once per task and variant in a session (every framework but CNTK shares one)."""
    return _reference(task, tuple(sorted(GRU_VARIANT.get(framework, {}).items())) if task == "gru" else ())


@functools.cache
def _reference(task, variant):
    weights, x = canonical.random_weights(task), inputs(task)
    if task == "cnn":
        return cnn_forward(weights, x)
    if task == "gru":
        return gru_forward(weights, x, **dict(variant))
    return (resnet50_forward if task == "resnet50" else densenet121_forward)(weights, x)


# GRUs with one bias per gate: a reset-before-matmul GRU (CNTK's C.layers.GRU on the CPU) can only use b_ih + b_hh, so
# it has 3·hidden fewer parameters than the canonical GRU; its logits still match (the canonical biases are summed).
ONE_BIAS_GRU = {"cntk"}


def expected_parameters(task, framework=None):
    count = params.TASK_PARAMS[task].get("parameters", TORCHVISION_PARAMETERS.get(task))
    return count - 3 * params.GRU["hidden"] if task == "gru" and framework in ONE_BIAS_GRU else count


@pytest.mark.framework
@pytest.mark.parametrize("framework, task", framework_tasks(TASKS))
@probe.job("forward")
def test_same_weights_same_logits(framework, task, probes):
    job = probe.Job("forward", task)
    out = np.load(probe.outcome(probes.result(framework, job), framework, job))
    expected = reference(framework, task)
    assert out["logits"].shape == expected.shape
    if task in ("cnn", "gru"):
        np.testing.assert_allclose(out["logits"], expected, rtol=1e-4, atol=1e-4)
    else:
        np.testing.assert_allclose(
            out["logits"], expected, rtol=0, atol=SCALE_TOLERANCE * float(np.abs(expected).max())
        )
    assert expected_parameters(task) == canonical.count(task)
    assert int(out["parameters"]) == expected_parameters(task, framework)


@pytest.mark.unit
@pytest.mark.parametrize("task", ["resnet50", "densenet121"])
def test_canonical_layout_is_torchvision(task):
    """The canonical shapes add up to torchvision's parameter counts (BatchNorm statistics excluded)."""
    assert canonical.count(task) == TORCHVISION_PARAMETERS[task]
    assert sum(canonical.is_statistic(name) for name in canonical.SHAPES[task]) == 2 * sum(
        name.endswith(".running_var") for name in canonical.SHAPES[task]
    )


@pytest.mark.unit
def test_reference_distinguishes_gru_variants():
    """The check has teeth: the two GRU formulations give clearly different logits for the same weights."""
    weights, x = canonical.random_weights("gru"), inputs("gru")
    assert np.abs(gru_forward(weights, x) - gru_forward(weights, x, reset_after=False)).max() > 1e-2


@pytest.mark.unit
@pytest.mark.parametrize(
    "task, variant",
    [
        ("resnet50", {"v1": True}),  # the stride on the first 1×1 conv (ResNet v1, Keras' ResNet50)
        ("resnet50", {"tf_same": True}),  # TensorFlow "same" padding on strided convs instead of symmetric zeros
        ("resnet50", {"eps": 1e-3}),  # Keras' default BatchNorm ε instead of 1e-5
        ("densenet121", {"eps": 1e-3}),
    ],
)
def test_reference_has_teeth(task, variant):
    """Each mistake a port is likely to make moves the output far beyond the equivalence tolerance."""
    weights, x = canonical.random_weights(task), inputs(task)
    forward = resnet50_forward if task == "resnet50" else densenet121_forward
    expected = forward(weights, x)
    assert np.abs(forward(weights, x, **variant) - expected).max() > 10 * SCALE_TOLERANCE * np.abs(expected).max()
