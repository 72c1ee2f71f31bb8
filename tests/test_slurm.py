"""Slurm job arrays, for real: a single-node cluster (tests/slurm_cluster.py) runs the smoke profile's cells plus a
cell that must fail, two at a time on fake GPUs; the merge job runs after all of them, failed ones included. Also what
is refused before anything is submitted."""

import json
import subprocess
import sys
import time
from dataclasses import replace

import pytest
from conftest import IN_CI, ROOT
from slurm_cluster import missing, single_node_slurm

from scripts.launch import slurm
from scripts.plan import planfile as plans
from scripts.plan.matrix import load
from shared.record import read_record

# One pytest-xdist worker runs all of these (`make test` runs two): one single-node cluster (fixed ports) per machine.
pytestmark = pytest.mark.xdist_group("slurm")


def submit(plan_path, run_dir, data_root, env, *extra):
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "scripts.launch.slurm",
            str(plan_path),
            "--run-dir",
            str(run_dir),
            "--data-root",
            str(data_root),
            *extra,
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


def needs_cluster():
    why = missing()
    if why:
        pytest.fail(why) if IN_CI else pytest.skip(why)


def smoke_plan_with_a_failing_cell(path, data_root):
    """The smoke profile (pytorch, every task, tiny) plus a cnn cell on `real` data whose files are broken here (a
    manifest and nothing else: the submission's check passes, the runner fails). It asks for 2 GPUs so that its id
    (which names no data kind) differs from the smoke cnn cell's, and the two records cannot overwrite each other."""
    for name in ("cifar10", "imdb", "chestxray14"):
        (data_root / "real" / name).mkdir(parents=True, exist_ok=True)
        (data_root / "real" / name / "manifest.json").write_text("{}")
    plan_file = plans.make(load(), "smoke", "slurm-test")
    bad = replace(plan_file.cells[0], cell=replace(plan_file.cells[0].cell, data="real", gpus=2))
    plan_file = replace(
        plan_file,
        cells=plan_file.cells + (bad,),
        plan=replace(plan_file.plan, cells=plan_file.plan.cells + (bad.cell,)),
    )
    plans.write(path, plan_file)
    return plan_file


def overlapping(a, b):
    return a["started_at"] < b["finished_at"] and b["started_at"] < a["finished_at"]


@pytest.mark.integration
def test_a_plan_runs_as_slurm_arrays_two_at_a_time_and_the_merge_runs_after_a_failure(tmp_path, synthetic_data):
    needs_cluster()
    data_root = tmp_path / "data"
    data_root.mkdir()
    (data_root / "synthetic").symlink_to(synthetic_data)
    plan_file = smoke_plan_with_a_failing_cell(tmp_path / "plan.json", data_root)
    run_dir = tmp_path / "run"
    started = time.time()
    with single_node_slurm(gpus=2, cpus=2) as env:
        up = time.time() - started
        out = submit(tmp_path / "plan.json", run_dir, data_root, env, "--parallel", "2")
        assert out.returncode == 0, out.stderr
        submitted = time.time()
        while not (run_dir / "results.md").exists() and time.time() - submitted < 480:
            time.sleep(1)
        finished = time.time() - submitted
        merge_log = run_dir / "slurm" / "merge.out"
        assert (run_dir / "results.md").exists(), merge_log.read_text() if merge_log.exists() else "no merge log"
    print(f"\nSlurm: cluster up in {up:.1f} s, {len(plan_file.cells)} cells and the merge in {finished:.0f} s")

    records = {p.stem: read_record(p) for p in (run_dir / "cells").glob("*.json")}
    assert set(records) == {c.id for c in plan_file.cells}  # one record per cell, the failing one too
    failing = plan_file.cells[-1].id
    assert records[failing]["status"] == "failed", records[failing]
    print(f"the failing cell's reason: {records[failing]['reason']}")
    assert all(r["status"] == "ok" for cid, r in records.items() if cid != failing), {
        cid: r["reason"] for cid, r in records.items()
    }
    for record in records.values():  # which host and which GPUs ran each cell
        assert record["system"]["host"] and record["system"]["gpu_ids"]
    densenet = next(r for r in records.values() if r["cell"]["task"] == "densenet121")
    assert sorted(densenet["system"]["gpu_ids"].split(",")) == ["0", "1"]  # --gres=gpu:2 for the 2-device cell
    single = [r for r in records.values() if r["cell"]["gpus"] == 1]
    pairs = [(a, b) for i, a in enumerate(single) for b in single[i + 1 :] if overlapping(a, b)]
    assert any(a["system"]["gpu_ids"] != b["system"]["gpu_ids"] for a, b in pairs), (
        "two cells should have run at the same time, each on its own GPU"
    )
    assert not any(a["system"]["gpu_ids"] == b["system"]["gpu_ids"] for a, b in pairs), "two cells shared a GPU"
    report = (run_dir / "results.md").read_text()
    assert "ResNet-50" in report and "DenseNet-121" in report
    sbatch = (run_dir / "slurm" / "cells-1gpu.sbatch").read_text()
    assert "--array=0-2%2" in sbatch and "--gres=gpu:1" in sbatch  # cnn, gru, resnet50
    sbatch = (run_dir / "slurm" / "cells-2gpu.sbatch").read_text()
    assert "--array=3-4%2" in sbatch and "--gres=gpu:2" in sbatch  # densenet121 and the failing cell
    assert "--dependency=afterany:" in (run_dir / "slurm" / "merge.sbatch").read_text()


