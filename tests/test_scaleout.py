"""One plan, many hosts: the plan file every backend reads, one cell of it run by index or id, and the merge of records
from several hosts into one report (idempotent; a retry supersedes the failed attempt, visibly; cells without a
record named). Fabricated records, except the one cell that runs for real."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT

from scripts.launch.executors import RunSettings, SlurmContainerExecutor
from scripts.plan import planfile as plans
from scripts.plan.matrix import Cell, load
from scripts.results import merge, report
from shared.record import make_record, read_record, write_record

SYSTEM = {
    "cpu": "AMD EPYC 9B14",
    "cpu_count": 2,
    "gpus": ["NVIDIA H100"],
    "driver": "580.1",
    "cuda": "13.0",
    "cudnn": 91002,
    "framework_version": "2.14.1",
}


def record(
    framework, status="ok", host="node-a", gpu_ids="0", started="2026-12-03T10:00:00+00:00", gpu=None, **metrics
):
    cell = Cell(framework, "cnn", "cu130", "fp32", 1, "gpu", "synthetic", "tiny")
    r = make_record(
        vars(cell),
        status,
        run_id="full-1",
        reason=None if status == "ok" else "CUDA error: out of memory",
        metrics=metrics or {"train_seconds": 10.0, "accuracy": 0.9},
        system={
            **SYSTEM,
            "host": host,
            "gpu_ids": gpu_ids,
            **({"gpus": [gpu]} if gpu else {}),
            # an ok GPU record carries its GPU's facts (records.GPU_FACTS_REQUIRED)
            "gpu_facts": [{"name": gpu or SYSTEM["gpus"][0], "memory_mib": 81559, "driver": SYSTEM["driver"]}],
        },
        started_at=started,
    )
    r["finished_at"] = started.replace("10:00", "10:05")
    return cell.id, r


def host_folder(root, name, *records):
    for cid, r in records:
        write_record(root / name / "cells" / f"{cid}.json", r)
        (root / name / "logs").mkdir(parents=True, exist_ok=True)
        (root / name / "logs" / f"{cid}.log").write_text(f"log of {cid} on {name}\n")
    return root / name


def snapshot(folder):
    return {p.relative_to(folder): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


# ---------------------------------------------------------------- the plan file


@pytest.mark.unit
def test_the_plan_file_round_trips_and_names_image_service_and_archs(tmp_path):
    plan_file = plans.make(load(), "full", "full-1")
    plans.write(tmp_path / "plan.json", plan_file)
    again = plans.read(tmp_path / "plan.json")
    assert again == plan_file and [c.id for c in again.cells] == [c.id for c in plan_file.plan.cells]
    mxnet = next(c for c in again.cells if c.cell.framework == "mxnet-gluon" and c.cell.device == "gpu")
    assert mxnet.image.startswith("rosetta/mxnet:") and mxnet.service == f"mxnet-gluon-{mxnet.cell.task}"
    assert "sm_86" in mxnet.gpu_archs and "sm_90" not in mxnet.gpu_archs  # the pre-flight needs no matrix
    assert again.find(index=2) == again.cells[2] and again.find(cell_id=again.cells[5].id) == again.cells[5]
    with pytest.raises(plans.PlanError, match=r"outside the plan .*0…"):
        again.find(index=len(again.cells))


@pytest.mark.unit
@pytest.mark.parametrize(
    "text, message",
    [
        ("{not json", "not a readable plan file"),
        ('{"schema": 7, "cells": []}', "plan schema 7"),
        ('{"schema": 1, "run_id": "r"}', "malformed plan"),
    ],
)
def test_a_broken_plan_file_is_refused_saying_how_to_make_one(tmp_path, text, message):
    (tmp_path / "plan.json").write_text(text)
    with pytest.raises(plans.PlanError, match=message):
        plans.read(tmp_path / "plan.json")


@pytest.mark.unit
def test_a_hand_edited_cell_is_refused(tmp_path):
    plans.write(tmp_path / "plan.json", plans.make(load(), "smoke", "s"))
    doc = json.loads((tmp_path / "plan.json").read_text())
    doc["cells"][0]["task"] = "gru"  # the id still says cnn: records would merge wrongly
    (tmp_path / "plan.json").write_text(json.dumps(doc))
    with pytest.raises(plans.PlanError, match="does not match its axes"):
        plans.read(tmp_path / "plan.json")


@pytest.mark.unit
def test_a_cell_that_appears_twice_is_refused(tmp_path):
    plans.write(tmp_path / "plan.json", plans.make(load(), "smoke", "s"))
    doc = json.loads((tmp_path / "plan.json").read_text())
    doc["cells"].append({**doc["cells"][0], "data": "real"})  # same id: its record would overwrite the first's
    (tmp_path / "plan.json").write_text(json.dumps(doc))
    with pytest.raises(plans.PlanError, match="pytorch-cnn-cpu-fp32-1cpu appear more than once"):
        plans.read(tmp_path / "plan.json")


@pytest.mark.unit
def test_scripts_cell_refuses_an_index_outside_the_plan_before_running_anything(tmp_path):
    plans.write(tmp_path / "plan.json", plans.make(load(), "smoke", "s"))
    out = subprocess.run(
        [sys.executable, "-m", "scripts.cell", str(tmp_path / "plan.json"), "--run-dir", str(tmp_path / "run")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, "SLURM_ARRAY_TASK_ID": "9"},
    )
    assert out.returncode == 2 and "outside the plan" in out.stderr and not (tmp_path / "run").exists()


@pytest.mark.framework
def test_a_cell_picked_by_its_completion_index_records_its_host_and_gpus(tmp_path, synthetic_data):
    plan_file = plans.make(load(), "smoke", "k8s-like")
    plans.write(tmp_path / "plan.json", plan_file)
    env = {**os.environ, "JOB_COMPLETION_INDEX": "1", "ROSETTA_HOST": "node-7", "CUDA_VISIBLE_DEVICES": "3"}
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "scripts.cell",
            str(tmp_path / "plan.json"),
            "--run-dir",
            str(tmp_path / "run"),
            "--data-root",
            str(synthetic_data.parent),
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    r = read_record(tmp_path / "run" / "cells" / f"{plan_file.cells[1].id}.json")
    assert r["status"] == "ok" and r["cell"]["task"] == "gru" and r["run_id"] == "k8s-like"
    assert r["system"]["host"] == "node-7" and r["system"]["gpu_ids"] == "3"


@pytest.mark.unit
def test_site_container_runtimes_start_the_cells_image_with_data_read_only(tmp_path):
    plan_file = plans.make(load(), "full", "f")
    planned = next(c for c in plan_file.cells if c.cell.framework == "pytorch")
    run = RunSettings("f", 5, 60.0, Path("/shared/data"))
    out = tmp_path / "results" / "f" / "cells" / f"{planned.id}.json"
    pyxis = SlurmContainerExecutor("pyxis", {planned.id: planned.image}, "registry.example.org#")
    argv = pyxis.command(planned.cell, out, run)
    assert argv[:2] == ["srun", "--ntasks=1"] and f"--container-image=registry.example.org#{planned.image}" in argv
    own = out.parent / f".{planned.id}"  # the cell's own folder, never the run or results/
    assert f"--container-mounts=/shared/data:/data:ro,{own}:/results" in argv
    assert argv[argv.index("--out") + 1] == f"/results/{planned.id}.json"
    apptainer = SlurmContainerExecutor("apptainer", {planned.id: planned.image}, "/sif").command(planned.cell, out, run)
    assert apptainer[:3] == ["apptainer", "run", "--nv"]
    assert "/sif/" + planned.image.replace("/", "_").replace(":", "_") + ".sif" in apptainer
    assert f"/shared/data:/data:ro,{own}:/results" in apptainer
    # --containall: the checkout (working directory), /tmp, /var/tmp and home stay outside; the only binds are these
    assert "--containall" in apptainer and apptainer[apptainer.index("--pwd") + 1] == "/app"
    assert [apptainer[i + 1] for i, word in enumerate(apptainer) if word in ("--bind", "-B")] == [
        f"/shared/data:/data:ro,{own}:/results"
    ]


# ---------------------------------------------------------------- merging records from several hosts


@pytest.mark.unit
def test_records_from_several_hosts_merge_into_one_report_idempotently(tmp_path):
    first = record("pytorch", status="failed", host="node-a", gpu_ids="1")
    retry = record("pytorch", host="node-b", gpu_ids="0", started="2026-12-03T11:00:00+00:00")
    other = record(
        "tensorflow", host="node-c", gpu_ids="2", gpu="NVIDIA A100-SXM4-80GB", train_seconds=20.0, accuracy=0.91
    )
    sources = [
        host_folder(tmp_path / "artifacts", "record-a", first),
        host_folder(tmp_path / "artifacts", "record-b", retry, other),
    ]
    run_dir = tmp_path / "run"
    plan_cells = [first[0], other[0], "jax-cnn-cu130-fp32-1gpu"]
    (tmp_path / "artifacts" / "plan.json").write_text(json.dumps({"cells": [{"id": c} for c in plan_cells]}))

    counts = merge.merge(run_dir, sources, plan=tmp_path / "artifacts" / "plan.json")
    assert counts == {"new": 2, "superseded": 1, "same": 0, "older": 0, "quarantined": 0}
    final = read_record(run_dir / "cells" / f"{first[0]}.json")
    assert final == retry[1]  # the retry is the cell's record, byte for byte
    assert (run_dir / "logs" / f"{first[0]}.log").read_text() == f"log of {first[0]} on record-b\n"
    assert [read_record(p) for p in (run_dir / "attempts" / first[0]).glob("*.json")] == [first[1]]

    paths = report.write_report(run_dir)
    md = paths["markdown"].read_text()
    assert f"retried {first[0]}: failed on node-a" in md and "→ ok on node-b" in md
    assert "1 cell(s) of the plan have no record" in md and "jax-cnn-cu130-fp32-1gpu" in md
    assert "cu130 · fp32 · 1×gpu ‡" in md  # two machine classes in one column: flagged
    assert len(paths["jsonl"].read_text().splitlines()) == 2  # one row per cell, not per attempt

    before = snapshot(run_dir)
    again = merge.merge(run_dir, sources)  # merging the same artifacts twice changes nothing
    assert again["new"] == again["superseded"] == 0 and snapshot(run_dir) == before
    reverse = tmp_path / "reverse"
    merge.merge(reverse, list(reversed(sources)))  # nor does the order the artifacts come in
    assert read_record(reverse / "cells" / f"{first[0]}.json") == retry[1]
    assert [read_record(p) for p in (reverse / "attempts" / first[0]).glob("*.json")] == [first[1]]


@pytest.mark.unit
def test_merge_quarantines_what_is_not_a_record_and_names_the_file(tmp_path):
    (tmp_path / "src" / "cells").mkdir(parents=True)
    (tmp_path / "src" / "cells" / "x.json").write_text("{truncated")
    out = subprocess.run(
        [sys.executable, "-m", "scripts.results.merge", str(tmp_path / "run"), str(tmp_path / "src")],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert "1 quarantined" in out.stdout and "x.json" in out.stderr and "not a readable result record" in out.stderr
    assert out.returncode == 2 and "no records under cells/" in out.stderr  # nothing sound: no report
    assert len(list((tmp_path / "run" / "quarantine").glob("*.quarantined"))) == 1
    out = subprocess.run(
        [sys.executable, "-m", "scripts.results.merge", str(tmp_path / "run"), str(tmp_path / "nowhere")],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert out.returncode == 2 and "no such file or folder" in out.stderr


@pytest.mark.unit
def test_a_record_copied_twice_under_different_folders_is_one_cell(tmp_path):
    cid, r = record("pytorch")
    sources = [host_folder(tmp_path, "a", (cid, r)), host_folder(tmp_path, "copy", (cid, r))]
    counts = merge.merge(tmp_path / "run", sources)
    assert counts["new"] == 1 and counts["same"] == 1 and not (tmp_path / "run" / "attempts").exists()


@pytest.mark.unit
def test_a_runner_host_checks_only_the_image_or_environment_of_its_own_cell(monkeypatch):
    """A GitHub runner builds one image per job: the compose executor must not ask for the whole plan's images."""
    from scripts import cell as cell_module

    seen = []
    monkeypatch.setattr(cell_module.ComposeExecutor, "for_plan", classmethod(lambda cls, plan, m: seen.append(plan)))
    monkeypatch.setattr(cell_module, "local_environments", lambda plan, m: (seen.append(plan), ({}, {}))[1])
    plan_file = plans.make(load(), "full", "f")
    for runtime in ("compose", "local"):
        cell_module.executor_for(plan_file, plan_file.cells[7], runtime, ROOT / "matrix.yaml", "")
    assert [p.cells for p in seen] == [(plan_file.cells[7].cell,)] * 2
