"""What a Keras GRU record says about cuDNN (`switches.cudnn_rnn`, runners.keras.cudnn_gru, used by runners/keras/gru.py
and runners/r_keras/gru.R): what ran, not what the device allows. A GPU cell with `--switch use_cudnn=off` runs Keras'
generic loop, JAX has no fused GRU, Keras' torch GRU leaves cuDNN under torch.compile, and where Keras' own dispatch
test (backend.cudnn_ok) sees no GPU, nothing fused ran either. Without a GPU here, the test answers Keras' check both
ways: as it is (no GPU) and replaced by a GPU that takes the layer's arguments."""

import json
import subprocess

import pytest
from conftest import ROOT, framework_python

pytestmark = pytest.mark.framework

# Runs in the Keras environment: the runner's own GRU (small sizes), judged on a "gpu" cell and on the CPU.
PROBE = """
import json, sys
sys.path.insert(0, {root!r})
from runners import prepare_environment
prepare_environment({framework!r})
from keras.src import backend
from runners.keras import cudnn_gru
from runners.keras.gru import build_model

def recorded(device, use_cudnn="auto", jit_compile=False):
    layer = build_model(use_cudnn=use_cudnn, max_features=50, embedding_dim=4, hidden=3).get_layer("gru")
    return cudnn_gru(layer, device, jit_compile)

out = {{"gpu, Keras sees none": recorded("gpu")}}
backend.cudnn_ok = lambda *args, **kwargs: True   # a visible GPU that takes the layer's arguments
out.update({{"gpu": recorded("gpu"), "gpu, use_cudnn=off": recorded("gpu", use_cudnn=False), "cpu": recorded("cpu"),
            "gpu, compiled step": recorded("gpu", jit_compile=True)}})
print(json.dumps(out))
"""

FUSED = {"tensorflow": True, "torch": True, "jax": False}  # backends whose Keras GRU has a cuDNN kernel


@pytest.mark.parametrize(
    "framework, backend", [("keras-tf", "tensorflow"), ("keras-torch", "torch"), ("keras-jax", "jax")]
)
def test_cudnn_rnn_records_what_ran(framework, backend):
    out = subprocess.run(
        [str(framework_python(framework)), "-c", PROBE.format(root=str(ROOT), framework=framework)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    recorded = json.loads(out.stdout.strip().splitlines()[-1])
    assert recorded == {
        "gpu, Keras sees none": False,
        "gpu": FUSED[backend],
        "gpu, use_cudnn=off": False,
        "cpu": False,
        "gpu, compiled step": backend == "tensorflow",  # TF runs the fused op outside XLA; torch.compile leaves it
    }, recorded