@pytest.mark.integration
def test_a_slurm_without_gpus_or_with_too_small_nodes_is_refused_before_submitting(tmp_path):
    needs_cluster()
    plans.write(tmp_path / "plan.json", plans.make(load(), "smoke", "refused"))
    with single_node_slurm(gpus=0, cpus=2) as env:
        out = submit(tmp_path / "plan.json", tmp_path / "run", tmp_path / "data", env)
        assert out.returncode == 2 and "offers no GPUs" in out.stderr
        queue = subprocess.run(["squeue", "-h"], env=env, capture_output=True, text=True).stdout
        assert queue.strip() == ""  # nothing was submitted
    with single_node_slurm(gpus=1, cpus=2) as env:
        out = submit(tmp_path / "plan.json", tmp_path / "run", tmp_path / "data", env)
        assert out.returncode == 2 and "need 2 GPUs on one node" in out.stderr and "has 1" in out.stderr


@pytest.mark.unit
def test_array_specs_gres_parsing_and_limits():
    assert slurm.array_spec([0, 1, 2, 4, 6, 7], 3) == "0-2,4,6-7%3"
    assert slurm.node_gpus("gpu:2\n(null)\ngpu:h100:8(S:0-1)\n") == 8 and slurm.node_gpus("(null)\n") == 0
    plan_file = plans.make(load(), "smoke", "limits")
    with pytest.raises(slurm.SlurmError, match="MaxArraySize is 3"):
        slurm.check_cluster(plan_file, 3, 4)
    slurm.check_cluster(plan_file, 1001, 2)


@pytest.mark.unit
def test_dry_run_writes_the_scripts_for_each_runtime(tmp_path, synthetic_data):
    plans.write(tmp_path / "plan.json", plans.make(load(), "smoke", "dry"))
    for runtime, prefix in (("pyxis", "registry.example.org#"), ("apptainer", "/shared/sif")):
        run_dir = tmp_path / runtime
        out = subprocess.run(
            [
                sys.executable,
                "-m",
                "scripts.launch.slurm",
                str(tmp_path / "plan.json"),
                "--dry-run",
                "--runtime",
                runtime,
                "--image-prefix",
                prefix,
                "--run-dir",
                str(run_dir),
                "--data-root",
                str(synthetic_data.parent),
                "--sbatch=--partition=gpu",
            ],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert out.returncode == 0, out.stderr
        script = (run_dir / "slurm" / "cells-1gpu.sbatch").read_text()
        assert f"--runtime {runtime}" in script and "#SBATCH --partition=gpu" in script
        assert '"${SLURM_ARRAY_JOB_ID}_${SLURM_ARRAY_TASK_ID}"' in script
        assert json.loads((run_dir / "plan.json").read_text())["run_id"] == "dry"
