"""The R runners (r-keras, r-mxnet): R scripts driving the Python frameworks through reticulate, behind the same
runner contract. Their equivalence and learnability run with every framework's (tests/test_equivalence.py,
tests/test_learnability.py: tests/fw_probe.py reaches the R model through runners/rscript.py); here, one full record
per runner validated like the Python runners' records, R errors ending `failed` with R's own message, and a host
without R skipping with what to install.

They run where `Rscript` with reticulate and the framework's Python environment exist; elsewhere they are skipped with
what to install, and in CI (CI=true) they fail instead, like every framework test.
"""

import json
import os
import shutil
import subprocess

import pytest
from conftest import IN_CI, ROOT

from scripts.launch.venvs import python_of
from scripts.plan.matrix import load
from shared import timing

pytestmark = pytest.mark.integration


def missing(message):
    pytest.fail(message) if IN_CI else pytest.skip(message)


def r_python(framework):
    """The interpreter R drives for `framework` (RETICULATE_PYTHON); skip (CI: fail) where R or it is missing."""
    if not shutil.which("Rscript"):
        missing("Rscript missing: apt-get install r-base-core r-cran-reticulate r-cran-jsonlite")
    probe = subprocess.run(
        ["Rscript", "--vanilla", "-e", "library(reticulate); library(jsonlite)"], capture_output=True, text=True
    )
    if probe.returncode != 0:
        missing(
            f"R lacks reticulate or jsonlite ({probe.stderr.strip()[-200:]}): apt-get install r-cran-reticulate "
            "r-cran-jsonlite"
        )
    python = python_of(load().frameworks[framework])
    if not python.exists():
        missing(f"{python} missing: build it with `python -m scripts.launch.venvs {framework}`")
    return python


def run_r_runner(framework, task, out, *args, data):
    argv = [
        str(r_python(framework)),
        "-m",
        "runners",
        framework,
        task,
        "--data",
        str(data),
        "--out",
        str(out),
        "--device",
        "cpu",
        *args,
    ]
    proc = subprocess.run(
        argv, cwd=ROOT, capture_output=True, text=True, timeout=900, env={**os.environ, "PYTHONPATH": str(ROOT)}
    )
    return proc, json.loads(out.read_text())


@pytest.mark.parametrize("framework, task", [("r-keras", "cnn"), ("r-mxnet", "resnet50")])
def test_r_record_has_the_whole_schema(framework, task, synthetic_data, tmp_path):
    """The record shared/runner.py writes for every runner (tests/test_runner_contract.py's fields), plus R's
    provenance in the system block."""
    proc, record = run_r_runner(
        framework, task, tmp_path / "r.json", "--scale", "tiny", "--repeats", "2", data=synthetic_data
    )
    assert set(record) == {
        "schema",
        "run_id",
        "cell",
        "status",
        "reason",
        "log_tail",
        "metrics",
        "timing",
        "system",
        "started_at",
        "finished_at",
        "git_commit",
    }
    assert proc.returncode == 0 and record["status"] == "ok", (record["reason"], record["log_tail"])
    assert record["cell"]["framework"] == framework and record["cell"]["data"] == "synthetic"
    system = record["system"]
    assert {"python", "cpu", "framework_version", "cuda", "cudnn", "driver", "gpus", "host"} <= set(system)
    assert system["r_version"].startswith("4.") and system["reticulate_version"]
    assert system["framework_version"].startswith(f"R {system['r_version']} / reticulate ")
    metrics = record["metrics"]
    assert metrics["data_placement"] == "host" and isinstance(metrics["differences"], list)
    if task == "resnet50":
        assert metrics["seconds_per_1000_images"] > 0 and metrics["weights"] == "random"
        assert record["timing"]["repeats"] == timing.MIN_SAMPLES == len(record["timing"]["values"])
    else:
        assert metrics["train_seconds"] > 0 and len(metrics["epoch_seconds"]) == metrics["epochs"] == 2
        # one window of WINDOW_STEPS steps after the first step (tiny: 20 steps an epoch, 2 epochs: 3 + 4 windows),
        # the first two to five of them the warm-up (shared.timing.warm_windows), the rest the samples
        assert record["timing"]["unit"] == "seconds per step" and metrics["warmup_seconds"] > 0
        windows = record["timing"]["warmup_windows"] + record["timing"]["values"]
        assert record["timing"]["repeats"] == len(record["timing"]["values"]) >= 2 and len(windows) == 7


def test_r_error_is_a_failed_record_with_rs_message(synthetic_data, tmp_path):
    """An error inside the R script (here: a data file gone after the manifest check) ends `failed`, and the reason
    is the error R saw (the loader's own message, naming the file)."""
    data = tmp_path / "data"
    shutil.copytree(synthetic_data / "cifar10", data / "cifar10")
    (data / "cifar10" / "cifar-10-batches-py" / "test_batch").unlink()
    proc, record = run_r_runner("r-keras", "cnn", tmp_path / "r.json", "--scale", "tiny", data=data)
    assert proc.returncode == 1 and record["status"] == "failed"
    assert record["reason"].startswith("RError: ") and "test_batch" in record["reason"], record["reason"]


def test_r_unknown_switch_fails_naming_it(synthetic_data, tmp_path):
    """An error raised by R code itself (stop() in runners/rscript.R's resolve_switches)."""
    proc, record = run_r_runner(
        "r-mxnet", "gru", tmp_path / "r.json", "--scale", "tiny", "--switch", "turbo=on", data=synthetic_data
    )
    assert proc.returncode == 1 and record["status"] == "failed"
    assert "unknown switch(es) turbo" in record["reason"] and "known: " in record["reason"], record["reason"]


def test_r_gpu_only_precision_is_skipped(synthetic_data, tmp_path):
    """A Skip raised by a Python helper called from R (runners.keras' set_precision) stays a skip."""
    proc, record = run_r_runner(
        "r-keras", "gru", tmp_path / "r.json", "--scale", "tiny", "--precision", "amp", data=synthetic_data
    )
    assert proc.returncode == 0 and record["status"] == "skipped" and "GPU" in record["reason"], record["reason"]


def test_a_host_without_r_skips_with_what_to_install(synthetic_data, tmp_path):
    """As a host without a legacy Python does: the cell is skipped, with the packages to install, and the run goes
    on."""
    python = r_python("r-keras")
    out = tmp_path / "r.json"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PATH": os.path.dirname(python)}  # no Rscript on this PATH
    proc = subprocess.run(
        [
            str(python),
            "-m",
            "runners",
            "r-keras",
            "cnn",
            "--data",
            str(synthetic_data),
            "--out",
            str(out),
            "--device",
            "cpu",
            "--scale",
            "tiny",
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    record = json.loads(out.read_text())
    assert proc.returncode == 0 and record["status"] == "skipped", (record, proc.stdout[-2000:])
    assert "R is not installed" in record["reason"] and "r-cran-reticulate" in record["reason"]
