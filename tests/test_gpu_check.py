"""make gpu-check up to the GPU: the system executor, the plan, the budget on paper, the barrier self-test and the
clock's barrier audit (with fake devices), and the whole check with a fake interpreter standing in for a GPU
machine's Python."""
import copy
import hashlib
import json
import os
import queue
import subprocess
import sys
import threading
import time
import zipfile

import pytest
import yaml

from conftest import ROOT
from scripts import gpu_check, records
from scripts import plan as plans
from scripts import run as runs
from scripts.matrix import MatrixError, load, parse
from shared import barrier_check, datasets, timing

EXPECTED = {(f, t, p) for f in ("pytorch", "jax") for t, ps in
            {"cnn": ("fp32", "amp"), "gru": ("fp32", "amp"), "resnet50": ("fp32", "tf32", "amp", "bf16")}.items()
            for p in ps} | {("keras-jax", "cnn", "amp"), ("keras-torch", "cnn", "amp")}   # Keras from the wheels
MEASURED = 16    # cells an H200 reference holds; the Keras ones are estimated by the model


def test_the_plan_lists_the_right_cells_in_the_system_executor(tmp_path):
    plan_file = plans.make(load(), gpu_check.PROFILE, "gpu-check-test", executor="system")
    cells = [c.cell for c in plan_file.cells]
    assert {(c.framework, c.task, c.precision) for c in cells} == EXPECTED
    assert {(c.variant, c.device, c.data, c.scale, c.gpus) for c in cells} == {("system", "gpu", "synthetic", "full", 1)}
    assert plan_file.plan.executor == "system" and {c.image for c in plan_file.cells} == {""}
    plans.write(tmp_path / "plan.json", plan_file)            # a plan without images reads back
    assert plans.read(tmp_path / "plan.json").cells == plan_file.cells
    ordered = gpu_check.ordered(cells)
    assert [c.precision for c in ordered][:6] == ["fp32"] * 6 and ordered[-1].precision == "tf32"


def test_any_local_profile_runs_in_a_given_interpreter_as_variant_system():
    plan_file = plans.make(load(), "demo", "demo-x", executor="system")
    assert {c.cell.variant for c in plan_file.cells} == {"system"}
    assert len(plan_file.cells) == len(plans.make(load(), "demo", "demo-y").cells)


def test_a_system_profile_names_no_image_variant():
    doc = yaml.safe_load((ROOT / "matrix.yaml").read_text())
    doc = copy.deepcopy(doc)
    doc["profiles"]["gpu-check"]["variants"] = ["cu130"]
    with pytest.raises(MatrixError, match="system executor runs cells in an interpreter"):
        parse(doc)


def test_the_check_fits_its_budget_on_paper(capsys):
    assert gpu_check.main(["--dry-run"]) == 0
    out = capsys.readouterr().out
    assert f"{len(EXPECTED)} cells" in out and "budget 9" in out
    assert f"{MEASURED} cells measured in a GPU reference" in out              # the H200's, results/reference
    assert gpu_check.main(["--dry-run", "--budget-minutes", "3"]) == 1


def test_the_model_covers_a_cell_without_a_measurement():
    cell = next(c.cell for c in plans.make(load(), gpu_check.PROFILE, executor="system").cells
                if c.cell.task == "cnn")
    steps = 50_000 // 64 * 10
    assert gpu_check.estimate_seconds(cell, 5) >= gpu_check.START_SECONDS[cell.framework] + steps * 1e-3


# ---------------------------------------------------------------- the whole check, a fake interpreter

@pytest.fixture
def fake_gpu_machine(tmp_path, monkeypatch):
    """A fake interpreter (tests/fake/runners answers `python -m runners`), one fake GPU, small "full-size" twins."""
    python = tmp_path / "python3"
    python.write_text(f"#!/bin/sh\ncd {ROOT / 'tests' / 'fake'} && exec {sys.executable} \"$@\"\n")
    python.chmod(0o755)
    monkeypatch.setenv("ROSETTA_GPU_IDS_AVAILABLE", "0")
    monkeypatch.setitem(datasets.FULL_SIZE, "cifar10", {"train": 640, "test": 128})
    monkeypatch.setitem(datasets.FULL_SIZE, "imdb", {"train": 640, "test": 128})
    monkeypatch.setattr(records, "OWN_RECORDS_ONLY", False)
    monkeypatch.setattr(gpu_check, "install_wheels", lambda python, site: None)   # Keras "installed" (tested below)
    return ["--python", str(python), "--results", str(tmp_path / "results"), "--data-root", str(tmp_path / "data")]


def the_run(tmp_path):
    (run_dir,) = (tmp_path / "results").iterdir()
    return run_dir, json.loads((run_dir / "gpu-check.json").read_text())


