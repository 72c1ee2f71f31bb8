"""The pre-flight knows which image fits which GPU: a cell whose image has no kernels for the host's GPU is recorded
`skipped` with the reason before launch, and the rest of the matrix still runs (fake GPU descriptions: no GPU here)."""

import pytest
from conftest import ROOT  # noqa: F401  (puts the project on sys.path)

from scripts.launch import preflight
from scripts.launch.executors import RunSettings
from scripts.plan.matrix import expand, load
from scripts.run import execute
from shared.record import read_record

pytestmark = pytest.mark.unit

H200 = preflight.HostGpu("0", "NVIDIA H200", "9.0")
A100 = preflight.HostGpu("1", "NVIDIA A100-SXM4-80GB", "8.0")
V100 = preflight.HostGpu("2", "Tesla V100-SXM2-32GB", "7.0")
B200 = preflight.HostGpu("3", "NVIDIA B200", "10.0")
# matrix.yaml's declarations (which `make images` checks against each image's own report): MXNet 1.9.1's kernels stop
# at sm_86 and Caffe2's torch 1.8.1 at sm_70, neither with PTX; cntk-gpu stops at sm_70 but carries PTX. PyTorch's
# CUDA 13 build and JAX start at sm_75 (no Volta), PyTorch's CUDA 12.8 build still has sm_70.
TO_AMPERE = {"mxnet-gluon", "mxnet-module"}
TO_VOLTA = {"caffe2"}
FROM_TURING = {
    "pytorch": {"cu130", "cu130-cudnn928"},
    "lightning": {"cu130", "cu130-cudnn928"},  # the pytorch family's images
    "jax": {"cuda"},
    "keras-tf": {"cuda"},
    "keras-jax": {"cuda"},
    "keras-torch": {"cuda"},
}


def unfit_frameworks(gpus):
    matrix = load()
    plan = expand(matrix, "full")
    unfit = preflight.unfit_cells(plan, matrix, gpus)
    return {(c.framework, c.variant) for c in plan.cells if c.id in unfit}, unfit, plan


def test_legacy_cells_are_unfit_on_hopper_and_nothing_else_is():
    found, unfit, plan = unfit_frameworks([H200])
    assert {f for f, _ in found} == TO_AMPERE | TO_VOLTA
    assert all(c.id in unfit for c in plan.cells if c.framework in TO_AMPERE | TO_VOLTA)
    reason = next(reason for cid, reason in unfit.items() if cid.startswith("mxnet"))
    assert "sm_90" in reason and "NVIDIA H200" in reason and "sm_86" in reason and "gpu_archs" in reason


def test_each_architecture_gets_the_cells_whose_kernels_cover_it():
    assert {f for f, _ in unfit_frameworks([A100])[0]} == TO_VOLTA
    on_volta = unfit_frameworks([V100])[0]
    assert on_volta == {(f, v) for f, variants in FROM_TURING.items() for v in variants}
    assert ("pytorch", "cu128") not in on_volta  # the CUDA 12.8 build still runs Volta
    assert unfit_frameworks([])[0] == set()  # no GPU description: nothing decided here
    assert unfit_frameworks([V100, H200])[0] == unfit_frameworks([V100])[0] | unfit_frameworks([H200])[0]


def test_ptx_lets_newer_gpus_run_and_an_old_driver_is_named():
    found, unfit, _ = unfit_frameworks([B200])  # TensorFlow: sm_90 cubins + compute_90 PTX
    assert ("tensorflow", "cuda") not in found and ("cntk", "gpu") not in found
    old = preflight.HostGpu("0", "NVIDIA H100 80GB HBM3", "9.0", "570.86.15")
    found, unfit, plan = unfit_frameworks([old])
    assert ("pytorch", "cu130") in found and ("pytorch", "cu128") not in found  # CUDA 13 needs driver 580
    reason = next(r for cid, r in unfit.items() if cid.startswith("pytorch-cnn-cu130-"))
    assert "580.65.06" in reason and "570.86.15" in reason and "13.0" in reason
    jit = preflight.HostGpu("3", "NVIDIA B200", "10.0", "570.133.20")
    found, unfit, _ = unfit_frameworks([jit])  # TF's PTX was written by CUDA 12.9: JIT needs 575.51.03
    assert ("tensorflow", "cuda") in found
    assert "JIT" in next(r for cid, r in unfit.items() if cid.startswith("tensorflow-cnn-cuda-"))


def test_cpu_cells_are_never_limited():
    matrix = load()
    assert preflight.unfit_cells(expand(matrix, "demo"), matrix, [H200]) == {}


class NeverLaunch:
    gpu_ids = ("0",)

    def launch(self, *args):
        raise AssertionError("an unfit cell must not be launched")


def test_an_unfit_cell_is_recorded_skipped_without_launching(tmp_path):
    matrix = load()
    plan = expand(matrix, "full")
    cell = next(c for c in plan.cells if c.framework == "mxnet-gluon")
    plan = plan.__class__(plan.profile, plan.executor, 1, 5.0, (cell,))
    execute(
        plan, NeverLaunch(), tmp_path, RunSettings("t", 1, 5.0, tmp_path), preflight.unfit_cells(plan, matrix, [H200])
    )
    record = read_record(tmp_path / "cells" / f"{cell.id}.json")
    assert record["status"] == "skipped" and "sm_90" in record["reason"]


def test_nvidia_smi_rows_are_parsed(monkeypatch):
    class Out:
        returncode, stdout = 0, "0, NVIDIA H200, 9.0, 580.95.05\n1, Tesla V100-SXM2-32GB, 7.0, 580.95.05\n"

    monkeypatch.setattr(preflight.shutil, "which", lambda name: "/usr/bin/nvidia-smi")
    monkeypatch.setattr(preflight, "quiet", lambda argv: Out)
    assert [(g.arch, g.driver) for g in preflight.host_gpus()] == [("sm_90", "580.95.05"), ("sm_70", "580.95.05")]
