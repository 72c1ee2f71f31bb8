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


@pytest.mark.framework
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
    out = subprocess.run(
        [str(framework_python("pytorch")), "-c", PROBE.format(root=str(ROOT), cases=cases)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    counted = json.loads(out.stdout.strip().splitlines()[-1])
    for task, shape, _ in cases:
        ours = flops.FORWARD[task](params.task_params(task, scale))
        assert ours == pytest.approx(counted[task + str(shape)], rel=0.03), (task, scale)


@pytest.mark.unit
def test_training_costs_three_forward_passes_and_extraction_one():
    p = params.task_params("cnn")
    assert flops.per_sample("cnn", p) == 3 * flops.cnn(p)
    assert flops.per_sample("resnet50", params.task_params("resnet50")) == flops.resnet50(params.RESNET50)
    assert flops.resnet50(params.RESNET50) == pytest.approx(8.18e9, rel=0.01)  # the published 4.09 GMACs


ZEN4 = {
    "cpu": "AMD EPYC",
    "cpu_vendor": "AuthenticAMD",
    "cpu_family": "25",
    "cpu_model_number": "17",
    "cpu_stepping": "1",
    "cpu_flags": ["avx2", "avx512_bf16", "avx512f", "fma"],
    "cpu_usable": 2,
    "cpu_mhz": 2596,
}


@pytest.mark.unit
def test_efficiency_has_one_denominator_per_machine_and_the_own_gemm_beside_it():
    from shared.calibration import efficiency
    from shared.runner import RunConfig

    cfg = RunConfig("pytorch", "cnn", data=None, out=None, scale="demo")
    per_sample = flops.per_sample("cnn", cfg.params)
    peak = 2 * 2596e6 * 32  # Zen 4: two 256-bit FMA pipes, 32 fp32 FLOP a cycle, whatever AVX-512 says
    got = efficiency(
        cfg,
        {"steady_samples_per_second": 100.0, "samples_per_second": 50.0},
        {"gemm_fp32_flops": per_sample * 400.0, "gemm_reduced_flops": None},
        ZEN4,
    )
    assert got["achieved_flops"] == per_sample * 100.0 and got["peak_flops"] == peak
    assert got["efficiency"] == per_sample * 100.0 / peak and got["efficiency_of_gemm"] == 0.25
    assert got["peak_source"] == "2 cores × 2596 MHz (reported) × 32 FLOP/cycle" and got["implausible"] == []
    # the kernel's maximum clock wins over the reported one; another framework's GEMM changes only its own figure
    fast = efficiency(
        cfg,
        {"steady_samples_per_second": 100.0},
        {"gemm_fp32_flops": per_sample * 200.0},
        {**ZEN4, "cpu_max_mhz": 3700},
    )
    assert fast["peak_flops"] == 2 * 3700e6 * 32 and fast["efficiency_of_gemm"] == 0.5
    # a bf16 cell is measured against the bf16 GEMM and its GPU's bf16 peak; two GPUs against twice one GPU's
    gpu = RunConfig("pytorch", "densenet121", data=None, out=None, scale="demo", device="gpu", gpus=2, precision="bf16")
    h200 = {"gpu_facts": [{"name": "NVIDIA H200", "memory_mib": 144384}]}
    per = flops.per_sample("densenet121", gpu.params)
    got = efficiency(
        gpu,
        {"steady_samples_per_second": 10.0, "devices": 2},
        {"gemm_fp32_flops": 1.0, "gemm_reduced_flops": per * 10},
        h200,
    )
    assert got["efficiency_of_gemm"] == 0.5 and got["peak_flops"] == 2 * 989.4e12
    assert got["efficiency"] == pytest.approx(per * 10 / (2 * 989.4e12))
    assert efficiency(cfg, {"samples_per_second": 1.0}, {"gemm_fp32_flops": None})["efficiency_of_gemm"] is None


@pytest.mark.unit
def test_above_a_hundred_percent_of_either_denominator_is_implausible_and_not_an_efficiency():
    from shared import peaks

    assert peaks.shares(2.0, 1.0, 4.0) == {
        "efficiency": None,
        "efficiency_of_gemm": 0.5,
        "implausible": ["200% of the device's peak"],
    }
    # a model's kernels may beat one square GEMM of its framework: that share is given as it is, not implausible
    assert peaks.shares(1.0, 4.0, 0.5) == {"efficiency": 0.25, "efficiency_of_gemm": 2.0, "implausible": []}
    assert peaks.shares(1.0, 1.0, 1.0)["implausible"] == []  # exactly 100 % is possible


@pytest.mark.unit
@pytest.mark.parametrize(
    "name, precision, tflops",
    [
        ("NVIDIA H200", "fp32", 67.0),
        ("NVIDIA H200", "tf32", 494.7),
        ("NVIDIA H200", "bf16", 989.4),
        ("NVIDIA H100 80GB HBM3", "bf16", 989.4),
        ("NVIDIA H100 PCIe", "bf16", 756.0),
        ("NVIDIA A100-SXM4-80GB", "tf32", 156.0),
        ("NVIDIA A100-PCIE-40GB", "fp32", 19.5),
        ("Tesla V100-SXM2-16GB", "amp", 125.0),
        ("Tesla V100-SXM2-16GB", "bf16", None),
        ("Tesla T4", "amp", 65.0),
        ("NVIDIA L4", "bf16", 121.0),
        ("NVIDIA A10", "fp32", 31.2),
        ("NVIDIA A10G", "fp32", None),
        ("NVIDIA H100 NVL", "bf16", None),
        ("NVIDIA GeForce RTX 4090", "fp32", None),
    ],
)
def test_gpu_peaks_are_the_datasheets_dense_rates_and_none_where_unsure(name, precision, tflops):
    from shared import peaks

    assert peaks.gpu_peak(name, precision) == (tflops * 1e12 if tflops else None)


@pytest.mark.unit
def test_a_cpu_peak_comes_from_the_records_own_facts():
    from shared import peaks

    assert peaks.cpu_peak(ZEN4) == 2 * 2596e6 * 32
    assert peaks.cpu_peak(ZEN4, "bf16") == 2 * 2 * 2596e6 * 32  # AVX-512 BF16's dot product
    assert peaks.cpu_peak({**ZEN4, "cpu_flags": ["avx2", "fma"]}, "bf16") is None
    zen5 = {**ZEN4, "cpu_family": "26", "cpu_model_number": "2"}  # not in the table: the flags decide
    assert peaks.cpu_peak(zen5) == 2 * 2596e6 * 64
    assert (
        peaks.cpu_peak({**ZEN4, "cpu_vendor": "GenuineIntel", "cpu_family": "6", "cpu_flags": ["avx2", "fma"]})
        == 2 * 2596e6 * 32
    )
    assert peaks.cpu_peak({k: v for k, v in ZEN4.items() if k != "cpu_mhz"}) is None  # records before the clock
    assert peaks.device_peak({}, "cpu", "fp32") == (None, "no CPU clock in the record")


@pytest.mark.unit
def test_a_gemm_faster_than_the_cpu_can_be_is_recorded_as_implausible_not_used(monkeypatch):
    from types import SimpleNamespace

    from shared import calibration
    from shared.runner import RunConfig

    cfg = RunConfig("cntk", "cnn", data=None, out=None, scale="demo")
    monkeypatch.setattr(calibration, "host_bandwidth", lambda: 1e10)
    cached = SimpleNamespace(gemm=lambda cfg, n, dtype: ((lambda: None), (lambda: None)))  # returns at once
    block = calibration.calibrate(cached, cfg, {"cpu_flags": ["avx2"], "cpu_usable": 2})
    assert block["gemm_fp32_flops"] is None and "implausible fp32 GEMM rate" in block["note"]
    assert calibration.cpu_ceiling({"cpu_flags": ["avx2", "avx512f"], "cpu_usable": 2}) == 2 * 5e9 * 64


@pytest.mark.unit
def test_a_gpu_cell_calibrates_tf32_as_tf32_and_its_host_to_device_copies(monkeypatch):
    """On a GPU: the GEMM a saturating 8192², fp32 measured as fp32 and a tf32 cell's product as TF32 (never an fp32
    figure taken with TF32 on), and the host-to-device copy from pinned and from pageable memory."""
    from types import SimpleNamespace

    from shared import calibration
    from shared.runner import RunConfig

    clock = [0.0]
    monkeypatch.setattr(calibration.time, "perf_counter", lambda: clock[0])

    def takes(seconds):
        def run():
            clock[0] += seconds

        return run

    asked = []

    def gemm(cfg, n, dtype):
        asked.append((n, dtype))
        return takes({"float32": 2e-2, "tfloat32": 4e-3}[dtype]), (lambda: None)

    def device_copy(cfg, nbytes, pinned):
        asked.append((nbytes, "pinned" if pinned else "pageable"))
        return takes(nbytes / (50e9 if pinned else 10e9)), (lambda: None)

    package = SimpleNamespace(gemm=gemm, device_copy=device_copy)
    cfg = RunConfig("pytorch", "cnn", data=None, out=None, device="gpu", precision="tf32")
    block = calibration.calibrate(package, cfg, {})
    n = calibration.N_GPU
    assert asked == [
        (n, "float32"),
        (n, "tfloat32"),
        (calibration.COPY_BYTES, "pinned"),
        (calibration.COPY_BYTES, "pageable"),
    ]
    assert block["gemm_fp32_flops"] == pytest.approx(2 * n**3 / 2e-2)
    assert block["reduced_dtype"] == "tfloat32" and block["gemm_reduced_flops"] == pytest.approx(2 * n**3 / 4e-3)
    assert block["h2d_pinned_bytes_per_s"] == pytest.approx(50e9)
    assert block["h2d_pageable_bytes_per_s"] == pytest.approx(10e9)
    assert block["host_copy_bytes_per_s"] is None and block["h2d_note"] is None
    # a package without the probe says so; the CPU records no host-to-device copy at all
    block = calibration.calibrate(SimpleNamespace(gemm=gemm), cfg, {})
    assert block["h2d_pinned_bytes_per_s"] is None and "no host-to-device copy probe" in block["h2d_note"]
    assert calibration.device_copies(package, RunConfig("pytorch", "cnn", data=None, out=None)) == {}


@pytest.mark.unit
def test_a_cpus_peak_is_never_below_the_best_gemm_measured_on_it_and_says_so():
    """A VM reports its nominal clock (2,596 MHz on the reference's Zen 4: 166 GFLOP/s on two cores) while its GEMMs
    reach 217: the peak is the GEMM then, named as such; at or below the clock's peak, the clock's."""
    from shared import peaks

    system = {"cpu_mhz": 2596, "cpu_usable": 2, "cpu_flags": ["avx2", "fma"]}
    clock_peak, words = peaks.device_peak(system, "cpu", "fp32")
    assert clock_peak == 2 * 2596e6 * 32 and "(reported)" in words
    peak, words = peaks.device_peak(system, "cpu", "fp32", measured=217e9)
    assert peak == 217e9 and words.startswith("the best GEMM measured on this machine, 217 GFLOP/s, above 2 cores")
    assert peaks.device_peak(system, "cpu", "fp32", measured=100e9) == (
        clock_peak,
        peaks.device_peak(system, "cpu", "fp32")[1],
    )
    # a GPU's peak is its datasheet's, whatever a GEMM measured
    gpu = {"gpu_facts": [{"name": "NVIDIA H200", "memory_mib": 143771, "driver": "580"}]}
    assert peaks.device_peak(gpu, "gpu", "fp32", measured=1e15)[0] == 67e12