def test_the_check_runs_every_cell_in_the_given_interpreter(tmp_path, fake_gpu_machine):
    assert gpu_check.main(fake_gpu_machine) == 0
    run_dir, summary = the_run(tmp_path)
    got = [records.read(p) for p in (run_dir / "cells").glob("*.json")]
    assert {(r["cell"]["framework"], r["cell"]["task"], r["cell"]["precision"]) for r in got} == EXPECTED
    assert {r["status"] for r in got} == {"ok"} and {r["system"]["executor"] for r in got} == {"system"}
    assert {r["system"]["gpu_ids"] for r in got} == {"0"}
    assert [b["status"] for b in json.loads((run_dir / "barriers.json").read_text())] == ["ok"] * 4
    assert summary["not_started"] == [] and len(summary["statuses"]) == len(EXPECTED)
    assert json.loads((tmp_path / "data" / "synthetic" / "cifar10" / "manifest.json").read_text())["train"] == 640
    assert (run_dir / "results.md").exists()


def test_without_the_wheels_the_keras_cells_fail_saying_how_and_the_others_run(tmp_path, fake_gpu_machine,
                                                                                 monkeypatch):
    monkeypatch.setattr(gpu_check, "install_wheels", lambda python, site: "no wheels in X: run `make gpu-wheels`")
    assert gpu_check.main(fake_gpu_machine) == 1
    run_dir, summary = the_run(tmp_path)
    got = {r["cell"]["framework"]: r for r in (records.read(p) for p in (run_dir / "cells").glob("*.json"))
           if r["cell"]["task"] == "cnn" and r["cell"]["precision"] == "amp"}
    assert {fw: r["status"] for fw, r in got.items()} == {"pytorch": "ok", "jax": "ok", "keras-jax": "failed",
                                                          "keras-torch": "failed"}
    assert "make gpu-wheels" in got["keras-jax"]["reason"]
    assert [b["framework"] for b in summary["barrier_tests"]] == ["pytorch", "jax"] or \
        {b["framework"] for b in summary["barrier_tests"]} == {"pytorch", "jax"}


def test_a_leaking_barrier_fails_the_check(tmp_path, fake_gpu_machine, monkeypatch):
    monkeypatch.setenv("FAKE_BARRIER", "leak")
    assert gpu_check.main(fake_gpu_machine) == 1
    run_dir, summary = the_run(tmp_path)
    assert {b["status"] for b in summary["barrier_tests"]} == {"failed"}
    assert "returns early" in summary["barrier_tests"][0]["reason"]


def test_cells_past_the_budget_are_not_started_and_the_check_says_so(tmp_path, fake_gpu_machine, monkeypatch,
                                                                      capsys):
    monkeypatch.setenv("FAKE_BEHAVIOUR", "cnn=slow,gru=slow,resnet50=slow")
    monkeypatch.setenv("FAKE_SLOW_SECONDS", "1.5")
    monkeypatch.setattr(gpu_check, "MIN_CELL_SECONDS", 1.0)
    assert gpu_check.main([*fake_gpu_machine, "--budget-minutes", "0.1"]) == 1
    run_dir, summary = the_run(tmp_path)
    assert summary["not_started"] and len(summary["statuses"]) + len(summary["not_started"]) == len(EXPECTED)
    assert "the check is incomplete" in capsys.readouterr().out


def test_without_a_gpu_the_check_says_where_it_runs(tmp_path, fake_gpu_machine, monkeypatch, capsys):
    monkeypatch.delenv("ROSETTA_GPU_IDS_AVAILABLE")
    monkeypatch.setenv("PATH", str(tmp_path))                  # no nvidia-smi
    assert gpu_check.main(fake_gpu_machine) == 2
    assert "no GPU visible" in capsys.readouterr().err
    assert not (tmp_path / "results").exists()


def test_an_interpreter_that_is_not_there_is_named(tmp_path, capsys):
    assert runs.main(["--profile", "smoke", "--python", str(tmp_path / "nope"), "--results", str(tmp_path)]) == 2
    assert "no executable interpreter there" in capsys.readouterr().err


# ---------------------------------------------------------------- the barrier self-test and audit, fake devices

class FakeDevice:
    """A device that runs queued work on a thread: `matmul` queues JOB seconds of it; the honest barrier and the
    device synchronize wait until it is done, a leaking barrier returns at once, a blind synchronize too."""
    JOB = 0.01

    def __init__(self, barrier_waits=True, sync_sees=True):
        self.work = queue.Queue()
        self.barrier_waits, self.sync_sees = barrier_waits, sync_sees
        threading.Thread(target=self.run, daemon=True).start()

    def run(self):
        while True:
            self.work.get()
            time.sleep(self.JOB)
            self.work.task_done()

    def gemm(self, cfg, n, dtype):
        return (lambda: self.work.put(n)), (self.work.join if self.barrier_waits else lambda: None)

    def sync(self):
        start = time.perf_counter()
        if self.sync_sees:
            self.work.join()
        return time.perf_counter() - start


@pytest.mark.parametrize("device, status, says", [
    (dict(), "ok", None),
    (dict(barrier_waits=False), "failed", "returns before the queued work ends"),
    (dict(sync_sees=False), "failed", "does not see this framework's streams"),
])
def test_the_barrier_self_test_tells_a_waiting_barrier_from_a_leaking_one(monkeypatch, device, status, says):
    fake = FakeDevice(**device)
    monkeypatch.setattr(barrier_check, "PRODUCTS", 10)
    monkeypatch.setattr(barrier_check, "device_sync", lambda: fake.sync)
    result = barrier_check.check("pytorch", fake)
    assert result["status"] == status, result
    assert says is None or says in result["reason"]


