"""Same canonical weights -> same logits in every framework as in the NumPy reference; parameter counts match."""
import subprocess

import numpy as np
import pytest

from conftest import ALL_FRAMEWORKS, ROOT, framework_python
from reference import cnn_forward, gru_forward
from shared import canonical, params

# Frameworks whose layer computes a documented variant of the canonical function (DESIGN.md, "Equivalence").
GRU_VARIANT = {}  # framework id -> {"reset_after": False} where a GRU applies the reset gate before the matmul


def inputs(task):
    rng = np.random.default_rng(7)
    if task == "cnn":
        return rng.random((5, 3, 32, 32), dtype=np.float32)
    return rng.integers(0, params.GRU["max_features"], (5, 23)).astype(np.int32)


@pytest.mark.parametrize("task", ["cnn", "gru"])
@pytest.mark.parametrize("framework", ALL_FRAMEWORKS)
def test_same_weights_same_logits(framework, task, tmp_path):
    python = framework_python(framework)
    weights, x = canonical.random_weights(task), inputs(task)
    np.savez(tmp_path / "in.npz", x=x, **weights)
    proc = subprocess.run([str(python), str(ROOT / "tests" / "fw_probe.py"), framework, task,
                           str(tmp_path / "in.npz"), str(tmp_path / "out.npz")],
                          cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = np.load(tmp_path / "out.npz")
    expected = cnn_forward(weights, x) if task == "cnn" else gru_forward(weights, x, **GRU_VARIANT.get(framework, {}))
    assert out["logits"].shape == expected.shape
    np.testing.assert_allclose(out["logits"], expected, rtol=1e-4, atol=1e-4)
    assert int(out["parameters"]) == params.TASK_PARAMS[task]["parameters"] == canonical.count(task)


def test_reference_distinguishes_gru_variants():
    """The check has teeth: the two GRU formulations give clearly different logits for the same weights."""
    weights, x = canonical.random_weights("gru"), inputs("gru")
    assert np.abs(gru_forward(weights, x) - gru_forward(weights, x, reset_after=False)).max() > 1e-2
