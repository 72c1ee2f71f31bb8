"""Shared fixtures: the project root, the synthetic data, and the framework environments.

Framework tests run in each framework's own virtual environment (.venv/FAMILY, `python -m scripts.launch.venvs ID`).
Outside CI a missing environment skips its tests with the command that builds it; in CI (CI=true) it fails them.
"""
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from runners import FRAMEWORKS  # noqa: E402
from scripts.plan.matrix import load  # noqa: E402
from scripts.launch.venvs import python_of  # noqa: E402
from shared import datasets  # noqa: E402

IN_CI = os.environ.get("CI") == "true"


def framework_python(framework):
    """The interpreter of `framework`'s environment; skip (or, in CI, fail) where it has not been built."""
    python = python_of(load().frameworks[framework])
    if not python.exists():
        message = f"{python} missing: build it with `python -m scripts.launch.venvs {framework}`"
        pytest.fail(message) if IN_CI else pytest.skip(message)
    return python


def run_runner(framework, task, out, *args, data=None, timeout=600, env=None):
    """`python -m runners FRAMEWORK TASK …` in the framework's environment; returns the CompletedProcess."""
    argv = [str(framework_python(framework)), "-m", "runners", framework, task, "--data", str(data),
            "--out", str(out), "--device", "cpu", *args]
    return subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})})


# ---------------------------------------------------------------- records as a slower (or faster) install makes them

RATES = ("samples_per_second", "steady_samples_per_second", "achieved_flops", "efficiency", "efficiency_of_gemm")


def rates_over(record, factor, keys=RATES):
    """The record's throughputs and what follows from them (FLOP/s, efficiencies) for times `factor` × longer: a
    slower install is slower in every figure it publishes (records.inconsistencies refuses one that is not)."""
    metrics = record["metrics"]
    for key in keys:
        if metrics.get(key) is not None:
            metrics[key] /= factor
    return record


def scale_clocks(record, factor):
    """`record`, in place, as if every clock had read `factor` × its time: samples, medians, epochs, totals, and
    every rate that follows from them."""
    timing, metrics = record["timing"], record["metrics"]
    for key in ("values", "warmup_windows"):
        timing[key] = [v * factor for v in timing.get(key) or []]
    for key in ("median", "min", "max", "q1", "q3", "warmup"):
        if timing.get(key) is not None:
            timing[key] *= factor
    for key in ("train_seconds", "steady_state_seconds", "seconds_per_1000_images", "train_minutes",
                "warmup_seconds"):
        if metrics.get(key) is not None:
            metrics[key] *= factor
    if metrics.get("epoch_seconds"):
        metrics["epoch_seconds"] = [s * factor for s in metrics["epoch_seconds"]]
    return rates_over(record, factor)


@pytest.fixture(scope="session")
def synthetic_data(tmp_path_factory):
    """The synthetic twins of all three datasets, generated once per test session."""
    root = tmp_path_factory.mktemp("data") / "synthetic"
    datasets.prepare(root, synthetic=True)
    return root


# Every framework whose model code can run here. julia-knet's cannot (Knet is not installable without Julia's
# registry): tests/test_julia_runner.py checks what of it runs here (parsing, the contract part, the skip).
ALL_FRAMEWORKS = [f for f in FRAMEWORKS if f != "julia-knet"]


def framework_tasks(tasks, frameworks=ALL_FRAMEWORKS):
    """(framework, task) pairs for parametrize: each framework with the tasks of `tasks` that matrix.yaml declares
    for it (mxnet-module has no DenseNet-121, for example), so a test never asks a runner for a task it lacks."""
    declared = load().frameworks
    return [(f, t) for f in frameworks for t in tasks if t in declared[f].tasks]
