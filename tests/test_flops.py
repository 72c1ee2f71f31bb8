"""Model FLOPs (shared/flops.py) against a framework's own counter: PyTorch's `torch.utils.flop_counter` over the
PyTorch runners' networks, the forward pass of one sample at the scales the cells use."""
import json
import subprocess

import pytest

from conftest import ROOT, framework_python
from shared import flops, params

PROBE = """
import json, sys, torch
from torch.utils.flop_counter import FlopCounterMode
sys.path.insert(0, {root!r})
import importlib
counts = {{}}
for task, shape, dtype in {cases!r}:
    model = importlib.import_module("runners.pytorch." + task).build_model().eval()
    x = torch.zeros(shape, dtype=getattr(torch, dtype))
    with torch.no_grad(), FlopCounterMode(display=False) as counter:
        model(x)
    counts[task + str(shape)] = counter.get_total_flops()
print(json.dumps(counts))
"""


@pytest.mark.parametrize("scale", ["full", "demo"])
def test_model_flops_match_pytorchs_counter(scale):
    cases = []
    for task in params.TASKS:
        p = params.task_params(task, scale)
        if task == "gru":
            cases.append((task, (1, p["maxlen"]), "int64"))
        else:
            size = {"cnn": 32, "resnet50": p.get("image_size"), "densenet121": p.get("crop_size")}[task]
            cases.append((task, (1, 3, size, size), "float32"))
    out = subprocess.run([str(framework_python("pytorch")), "-c", PROBE.format(root=str(ROOT), cases=cases)],
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    counted = json.loads(out.stdout.strip().splitlines()[-1])
    for task, shape, _ in cases:
        ours = flops.FORWARD[task](params.task_params(task, scale))
        assert ours == pytest.approx(counted[task + str(shape)], rel=0.03), (task, scale)


def test_training_costs_three_forward_passes_and_extraction_one():
    p = params.task_params("cnn")
    assert flops.per_sample("cnn", p) == 3 * flops.cnn(p)
    assert flops.per_sample("resnet50", params.task_params("resnet50")) == flops.resnet50(params.RESNET50)
    assert flops.resnet50(params.RESNET50) == pytest.approx(8.18e9, rel=0.01)    # the published 4.09 GMACs


def test_efficiency_is_the_steady_state_flops_over_the_calibrated_gemm_rate():
    from shared.calibration import efficiency
    from shared.runner import RunConfig
    cfg = RunConfig("pytorch", "cnn", data=None, out=None, scale="demo")
    per_sample = flops.per_sample("cnn", cfg.params)
    got = efficiency(cfg, {"steady_samples_per_second": 100.0, "samples_per_second": 50.0},
                     {"gemm_fp32_flops": per_sample * 400.0, "gemm_reduced_flops": None})
    assert got == {"model_flops_per_sample": per_sample, "achieved_flops": per_sample * 100.0, "efficiency": 0.25}
    # a bf16 cell is measured against the bf16 GEMM; two GPUs against twice one GPU's rate
    gpu = RunConfig("pytorch", "densenet121", data=None, out=None, scale="demo", device="gpu", gpus=2,
                    precision="bf16")
    got = efficiency(gpu, {"steady_samples_per_second": 10.0, "devices": 2},
                     {"gemm_fp32_flops": 1.0, "gemm_reduced_flops": flops.per_sample("densenet121", gpu.params) * 10})
    assert got["efficiency"] == 0.5
    assert efficiency(cfg, {"samples_per_second": 1.0}, {"gemm_fp32_flops": None})["efficiency"] is None


def test_a_gemm_faster_than_the_cpu_can_be_is_recorded_as_implausible_not_used(monkeypatch):
    from types import SimpleNamespace

    from shared import calibration
    from shared.runner import RunConfig
    cfg = RunConfig("cntk", "cnn", data=None, out=None, scale="demo")
    monkeypatch.setattr(calibration, "host_bandwidth", lambda: 1e10)
    cached = SimpleNamespace(gemm=lambda cfg, n, dtype: ((lambda: None), (lambda: None)))   # returns at once
    block = calibration.calibrate(cached, cfg, {"cpu_flags": ["avx2"], "cpu_usable": 2})
    assert block["gemm_fp32_flops"] is None and "implausible fp32 GEMM rate" in block["note"]
    assert calibration.cpu_ceiling({"cpu_flags": ["avx2", "avx512f"], "cpu_usable": 2}) == 2 * 5e9 * 64
