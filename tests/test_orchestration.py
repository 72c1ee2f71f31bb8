"""Failure handling and resume: a crashing or hanging cell is recorded and the others finish; a killed run resumes
without redoing finished cells; no record is ever left truncated."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest
from conftest import ROOT
from fake_run import pytorch_demo

from scripts.launch.executors import LocalExecutor, RunSettings
from scripts.plan.matrix import Cell, Plan, expand
from scripts.run import execute
from shared.record import make_record, read_record, write_atomic, write_record

pytestmark = pytest.mark.unit

FAKE_ROOT = ROOT / "tests" / "fake"


def records(run_dir):
    return {p.stem: read_record(p) for p in (run_dir / "cells").glob("*.json")}


def test_crash_hang_and_error_are_recorded_and_the_rest_finish(tmp_path, monkeypatch, synthetic_data):
    monkeypatch.setenv("FAKE_BEHAVIOUR", "gru=crash,resnet50=hang,densenet121=raise")
    plan = pytorch_demo()
    executor = LocalExecutor({c.framework: sys.executable for c in plan.cells}, root=FAKE_ROOT)
    execute(plan, executor, tmp_path, RunSettings("t", 1, 5.0, synthetic_data.parent))
    got = records(tmp_path)
    assert set(got) == {c.id for c in plan.cells}
    by_task = {r["cell"]["task"]: r for r in got.values()}
    assert by_task["cnn"]["status"] == "ok"
    assert by_task["gru"]["status"] == "failed"
    assert "without writing a record" in by_task["gru"]["reason"] and "about to crash" in by_task["gru"]["log_tail"]
    assert by_task["resnet50"]["status"] == "timeout" and "hanging" in by_task["resnet50"]["log_tail"]
    assert by_task["densenet121"]["status"] == "failed"
    assert "the model diverged" in by_task["densenet121"]["reason"]
    assert "RuntimeError" in by_task["densenet121"]["log_tail"]


def test_a_killed_run_resumes_without_redoing_finished_cells(tmp_path, synthetic_data):
    cells = pytorch_demo().cells
    cnn_cells = sum(c.task == "cnn" for c in cells)  # they come first; the run is killed in the first gru cell
    run_dir = tmp_path / "demo-run"
    env = {**os.environ, "FAKE_BEHAVIOUR": "gru=slow", "FAKE_SLOW_SECONDS": "60"}
    proc = subprocess.Popen(
        [sys.executable, str(ROOT / "tests" / "fake_run.py"), str(run_dir), str(synthetic_data.parent)],
        env=env,
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.time() + 60
    while len(list((run_dir / "cells").glob("*.json"))) < cnn_cells and time.time() < deadline:
        time.sleep(0.2)  # the cnn cells finish, then the first gru cell sleeps
    os.killpg(proc.pid, signal.SIGKILL)  # kill the run and its cell, mid-cell
    proc.wait()
    first = records(run_dir)
    assert len(first) == cnn_cells and all(r["status"] == "ok" for r in first.values())
    assert not list((run_dir / "cells").glob(".*.tmp"))  # nothing half-written left behind
    mtimes = {p.name: p.stat().st_mtime_ns for p in (run_dir / "cells").glob("*.json")}

    subprocess.run(
        [sys.executable, str(ROOT / "tests" / "fake_run.py"), str(run_dir), str(synthetic_data.parent)],
        check=True,
        capture_output=True,
        env={**os.environ, "FAKE_BEHAVIOUR": ""},
    )
    second = records(run_dir)
    assert len(second) == len(cells) and all(r["status"] == "ok" for r in second.values())
    assert {p: (run_dir / "cells" / p).stat().st_mtime_ns for p in mtimes} == mtimes  # not redone


def test_atomic_write_never_leaves_a_truncated_file(tmp_path, monkeypatch):
    path = tmp_path / "cell.json"
    good = make_record(
        {k: "x" for k in ("framework", "task", "variant", "precision", "gpus", "device", "data", "scale")}, "ok"
    )
    write_record(path, good)

    class Boom(Exception):
        pass

    monkeypatch.setattr("os.fsync", lambda fd: (_ for _ in ()).throw(Boom()))
    with pytest.raises(Boom):
        write_atomic(path, json.dumps({"schema": 1, "half": "x" * 10000}))
    assert read_record(path) == good  # the old record, whole
    assert [p.name for p in tmp_path.iterdir()] == ["cell.json"]  # no temp file left


def test_unknown_schema_says_what_to_do(tmp_path):
    path = tmp_path / "old.json"
    path.write_text(json.dumps({"schema": 99}))
    with pytest.raises(Exception, match="schema 99.*re-run the cell"):
        read_record(path)


def test_gpu_cells_run_in_parallel_never_sharing_a_gpu(tmp_path, monkeypatch, synthetic_data):
    """Four fake GPUs: cells of 1, 2 and 4 GPUs overlap in time but never on the same GPU; 8 GPUs is skipped."""
    monkeypatch.setenv("FAKE_BEHAVIOUR", "densenet121=slow,cnn=slow")
    monkeypatch.setenv("FAKE_SLOW_SECONDS", "2")
    cells = [
        Cell("pytorch", task, "cu130", "fp32", gpus, "gpu", "synthetic", "tiny")
        for task, gpus in [("cnn", 1), ("densenet121", 1), ("densenet121", 2), ("densenet121", 4), ("densenet121", 8)]
    ]
    cells += [Cell("pytorch", "cnn", "cu130", p, 1, "gpu", "synthetic", "tiny") for p in ("tf32", "amp", "bf16")]
    plan = Plan("gpu", "local", 1, 60.0, tuple(cells))
    executor = LocalExecutor({"pytorch": sys.executable}, root=FAKE_ROOT, gpu_ids=("0", "1", "2", "3"))
    execute(plan, executor, tmp_path, RunSettings("t", 1, 60.0, synthetic_data.parent))
    got = list(records(tmp_path).values())
    assert len(got) == len(cells)
    skipped = [r for r in got if r["status"] == "skipped"]
    assert [r["cell"]["gpus"] for r in skipped] == [8] and "this host has 4" in skipped[0]["reason"]
    ran = [r for r in got if r["status"] == "ok"]
    spans = [
        (r["metrics"]["started"], r["metrics"]["ended"], set(r["metrics"]["visible_gpus"].split(","))) for r in ran
    ]
    assert all(len(gpus) == r["cell"]["gpus"] for (_, _, gpus), r in zip(spans, ran, strict=False))
    overlapping = 0
    for i, (s1, e1, g1) in enumerate(spans):
        for s2, e2, g2 in spans[i + 1 :]:
            if s1 < e2 and s2 < e1:
                overlapping += 1
                assert not g1 & g2, "two running cells shared a GPU"
    assert overlapping > 0, "cells on separate GPUs should run at the same time"


def test_a_framework_without_an_environment_is_recorded_and_the_rest_run(tmp_path, monkeypatch, synthetic_data):
    """No interpreter for a framework (no python3.6 for CNTK here): its cells are `skipped` saying what to install;
    a pip install that failed: its cells are `failed` (a broken install, retried by --resume), with pip's own last
    lines. Neither launches."""
    import scripts.run as run_module
    from scripts.launch import prepare
    from scripts.launch.venvs import EnvBuildError, EnvError

    def ensure(framework):
        if framework.id == "cntk":
            raise EnvError("no python3.6 on PATH or under pyenv; install Python 3.6 or run this framework in its image")
        if framework.id == "caffe2":
            raise EnvBuildError(
                "building the caffe2 environment failed: `-m pip install …` exited 1; its output "
                "ends:\nERROR: No matching distribution found for torch==1.8.1\n(rebuild it with "
                "`python -m scripts.launch.venvs caffe2`)"
            )
        return sys.executable

    monkeypatch.setattr(prepare, "ensure", ensure)
    monkeypatch.setattr(prepare, "prepare_system", lambda frameworks, refused=None: {})
    matrix = run_module.load()
    cells = [
        c for c in expand(matrix, "demo").cells if c.framework in ("cntk", "caffe2", "pytorch") and c.task == "cnn"
    ]
    plan = Plan("demo", "local", 1, 30.0, tuple(cells))
    pythons, unavailable = run_module.local_environments(plan, matrix)
    assert set(pythons) == {"pytorch"}
    assert unavailable["cntk"][0] == "skipped" and "install Python 3.6" in unavailable["cntk"][1]
    assert unavailable["caffe2"][0] == "failed" and "scripts.launch.venvs caffe2" in unavailable["caffe2"][1]
    assert "No matching distribution found for torch==1.8.1" in unavailable["caffe2"][1]

    executor = LocalExecutor({"pytorch": sys.executable}, root=FAKE_ROOT)  # launching cntk or caffe2 would KeyError
    by_framework = lambda name: {c.id: unavailable[name][1] for c in cells if c.framework == name}
    execute(
        plan,
        executor,
        tmp_path,
        RunSettings("t", 1, 30.0, synthetic_data.parent),
        unfit=by_framework("cntk"),
        broken=by_framework("caffe2"),
    )
    got = {r["cell"]["framework"]: r for r in records(tmp_path).values()}
    assert {f: r["status"] for f, r in got.items()} == {"pytorch": "ok", "cntk": "skipped", "caffe2": "failed"}