def test_the_barrier_self_test_skips_on_the_cpu_with_its_reason():
    result = barrier_check.check("pytorch", FakeDevice(), device="cpu")
    assert result["status"] == "skipped" and "CPU" in result["reason"]


def test_the_clock_audits_its_barrier_on_a_gpu(monkeypatch):
    monkeypatch.setattr(timing, "_audit", [])
    assert timing.summarize([1.0])["barrier_audit"] is None            # no CUDA context: nothing audited
    leftover = iter([1e-5, 0.05])
    monkeypatch.setattr(timing, "device_sync", lambda: lambda: next(leftover))
    for _ in range(2):
        with timing.stopwatch():
            time.sleep(0.01)
    audit = timing.summarize([1.0])["barrier_audit"]
    assert audit["checks"] == 2 and audit["leaks"] == 1 and audit["max_after_seconds"] == 0.05


# ---------------------------------------------------------------- what the bare machine's Python lacks

def test_without_jsonschema_records_are_refused_unless_the_check_reads_its_own(tmp_path, monkeypatch):
    from shared.record import make_record, write_record
    record = make_record({"framework": "pytorch", "task": "cnn", "variant": "system", "precision": "fp32", "gpus": 1,
                          "device": "gpu", "data": "synthetic", "scale": "full"}, "ok", run_id="r")
    write_record(tmp_path / "r.json", record)
    monkeypatch.setattr(records, "VALIDATOR", None)
    with pytest.raises(records.RecordError, match="jsonschema is not installed"):
        records.read(tmp_path / "r.json")
    monkeypatch.setattr(records, "OWN_RECORDS_ONLY", True)
    assert records.read(tmp_path / "r.json")["status"] == "ok"


def test_full_size_twins_are_made_again_when_their_size_differs(tmp_path, monkeypatch):
    monkeypatch.setitem(datasets.FULL_SIZE, "imdb", {"train": 300, "test": 100})
    datasets.prepare(tmp_path, synthetic=True, datasets=("imdb",), full_size=True)
    manifest = lambda: json.loads((tmp_path / "imdb" / "manifest.json").read_text())
    assert (manifest()["train"], manifest()["test"]) == (300, 100)
    datasets.prepare(tmp_path, synthetic=True, datasets=("imdb",))           # any twin will do: kept
    assert manifest()["train"] == 300
    monkeypatch.setitem(datasets.FULL_SIZE, "imdb", {"train": 200, "test": 100})
    datasets.prepare(tmp_path, synthetic=True, datasets=("imdb",), full_size=True)
    assert manifest()["train"] == 200


def test_keras_comes_from_hashed_wheels_installed_offline_or_its_cells_say_how(tmp_path):
    """The GPU machine's Python lacks Keras; gpu-check installs the travelling wheels with pip --no-index
    --require-hashes. Here: a tiny wheel written on the spot, its hash pinned, installed into a site folder and imported
    from there; a wrong hash and a missing wheelhouse are refused with words that say what to do."""
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    wheel = wheels / "rosetta_probe-1.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as z:
        files = {"rosetta_probe/__init__.py": "VALUE = 42\n",
                 "rosetta_probe-1.0.dist-info/METADATA": "Metadata-Version: 2.1\nName: rosetta-probe\nVersion: 1.0\n",
                 "rosetta_probe-1.0.dist-info/WHEEL": "Wheel-Version: 1.0\nGenerator: hand\nRoot-Is-Purelib: true\n"
                                                      "Tag: py3-none-any\n"}
        files["rosetta_probe-1.0.dist-info/RECORD"] = "".join(f"{name},,\n" for name in files) + \
            "rosetta_probe-1.0.dist-info/RECORD,,\n"
        for name, text in files.items():
            z.writestr(name, text)
    digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
    requirements = tmp_path / "requirements.txt"
    requirements.write_text(f"rosetta-probe==1.0 --hash=sha256:{digest}\n")
    site = tmp_path / "site"
    assert gpu_check.install_wheels(sys.executable, site, wheels, requirements) is None
    probe = subprocess.run([sys.executable, "-c", "import rosetta_probe; print(rosetta_probe.VALUE)"],
                           env={**os.environ, "PYTHONPATH": str(site)}, capture_output=True, text=True)
    assert probe.stdout.strip() == "42", probe.stderr
    requirements.write_text(f"rosetta-probe==1.0 --hash=sha256:{'0' * 64}\n")
    assert "pip could not install" in gpu_check.install_wheels(sys.executable, tmp_path / "other", wheels,
                                                                requirements)
    assert "make gpu-wheels" in gpu_check.install_wheels(sys.executable, site, tmp_path / "none", requirements)
    pinned = (ROOT / "docker" / "gpu-check" / "requirements.txt").read_text()
    assert all(f"{name}==" in pinned for name in ("keras", "namex", "optree")) and pinned.count("--hash=sha256:") == 3
