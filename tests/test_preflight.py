"""The pre-flight knows which image fits which GPU: a cell whose image has no kernels for the host's GPU is recorded
`skipped` with the reason before launch, and the rest of the matrix still runs (fake GPU descriptions: no GPU here)."""
from conftest import ROOT  # noqa: F401  (puts the project on sys.path)
from scripts import preflight
from scripts.executors import RunSettings
from scripts.matrix import expand, load
from scripts.run import execute
from shared.record import read_record

H200 = preflight.HostGpu("0", "NVIDIA H200", "9.0")
A100 = preflight.HostGpu("1", "NVIDIA A100-SXM4-80GB", "8.0")


V100 = preflight.HostGpu("2", "Tesla V100-SXM2-32GB", "7.0")
# The legacy GPU wheels and the architectures their kernels stop at (matrix.yaml's gpu_archs): MXNet 1.9.1 sm_86,
# cntk-gpu 2.7 (cuDNN 7) and Caffe2's torch 1.8.1 (CUDA 10.2) sm_75.
TO_AMPERE = {"mxnet-gluon", "mxnet-module"}
TO_TURING = {"cntk", "keras2-cntk", "caffe2"}


def test_legacy_cells_are_unfit_on_hopper_and_nothing_else_is():
    matrix = load()
    plan = expand(matrix, "full")
    unfit = preflight.unfit_cells(plan, matrix, [H200])
    assert {c.framework for c in plan.cells if c.id in unfit} == TO_AMPERE | TO_TURING
    assert all(c.id in unfit for c in plan.cells if c.framework in TO_AMPERE | TO_TURING)
    reason = next(reason for cid, reason in unfit.items() if cid.startswith("mxnet"))
    assert "sm_90" in reason and "NVIDIA H200" in reason and "sm_86" in reason and "gpu_archs" in reason


def test_ampere_runs_mxnet_volta_runs_everything_and_a_mixed_host_needs_kernels_for_each_gpu():
    matrix = load()
    plan = expand(matrix, "full")
    unfit_on_a100 = preflight.unfit_cells(plan, matrix, [A100])
    assert {c.framework for c in plan.cells if c.id in unfit_on_a100} == TO_TURING
    assert preflight.unfit_cells(plan, matrix, [V100]) == {}
    assert preflight.unfit_cells(plan, matrix, []) == {}          # no GPU description: nothing decided here
    assert set(preflight.unfit_cells(plan, matrix, [V100, H200])) == set(preflight.unfit_cells(plan, matrix, [H200]))


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
    execute(plan, NeverLaunch(), tmp_path, RunSettings("t", 1, 5.0, tmp_path),
            preflight.unfit_cells(plan, matrix, [H200]))
    record = read_record(tmp_path / "cells" / f"{cell.id}.json")
    assert record["status"] == "skipped" and "sm_90" in record["reason"]


def test_nvidia_smi_rows_are_parsed(monkeypatch):
    class Out:
        returncode, stdout = 0, "0, NVIDIA H200, 9.0\n1, Tesla V100-SXM2-32GB, 7.0\n"
    monkeypatch.setattr(preflight.shutil, "which", lambda name: "/usr/bin/nvidia-smi")
    monkeypatch.setattr(preflight, "quiet", lambda argv: Out)
    assert [g.arch for g in preflight.host_gpus()] == ["sm_90", "sm_70"]
