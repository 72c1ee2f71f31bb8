"""Everything that arrives from outside the process is untrusted input (issue 21): records from other hosts, plan
files, data files. A corpus of hostile records goes through merge and report: nothing is written outside the run
folder, each bad record is quarantined with its reason, the report is complete. Plans with hostile ids are refused
before a Slurm script or a Kubernetes manifest is written. A crafted data file does not execute."""

import copy
import json
import os
import pickle
import re
import stat
import subprocess
import sys
from datetime import UTC
from datetime import datetime as _datetime
from datetime import timedelta as _timedelta
from pathlib import Path

import numpy as np
import pytest
from conftest import ROOT
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import shared.record
from scripts.launch import k8s, slurm
from scripts.paths import safe_id
from scripts.plan import planfile as plans
from scripts.plan.matrix import Cell, load
from scripts.results import merge, records, report
from shared import datasets
from shared.record import make_record, read_record, write_record

pytestmark = pytest.mark.unit

CELL = Cell("pytorch", "cnn", "cu130", "fp32", 1, "gpu", "synthetic", "tiny")
OTHER = Cell("jax", "cnn", "cuda", "fp32", 1, "gpu", "synthetic", "tiny")


H100 = {"name": "NVIDIA H100 80GB HBM3", "memory_mib": 81559, "driver": "550.54.15", "compute_capability": "9.0"}


def honest(cell=CELL, started="2026-12-03T10:00:00+00:00", host="node-a", status="ok"):
    r = make_record(
        vars(cell),
        status,
        run_id="full-1",
        reason=None if status == "ok" else "CUDA error",
        metrics={"train_seconds": 10.0, "accuracy": 0.9},
        system={"cpu": "AMD EPYC", "cpu_count": 2, "host": host, "gpus": ["NVIDIA H100"], "gpu_facts": [H100]},
        started_at=started,
    )
    r["finished_at"] = started.replace("10:00", "10:05")
    return r


def with_(record, path, value):
    """A copy of `record` with the field at `path` ("cell.device") set to `value`."""
    r = copy.deepcopy(record)
    *parents, last = path.split(".")
    target = r
    for key in parents:
        target = target[key]
    target[last] = value
    return r


def nested(depth):
    text = '{"a": ' * depth + "1" + "}" * depth
    return text


HOSTILE = {  # name: the file's text, each a record that must not be merged
    "traversal-in-device": with_(honest(), "cell.device", "/../../../../OUTSIDE/pwned"),
    "traversal-in-framework": with_(honest(), "cell.framework", "../../../OUTSIDE/fw"),
    "traversal-in-variant": with_(honest(), "cell.variant", "..%2f..%2fx/../../y"),
    "traversal-in-host": with_(
        honest(status="failed", started="2026-12-03T09:00:00+00:00"), "system.host", "../../../OUTSIDE/host"
    ),
    "newline-in-run-id": with_(honest(), "run_id", "full-1\n#SBATCH --dependency="),
    "spoofed-run-id": with_(honest(), "run_id", "another-run"),
    "cell-not-planned": honest(OTHER),
    "future-start": with_(
        with_(honest(), "started_at", "9999-12-31T00:00:00+00:00"), "finished_at", "9999-12-31T00:05:00+00:00"
    ),
    "not-a-time": with_(honest(), "started_at", "yesterday"),
    "missing-started-at": {k: v for k, v in honest().items() if k != "started_at"},
    "extra-cell-key": with_(honest(), "cell.evil", "x"),
    "extra-top-key": with_(honest(), "command", "rm -rf /"),
    "gpus-as-text": with_(honest(), "cell.gpus", "2"),
    "metric-as-text": with_(honest(), "metrics.train_seconds", "fast"),
    "unknown-status": with_(honest(), "status", "excellent"),
    "unknown-schema": with_(honest(), "schema", 99),
    "machine-class-injection": with_(honest(), "system.machine_class", "cpu:x\n| forged | row |"),
    "params-hash-not-hex": with_(honest(), "system.params_hash", "../../x"),
}
RAW = {
    "truncated": '{"schema": 1, "cell": {',
    "a-list": "[1, 2, 3]",
    "a-string": '"ok"',
    "deep-nesting": nested(100_000),
    "not-json": "\x00\x01binary",
}


def corpus(folder):
    cells = folder / "cells"
    cells.mkdir(parents=True)
    for name, record in HOSTILE.items():
        (cells / f"{name}.json").write_text(json.dumps(record))
    for name, text in RAW.items():
        (cells / f"{name}.json").write_text(text)
    return folder


def tree(folder):
    return {p for p in folder.rglob("*")}


def test_hostile_records_are_quarantined_and_the_merge_and_report_finish(tmp_path):
    area = tmp_path / "area"  # everything under it but the run folder must stay as it was
    run_dir = area / "runs" / "full-1"
    corpus(area / "artifacts" / "evil")
    good = area / "artifacts" / "good" / "cells"
    write_record(good / f"{CELL.id}.json", honest())
    plan = area / "artifacts" / "plan.json"
    plans.write(plan, plans.PlanFile(load_plan_file().plan, "full-1", (planned(CELL),)))
    before = tree(area)

    counts = merge.merge(run_dir, [area / "artifacts"], plan=plan)
    assert counts["new"] == 1 and counts["quarantined"] == len(HOSTILE) + len(RAW)
    outside = {p for p in tree(area) - before if run_dir not in p.parents and p not in (run_dir, run_dir.parent)}
    assert outside == set(), outside
    assert not (tmp_path / "OUTSIDE").exists() and not list(tmp_path.rglob("pwned*"))
    assert read_record(run_dir / "cells" / f"{CELL.id}.json") == honest()  # the future record did not replace it
    assert not (run_dir / "attempts").exists()

    reasons = [reason for _, reason in records.quarantined(run_dir)]
    assert len(reasons) == len(HOSTILE) + len(RAW)
    for fragment in (
        "cell/device",
        "system/host",
        "run id 'another-run' is not this run's",
        "not in the run's plan",
        "lie in the future",
        "not an ISO 8601 time",
        "'started_at' is a required property",
        "Additional properties are not allowed",
        "not a readable result record",
        "a record is a JSON object",
        "nested too deeply",
        "schema 99",
        "system/machine_class",
        "system/params_hash",
    ):
        assert any(fragment in r for r in reasons), fragment

    md = report.write_report(run_dir)["markdown"].read_text()
    assert "quarantined" in md and md.count("- quarantined ") == len(HOSTILE) + len(RAW)
    assert "| pytorch" in md  # the sound record is in its table


def test_a_bad_record_inside_a_run_folder_does_not_stop_the_report(tmp_path):
    run_dir = tmp_path / "run"
    write_record(run_dir / "cells" / f"{CELL.id}.json", honest())
    (run_dir / "cells" / "broken.json").write_text('{"schema": 1')
    paths = report.write_report(run_dir)
    md = paths["markdown"].read_text()
    assert "broken.json" in md and "not a readable result record" in md
    assert (run_dir / "cells" / "broken.json").exists()  # the source is left as it was
    assert (
        subprocess.run(
            [sys.executable, "-m", "scripts.results.report", str(run_dir)], cwd=ROOT, capture_output=True
        ).returncode
        == 0
    )


def test_attempts_are_ordered_as_times_not_strings(tmp_path):
    """'2026-12-03T10:00:00+00:00' and '2026-12-03T11:30:00+01:00' sort the wrong way as strings."""
    early = honest(status="failed", started="2026-12-03T10:30:00+00:00", host="node-a")
    late = with_(
        with_(honest(host="node-b"), "started_at", "2026-12-03T11:40:00+01:00"),
        "finished_at",
        "2026-12-03T11:45:00+01:00",
    )  # 10:40 UTC: later, though it sorts first as text
    for order in ([early, late], [late, early]):
        run_dir = tmp_path / f"run-{order[0]['system']['host']}"
        for i, r in enumerate(order):
            write_record(tmp_path / f"src-{i}-{run_dir.name}" / "cells" / f"{CELL.id}.json", r)
        merge.merge(run_dir, [tmp_path / f"src-{i}-{run_dir.name}" for i in range(2)])
        assert read_record(run_dir / "cells" / f"{CELL.id}.json")["system"]["host"] == "node-b"


def test_the_host_given_attempt_number_decides_not_the_records_clock(tmp_path):
    """GitHub's artifact of run attempt 2 (record-ID-2) supersedes attempt 1 even where attempt 1 claims a start
    hours later (a skewed or forged clock; a start in the future is refused outright), in whichever order the merges
    see them; the loser is kept, numbered."""
    first = with_(
        with_(honest(status="failed", host="node-a"), "started_at", "2026-12-03T23:00:00+00:00"),
        "finished_at",
        "2026-12-03T23:05:00+00:00",
    )
    second = honest(host="node-b")
    for sequence in ([(1, first), (2, second)], [(2, second), (1, first)]):
        run_dir = tmp_path / f"run-{sequence[0][0]}"
        for attempt, record in sequence:
            source = tmp_path / f"artifacts-{run_dir.name}-{attempt}" / f"record-{CELL.id}-{attempt}"
            write_record(source / "cells" / f"{CELL.id}.json", record)
            merge.merge(run_dir, [source.parent])  # one merge per artifact, as they arrive
        assert read_record(run_dir / "cells" / f"{CELL.id}.json")["system"]["host"] == "node-b"
        assert json.loads((run_dir / "attempts.json").read_text()) == {CELL.id: 2}
        kept = list((run_dir / "attempts" / CELL.id).glob("*.json"))
        assert [p.name.startswith("attempt001-") for p in kept] == [True]
        assert merge.merge(run_dir, [tmp_path / f"artifacts-{run_dir.name}-{a}" for a in (1, 2)])["same"] == 1
        assert "retried" in report.write_report(run_dir)["markdown"].read_text()


def test_record_text_is_inert_in_markdown_and_csv(tmp_path):
    hostile = with_(
        honest(status="failed"),
        "reason",
        '=HYPERLINK("http://evil") | <img src=x onerror=alert(1)> [click](http://evil)\nsecond line',
    )
    run_dir = tmp_path / "run"
    write_record(run_dir / "cells" / f"{CELL.id}.json", hostile)
    paths = report.write_report(run_dir)
    md = paths["markdown"].read_text()
    assert "<img" not in md and "&lt;img" in md and "\\[click\\]" in md
    assert not re.search(r"(?<!\\)\]\(", md)  # no link: every ] before ( is escaped
    note = next(line for line in md.splitlines() if line.startswith("[1]"))
    assert "\\|" in note and "|" not in note.replace("\\|", "")
    csv = paths["csv"].read_text()
    assert "'=HYPERLINK" in csv and ",=HYPERLINK" not in csv and ',"=HYPERLINK' not in csv


def test_host_names_are_made_safe_at_the_source(monkeypatch):
    from shared import sysinfo

    monkeypatch.setenv("ROSETTA_HOST", "../../etc/passwd\nnode")
    host = sysinfo.placement()["host"]
    assert safe_id(host) and "/" not in host


# ---------------------------------------------------------------- plans: hostile ids never reach a shell


def load_plan_file():
    return plans.make(load(), "smoke", "smoke-1")


def planned(cell):
    return plans.PlannedCell(cell, "rosetta/pytorch:cu130", f"{cell.framework}-{cell.task}")


@pytest.mark.parametrize(
    "run_id", ["x\n#SBATCH --dependency=singleton", "x$(touch /tmp/pwned)", "../../x", "", "x y", "run\n"]
)
def test_hostile_run_ids_are_refused_by_plan_slurm_and_kubernetes(tmp_path, run_id):
    good = load_plan_file()
    doc = json.loads(plans.to_json(good))
    doc["run_id"] = run_id
    (tmp_path / "plan.json").write_text(json.dumps(doc))
    with pytest.raises(plans.PlanError, match="run id"):
        plans.read(tmp_path / "plan.json")
    hostile = plans.PlanFile(good.plan, run_id, good.cells)
    with pytest.raises(plans.PlanError, match="run id"):
        slurm.submit(
            hostile,
            tmp_path / "plan.json",
            tmp_path / "run",
            parallel=None,
            runtime="local",
            image_prefix="",
            data_root=tmp_path,
            extra=[],
            dry_run=True,
        )
    assert not (tmp_path / "run").exists()
    with pytest.raises(plans.PlanError, match="run id"):
        k8s.manifests(hostile, k8s.Target(image_prefix="", data_claim="d", results_claim="r"))
    if run_id:  # (an empty one makes plans.make name the run itself)
        with pytest.raises(plans.PlanError):
            plans.make(load(), "smoke", run_id)


def test_a_hostile_cell_axis_in_a_plan_file_is_refused(tmp_path):
    doc = json.loads(plans.to_json(load_plan_file()))
    doc["cells"][0]["variant"] = "cpu$(touch /tmp/pwned)"
    doc["cells"][0]["id"] = Cell(**{k: doc["cells"][0][k] for k in Cell.__dataclass_fields__}).id
    (tmp_path / "plan.json").write_text(json.dumps(doc))
    with pytest.raises(plans.PlanError, match="variant"):
        plans.read(tmp_path / "plan.json")


@pytest.mark.parametrize("tuning", ["tuned$(touch /tmp/pwned)", "fast"])
def test_a_tuning_outside_the_axis_in_a_plan_file_is_refused(tmp_path, tuning):
    doc = json.loads(plans.to_json(load_plan_file()))
    doc["cells"][0]["tuning"] = tuning
    doc["cells"][0]["id"] = Cell(**{k: doc["cells"][0][k] for k in Cell.__dataclass_fields__}).id
    (tmp_path / "plan.json").write_text(json.dumps(doc))
    with pytest.raises(plans.PlanError, match="tuning"):
        plans.read(tmp_path / "plan.json")


def test_a_plan_written_before_the_tuning_axis_reads_as_default_cells(tmp_path):
    good = load_plan_file()
    doc = json.loads(plans.to_json(good))
    for cell in doc["cells"]:
        del cell["tuning"]
    (tmp_path / "plan.json").write_text(json.dumps(doc))
    assert plans.read(tmp_path / "plan.json").cells == good.cells


def test_slurm_scripts_are_private_to_their_owner(tmp_path):
    plan_file = load_plan_file()
    plans.write(tmp_path / "plan.json", plan_file)
    slurm.submit(
        plan_file,
        tmp_path / "plan.json",
        tmp_path / "run",
        parallel=None,
        runtime="local",
        image_prefix="",
        data_root=tmp_path,
        extra=[],
        dry_run=True,
    )
    scripts = list((tmp_path / "run" / "slurm").glob("*.sbatch"))
    assert scripts and all(stat.S_IMODE(p.stat().st_mode) == 0o700 for p in scripts)


# ---------------------------------------------------------------- data files that cannot run code


class Payload:
    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return os.system, (f"touch {self.marker}",)


def test_a_crafted_cifar_batch_of_the_right_size_does_not_execute(tmp_path, synthetic_data):
    root = tmp_path / "synthetic"
    import shutil

    shutil.copytree(synthetic_data / "cifar10", root / "cifar10")
    batch = root / "cifar10" / "cifar-10-batches-py" / "data_batch_1"
    marker = tmp_path / "ran"
    evil = pickle.dumps({b"data": Payload(marker), b"labels": []}, protocol=2)
    size = batch.stat().st_size
    batch.write_bytes(evil + b"\0" * (size - len(evil)))  # same size: the size check alone passes it
    with pytest.raises(datasets.DataError, match="data_batch_1"):
        datasets.load_cifar10(root)
    assert not marker.exists()


def test_a_crafted_imdb_file_does_not_execute_and_the_real_format_loads(tmp_path, synthetic_data):
    marker = tmp_path / "ran"
    evil = np.empty(2, dtype=object)
    evil[0], evil[1] = [1, 2, 3], Payload(marker)
    np.savez(tmp_path / "imdb.npz", x_train=evil, y_train=np.array([0, 1]))
    with pytest.raises(pickle.UnpicklingError, match="posix.system|os.system"):
        datasets.load_npz(tmp_path / "imdb.npz")
    assert not marker.exists()
    arrays = datasets.load_npz(synthetic_data / "imdb" / "imdb.npz")  # ragged lists in object arrays: allowed
    assert arrays["x_train"].dtype == object and isinstance(arrays["x_train"][0], list)
    with np.load(synthetic_data / "imdb" / "imdb.npz", allow_pickle=True) as f:
        assert all(np.array_equal(arrays[k], f[k]) for k in f.files) and set(arrays) == set(f.files)


# ---------------------------------------------------------------- each hostile input, its own reason (issue 31)


def soon(hours):
    from datetime import datetime, timedelta

    return (datetime.now(UTC) + timedelta(hours=hours)).isoformat(timespec="seconds")


HOSTILE_REASONS = {  # name: (record or raw text, the reason's fragment with a plan, without one (None: merged))
    **{
        name: (record, fragment, fragment)
        for name, (record, fragment) in {
            "traversal-in-device": (HOSTILE["traversal-in-device"], ": cell/device: "),
            "traversal-in-framework": (HOSTILE["traversal-in-framework"], ": cell/framework: "),
            "traversal-in-variant": (HOSTILE["traversal-in-variant"], ": cell/variant: "),
            "traversal-in-host": (HOSTILE["traversal-in-host"], ": system/host: "),
            "newline-in-run-id": (HOSTILE["newline-in-run-id"], ": run_id: "),
            "future-start": (HOSTILE["future-start"], "lie in the future"),
            "an-hour-ahead": (
                with_(with_(honest(), "started_at", soon(1)), "finished_at", soon(1.1)),
                "lie in the future",
            ),
            "finished-before-start": (
                with_(honest(), "finished_at", "2026-12-03T09:00:00+00:00"),
                "finished_at 2026-12-03T09:00:00+00:00 is before started_at",
            ),
            "not-a-time": (HOSTILE["not-a-time"], "not an ISO 8601 time"),
            "missing-started-at": (HOSTILE["missing-started-at"], "'started_at' is a required property"),
            "extra-cell-key": (HOSTILE["extra-cell-key"], ": cell: Additional properties are not allowed ('evil'"),
            "extra-top-key": (
                HOSTILE["extra-top-key"],
                "(the record): Additional properties are not allowed ('command'",
            ),
            "gpus-as-text": (HOSTILE["gpus-as-text"], ": cell/gpus: "),
            "metric-as-text": (HOSTILE["metric-as-text"], ": metrics/train_seconds: "),
            "unknown-status": (HOSTILE["unknown-status"], ": status: "),
            "unknown-schema": (HOSTILE["unknown-schema"], "schema 99"),
            "machine-class-injection": (HOSTILE["machine-class-injection"], ": system/machine_class: "),
            "params-hash-not-hex": (HOSTILE["params-hash-not-hex"], ": system/params_hash: "),
            "truncated": (RAW["truncated"], "not a readable result record"),
            "a-list": (RAW["a-list"], "a record is a JSON object, this is a list"),
            "a-string": (RAW["a-string"], "a record is a JSON object, this is a str"),
            "deep-nesting": (RAW["deep-nesting"], "nested too deeply"),
            "not-json": (RAW["not-json"], "not a readable result record"),
            "oversize": ("{" + " " * (records.MAX_BYTES + 1) + "}", "more than any record"),
        }.items()
    },
    "spoofed-run-id": (HOSTILE["spoofed-run-id"], "run id 'another-run' is not this run's ('full-1')", None),
    "cell-not-planned": (honest(OTHER), f"cell {OTHER.id} is not in the run's plan", None),
    "another-cells-file": (
        honest(OTHER),
        f"holds cell {OTHER.id}, but its file name {CELL.id}.json is the slot of {CELL.id}: one cell per slot",
        "same",
    ),
}


@pytest.mark.parametrize("with_plan", [True, False], ids=["plan", "no-plan"])
@pytest.mark.parametrize("name", sorted(HOSTILE_REASONS))
def test_each_hostile_record_is_quarantined_with_its_own_reason(tmp_path, name, with_plan):
    """One hostile file per merge, named as its slot's cell (so no other check can catch it first), with and without
    the run's plan: quarantined with its own reason, nothing written outside the run folder."""
    content, with_reason, without_reason = HOSTILE_REASONS[name]
    reason = with_reason if with_plan else (with_reason if without_reason == "same" else without_reason)
    area = tmp_path / "area"
    run_dir = area / "runs" / "full-1"
    claimed = OTHER.id if name == "cell-not-planned" else CELL.id
    source = area / "artifacts" / "cells" / f"{claimed}.json"
    source.parent.mkdir(parents=True)
    source.write_text(content if isinstance(content, str) else json.dumps(content))
    plan = None
    if with_plan:
        plan = area / "plan.json"
        cells = (planned(CELL), planned(OTHER)) if name == "another-cells-file" else (planned(CELL),)
        plans.write(plan, plans.PlanFile(load_plan_file().plan, "full-1", cells))
    before = tree(area)
    counts = merge.merge(run_dir, [area / "artifacts"], plan=plan)
    outside = {p for p in tree(area) - before if run_dir not in p.parents and p not in (run_dir, run_dir.parent)}
    assert outside == set() and not (tmp_path / "OUTSIDE").exists()
    if reason is None:
        assert counts["new"] == 1 and counts["quarantined"] == 0
        return
    assert counts == {"new": 0, "same": 0, "superseded": 0, "older": 0, "quarantined": 1}
    [(_, got)] = records.quarantined(run_dir)
    assert reason in got, got


def test_a_runner_writing_another_cells_record_in_its_slot_is_refused_by_the_executor(
    tmp_path, monkeypatch, synthetic_data
):
    """pytorch-cnn's runner writes a record claiming jax-cnn: run_cell quarantines it and records pytorch-cnn failed
    with why; jax-cnn's slot stays empty (a later merge cannot be fooled either: the file name is the slot)."""
    from scripts.launch.executors import LocalExecutor, RunSettings
    from scripts.run import run_cell

    monkeypatch.setenv("FAKE_BEHAVIOUR", "cnn=impostor")
    cell = next(c for c in load_plan_file().plan.cells if c.framework == "pytorch" and c.task == "cnn")
    cell = Cell(**{**vars(cell), "device": "cpu", "variant": "cpu", "scale": "tiny"})
    executor = LocalExecutor({"pytorch": sys.executable}, root=ROOT / "tests" / "fake")
    record = run_cell(executor, cell, RunSettings("full-1", 1, 60.0, synthetic_data.parent), tmp_path)
    assert record["status"] == "failed" and record["cell"] == vars(cell)
    assert f"the record written in the slot of cell {cell.id} (run full-1) is of cell jax-cnn" in record["reason"]
    assert read_record(tmp_path / "cells" / f"{cell.id}.json") == record
    [(_, reason)] = records.quarantined(tmp_path)
    assert "one cell per slot" in reason
    assert [p.name for p in (tmp_path / "cells").iterdir()] == [f"{cell.id}.json"]


@pytest.mark.parametrize("with_plan", [True, False], ids=["plan", "no-plan"])
@pytest.mark.parametrize(
    "slot, what", [(f"record-{CELL.id}-1", f"the artifact record-{CELL.id}-1"), ("4242_0", "Slurm task 4242_0")]
)
def test_a_record_delivered_in_another_cells_artifact_or_task_is_quarantined(tmp_path, slot, what, with_plan):
    """pytorch-cnn's artifact (or Slurm task 0, planned for pytorch-cnn) holds a file that claims jax-cnn, named as
    jax-cnn's: it would replace jax-cnn and leave pytorch-cnn missing. Slurm tasks name their cell only through the
    plan (without one, the task's slot is not known and only the file name is checked)."""
    source = tmp_path / "artifacts" / slot / "cells" / f"{OTHER.id}.json"
    write_record(source, honest(OTHER))
    plan = tmp_path / "plan.json"
    plans.write(plan, plans.PlanFile(load_plan_file().plan, "full-1", (planned(CELL), planned(OTHER))))
    counts = merge.merge(tmp_path / "run", [tmp_path / "artifacts"], plan=plan if with_plan else None)
    if slot.startswith("4242") and not with_plan:
        assert counts["new"] == 1
        return
    assert counts["quarantined"] == 1 and counts["new"] == 0
    [(_, reason)] = records.quarantined(tmp_path / "run")
    assert f"holds cell {OTHER.id}, but {what} is the slot of {CELL.id}: one cell per slot" in reason


def test_an_image_based_cell_whose_record_holds_other_code_fails(tmp_path, synthetic_data):
    """Every image-based executor names the code hash its image must hold (expected_code_hash); a record from an
    image of other code is recorded failed, saying so (the fake runner's record holds no code hash at all)."""
    from scripts.launch.executors import LocalExecutor, RunSettings
    from scripts.run import run_cell

    local = LocalExecutor({"pytorch": sys.executable}, root=ROOT / "tests" / "fake")

    class Imaged:
        gpu_ids = ()
        launch, stop, collect = local.launch, local.stop, local.collect

        def expected_code_hash(self, cell):
            return "feedfacefeedface"

    cell = Cell("pytorch", "cnn", "cpu", "fp32", 1, "cpu", "synthetic", "tiny")
    record = run_cell(Imaged(), cell, RunSettings("full-1", 1, 60.0, synthetic_data.parent), tmp_path)
    assert record["status"] == "failed"
    assert "holding code of no known hash, not this checkout's feedfacefeedface" in record["reason"]
    assert run_cell(local, cell, RunSettings("full-1", 1, 60.0, synthetic_data.parent), tmp_path)["status"] == "ok"


@pytest.mark.parametrize("klass", ["?:-.", "?", "?.", "?-"])
def test_a_machine_class_without_a_folder_name_cannot_remove_the_references(tmp_path, monkeypatch, klass):
    from scripts.results import reference, verify

    refs = tmp_path / "results" / "reference"
    (refs / "cpu-x" / "cells").mkdir(parents=True)
    monkeypatch.setattr(verify, "REFERENCES", refs)
    run_dir = tmp_path / "run"
    write_record(run_dir / "cells" / f"{CELL.id}.json", with_(honest(), "system.machine_class", klass))
    plans.write(run_dir / "plan.json", plans.PlanFile(load_plan_file().plan, "full-1", (planned(CELL),)))
    with pytest.raises(ValueError, match="gives no usable folder name"):
        reference.target_for(klass)  # the folder rule itself, whatever read the record
    for make in (reference.copy, reference.add):
        # (a record whose class is not the one its facts give is refused on reading, before the folder rule)
        with pytest.raises(ValueError, match="disagrees with the record's own facts|gives no usable folder name"):
            make(run_dir)
    assert (refs / "cpu-x" / "cells").is_dir() and sorted(p.name for p in refs.iterdir()) == ["cpu-x"]


# ---------------------------------------------------------------- plain files only


def special_files(folder, secret):
    """cells/ID.json as a link to a secret, a FIFO, a link to /dev/zero, and a log that links to the secret."""
    cells, logs = folder / "cells", folder / "logs"
    cells.mkdir(parents=True)
    logs.mkdir()
    (cells / "link-to-key.json").symlink_to(secret)
    os.mkfifo(cells / "fifo.json")
    (cells / "zero.json").symlink_to("/dev/zero")
    write_record(cells / f"{CELL.id}.json", honest())
    (logs / f"{CELL.id}.log").symlink_to(secret)
    return {
        "link-to-key.json": "a symbolic link, not a plain file",
        "fifo.json": "a FIFO, not a plain file",
        "zero.json": "a symbolic link, not a plain file",
    }


@pytest.mark.timeout(60)  # a FIFO that was opened would block here for ever
@pytest.mark.parametrize("with_plan", [True, False], ids=["plan", "no-plan"])
def test_links_fifos_and_devices_are_quarantined_by_name_without_being_read(tmp_path, with_plan):
    secret = tmp_path / "id_ed25519"
    secret.write_text("-----BEGIN OPENSSH PRIVATE KEY----- secret\n")
    expected = special_files(tmp_path / "artifacts", secret)
    plan = None
    if with_plan:
        plan = tmp_path / "plan.json"
        plans.write(plan, plans.PlanFile(load_plan_file().plan, "full-1", (planned(CELL),)))
    run_dir = tmp_path / "run"
    counts = merge.merge(run_dir, [tmp_path / "artifacts"], plan=plan)
    assert counts["new"] == 1 and counts["quarantined"] == 3
    reasons = {Path(source).name: reason for source, reason in records.quarantined(run_dir)}
    for name, why in expected.items():
        assert why in reasons[name] and "not read" in reasons[name], reasons[name]
    for path in run_dir.rglob("*"):
        assert path.is_symlink() is False
        assert "PRIVATE KEY" not in (path.read_text(errors="replace") if path.is_file() else "")
    assert not (run_dir / "logs" / f"{CELL.id}.log").exists()  # the linked log was not copied
    md = report.write_report(run_dir)["markdown"].read_text()
    assert md.count("- quarantined ") == 3


def test_an_oversize_record_is_quarantined_by_name(tmp_path):
    big = tmp_path / "artifacts" / "cells" / f"{CELL.id}.json"
    big.parent.mkdir(parents=True)
    with open(big, "wb") as f:
        f.truncate(records.MAX_BYTES + 1)  # sparse: no memory, no disk
    merge.merge(tmp_path / "run", [tmp_path / "artifacts"])
    [(_, reason)] = records.quarantined(tmp_path / "run")
    assert f"{records.MAX_BYTES + 1} bytes, more than any record" in reason and "not read" in reason
    assert [p.stat().st_size for p in (tmp_path / "run" / "quarantine").glob("*.quarantined")] == [0]


def test_the_report_writes_only_through_paths_it_created(tmp_path):
    """results.md, results.csv, results.jsonl, results.png and quarantine/ planted as links to outside: the report
    replaces them, and nothing outside the run changes."""
    outside = tmp_path / "outside"
    outside.mkdir()
    run_dir = tmp_path / "run"
    write_record(run_dir / "cells" / f"{CELL.id}.json", honest())
    (run_dir / "cells" / "broken.json").write_text("{")  # something to quarantine
    for name in ("results.md", "results.csv", "results.jsonl", "results.png"):
        (outside / name).write_text("precious")
        (run_dir / name).symlink_to(outside / name)
    (run_dir / "quarantine").symlink_to(outside)
    report.write_report(run_dir)
    assert {p.name: p.read_text() for p in outside.iterdir()} == {
        n: "precious" for n in ("results.md", "results.csv", "results.jsonl", "results.png")
    }
    for name in ("results.md", "results.csv", "results.jsonl", "results.png", "quarantine"):
        assert not (run_dir / name).is_symlink()
    assert "broken.json" in (run_dir / "results.md").read_text()


# ---------------------------------------------------------------- any schema-valid record (Hypothesis)


_ids = st.from_regex(r"\A[A-Za-z0-9][A-Za-z0-9._-]{0,12}\Z")
_text = st.text(max_size=40) | st.sampled_from(
    ["$\\undefinedmacro$", "$x^$", '"><img src=x onerror=alert(1)>', "a | b\n| c |", '=HYPERLINK("x")', "%s%n", "\\"]
)
# Numbers a reader accepts: NaN and infinity are refused on reading (records.contradictions; tested on their own
# above and in test_record_consistency), so records holding them would only be filtered out here
_num = st.none() | st.floats(0, 1e9) | st.integers(0, 10**9)  # within the schema's ranges (records.SCHEMA)
_share = st.none() | st.floats(0, 1)
_int = st.none() | st.integers(0, 10**6)
_short = st.none() | st.text(max_size=30)


_gpu_fact = st.fixed_dictionaries(
    {"name": st.text(min_size=1, max_size=30), "memory_mib": st.integers(1, 2**20), "driver": st.text(min_size=1)},
    optional={"compute_capability": _short, "max_sm_clock_mhz": _int},
)


def _ranged(block, key):
    """None, or a number within the range records.SCHEMA gives metrics/timing/system `key` (its edges included)."""
    rule = records.SCHEMA["properties"][block]["properties"][key]
    low, high = rule["minimum"], rule["maximum"]
    return (
        st.none() | st.floats(low, high) | st.sampled_from([low, high]) | st.integers(int(low), int(min(high, 10**9)))
    )


def _optional(**fields):
    return st.fixed_dictionaries({}, optional=fields)


@st.composite
def any_record(draw):
    """A record the schema accepts, with every known field drawn from its type: NaN, infinity, zero, negative and
    huge numbers, markup and mathtext in every string."""
    from shared.params import TASKS

    cell = {
        "framework": draw(_ids),
        "task": draw(st.sampled_from(TASKS)),
        "variant": draw(_ids),
        "precision": draw(st.sampled_from(["fp32", "tf32", "amp", "bf16"])),
        "gpus": draw(st.integers(1, 8)),
        "device": draw(st.sampled_from(["cpu", "gpu"])),
        "data": draw(st.sampled_from(["synthetic", "real"])),
        "scale": draw(st.sampled_from(["full", "demo", "tiny"])),
    }
    started = _datetime(2025, 1, 1, tzinfo=UTC) + _timedelta(seconds=draw(st.integers(0, 10**7)))
    finished = started + _timedelta(seconds=draw(st.integers(0, 10**5)))
    metrics = draw(
        _optional(
            **{
                key: _share if key in ("accuracy", "auc") else _ranged("metrics", key) for key in records.NUMBER_METRICS
            },
            **{key: _int for key in records.INTEGER_METRICS},
            weights=_short,
            data_placement=_short,
            epoch_seconds=st.none() | st.lists(st.floats(allow_nan=True), max_size=4),
            differences=st.none() | st.lists(_text, max_size=3),
        )
    )
    timing = draw(
        _optional(
            **{key: _ranged("timing", key) for key in ("min", "median", "max", "q1", "q3", "spread", "warmup")},
            values=st.none()
            | st.lists(st.floats(allow_nan=True, allow_infinity=True) | st.integers(-5, 5), max_size=6),
            unit=_short,
            repeats=_int,
            unstable=st.none() | st.booleans(),
        )
    )
    system = draw(
        _optional(
            host=st.none() | _ids,
            cpu=st.none() | _text,
            cpu_count=_int,
            cpu_usable=_int,
            cpu_flags=st.none() | st.lists(st.text(max_size=10), max_size=4),
            machine_class=st.none() | st.from_regex(r"\A[a-z0-9?][a-z0-9?:._-]{0,30}\Z"),
            params_hash=st.none() | st.from_regex(r"\A[0-9a-f]{12}\Z"),
            gpus=st.none() | st.lists(_text, max_size=2),
            framework_version=_short,
            python=_short,
            cuda=_short,
            driver=_short,
            cudnn=_short | _int,
            memory_gib=_num,
            calibration=st.none() | _optional(gemm_fp32_flops=_num, gemm_reduced_flops=_num),
            gpu_facts=st.none() | st.lists(_gpu_fact, max_size=2),
            cpu_mhz=_ranged("system", "cpu_mhz"),
            cpu_max_mhz=_ranged("system", "cpu_max_mhz"),
        )
    )
    status = draw(st.sampled_from(["ok", "failed", "skipped", "timeout"]))
    if status == "ok" and cell["device"] == "gpu" and not system.get("gpu_facts"):
        system["gpu_facts"] = [draw(_gpu_fact)]  # an ok GPU record carries its GPUs' facts (the schema's allOf)
    if system.get("machine_class") is not None:
        # the class its facts give, as a runner writes it (any other is refused on reading)
        from shared import sysinfo

        system["machine_class"] = sysinfo.machine_class(system, cell["device"], cell["gpus"])
    record = {
        "schema": 1,
        "run_id": draw(st.none() | _ids),
        "cell": cell,
        "status": status,
        "reason": draw(st.none() | _text),
        "log_tail": draw(st.none() | _text),
        "metrics": metrics,
        "timing": timing,
        "system": system,
        "started_at": started.isoformat(),
        "finished_at": finished.isoformat(),
        "git_commit": draw(st.none() | st.from_regex(r"\A[0-9a-f]{12}\Z")),
    }
    return record


@settings(
    max_examples=int(os.environ.get("HYPOTHESIS_EXAMPLES", "25")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.function_scoped_fixture],
)
@given(st.lists(any_record(), min_size=1, max_size=3, unique_by=lambda r: Cell(**r["cell"]).id))
def test_any_schema_valid_record_goes_through_merge_report_site_and_verify(tmp_path_factory, found):
    """Whatever a schema-valid record holds, merge, the report (tables, CSV, plot), the site's result pages and verify
    finish: text is rendered literally (no mathtext, escaped HTML), and nothing raises."""
    from scripts.results import site, verify

    for record in found:
        try:
            records.check(record, "generated")
        except records.RecordError:
            assume(False)
    base = tmp_path_factory.mktemp("any")
    source, run_dir = base / "src", base / "run"
    for record in found:
        write_record(source / "cells" / f"{Cell(**record['cell']).id}.json", record)
    counts = merge.merge(run_dir, [source])
    assert counts["new"] == len(found) and counts["quarantined"] == 0
    paths = report.write_report(run_dir)
    assert paths["plot"].stat().st_size > 0 and paths["markdown"].read_text()
    merged = [records.read(p) for p in sorted((run_dir / "cells").glob("*.json"))]
    for record in merged:
        record["_source"], record["_links"] = 'run/"><x>$x$', (f"records/run/{Cell(**record['cell']).id}.json", None)
    frame = report.to_frame(merged)
    frame["source"], frame["links"] = frame["_source"], frame["_links"]
    (base / "site" / "plots").mkdir(parents=True)
    for task in {r["cell"]["task"] for r in merged}:
        html_text = site.results_page(task, frame, base / "site", [])
        assert "<x>" not in html_text and "onerror=alert" not in html_text.replace("onerror=alert(1)&gt;", "")
    by_id = {Cell(**r["cell"]).id: r for r in merged}
    rows, outcome, _, overall = verify.compare(by_id, by_id, None)
    verify.one_line(outcome, 0, verify.TIME_TOLERANCE, verify.QUALITY_MARGIN)
    records.inconsistencies(found[0])


def test_the_issues_crashing_records_are_drawn_or_refused_by_the_schema(tmp_path):
    """A failed record whose reason is mathtext is drawn as text (the merge and its plot finish); loosely typed
    fields the report and site read are refused by the schema, each with its own reason."""
    run_dir = tmp_path / "run"
    write_record(
        tmp_path / "src" / "cells" / f"{CELL.id}.json",
        with_(honest(status="failed"), "reason", "$\\undefinedmacro$ and $x^$"),
    )
    bad = {
        "metrics/differences/0": with_(honest(OTHER), "metrics.differences", [{"a": 1}]),
        "timing/spread": with_(honest(OTHER), "timing", {"spread": "wide"}),
        "system/cpu_flags": with_(honest(OTHER), "system.cpu_flags", 7),
    }
    for i, record in enumerate(bad.values()):
        write_record(tmp_path / f"bad-{i}" / "cells" / f"{OTHER.id}.json", record)
    assert merge.main([str(run_dir), str(tmp_path / "src"), *(str(tmp_path / f"bad-{i}") for i in range(3))]) == 0
    assert (run_dir / "results.png").stat().st_size > 0
    reasons = [reason for _, reason in records.quarantined(run_dir)]
    for field in bad:
        assert sum(f": {field}: " in r for r in reasons) == 1, (field, reasons)


def test_site_links_to_a_hostile_run_folder_name_stay_links(tmp_path):
    from scripts.results import site

    name = '"><img src=x onerror=alert(1)>'
    run_dir = tmp_path / name
    write_record(run_dir / "cells" / f"{CELL.id}.json", honest())
    (run_dir / "logs").mkdir()
    (run_dir / "logs" / f"{CELL.id}.log").write_text("log")
    out = tmp_path / "site"
    monkey = pytest.MonkeyPatch()
    monkey.setattr(site, "REFERENCES", tmp_path / "none")
    monkey.setattr(site, "COMMUNITY", tmp_path / "none")
    try:
        site.build(out, [run_dir])
    finally:
        monkey.undo()
    page = (out / "results-cnn.html").read_text()
    assert "<img src=x" not in page and 'onerror=alert(1)>"' not in page
    assert 'href="records/run/%22%3E%3Cimg%20src%3Dx%20onerror%3Dalert%281%29%3E/' in page


def test_site_out_refuses_a_folder_it_did_not_make(tmp_path, capsys):
    from scripts.results import site

    mine = tmp_path / "precious"
    mine.mkdir()
    (mine / "thesis.tex").write_text("years of work")
    assert site.main(["--out", str(mine)]) == 2
    assert "holds files this command did not write" in capsys.readouterr().err
    assert (mine / "thesis.tex").read_text() == "years of work"
    link = tmp_path / "link"
    link.symlink_to(mine)
    assert site.main(["--out", str(link)]) == 2 and (mine / "thesis.tex").exists()


# ---------------------------------------------------------------- low: sbatch, ties, times, links


@pytest.mark.parametrize(
    "extra, run_dir, message",
    [
        (["--partition=gpu\nrm -rf ~"], "run", "--sbatch '--partition=gpu\\nrm -rf ~'"),
        (["--comment=$(id)"], "run", "--sbatch '--comment=$(id)'"),
        (["--partition gpu"], "run", "--sbatch '--partition gpu'"),
        (["--partition=gpu"], "run\ntouch /tmp/x", "its path goes into #SBATCH lines"),
        (["--partition=gpu"], "my run", "its path goes into #SBATCH lines"),
    ],
)
def test_sbatch_options_and_the_run_folder_are_refused_unless_plain(tmp_path, extra, run_dir, message):
    run = tmp_path / run_dir
    with pytest.raises(slurm.SlurmError) as e:
        slurm.submit(
            load_plan_file(),
            tmp_path / "plan.json",
            run,
            parallel=None,
            runtime="local",
            image_prefix="",
            data_root=tmp_path,
            extra=extra,
            dry_run=True,
        )
    assert message in str(e.value)
    assert not run.exists() and not (tmp_path / "run").exists()
    slurm.check_sbatch(["--partition=gpu", "--account=ml-team", "--qos=high", "--exclusive"], tmp_path / "run")


def test_attempts_with_equal_times_are_ordered_by_a_stable_key(tmp_path):
    """Two records of one cell, equal in attempt, start and finish: the same one wins in either order."""
    a, b = honest(host="node-a"), honest(host="node-b")
    winners = set()
    for first, second in ((a, b), (b, a)):
        run_dir = tmp_path / f"run-{first['system']['host']}"
        for i, record in enumerate((first, second)):
            write_record(tmp_path / f"src-{run_dir.name}-{i}" / "cells" / f"{CELL.id}.json", record)
            merge.merge(run_dir, [tmp_path / f"src-{run_dir.name}-{i}"])
        winners.add(read_record(run_dir / "cells" / f"{CELL.id}.json")["system"]["host"])
    assert len(winners) == 1


@pytest.mark.parametrize(
    "text",
    [
        "2026-12-04/09:00:00+00:00",
        "2026-12-04T09:00:00",
        "2026-12-04x09:00:00Z",
        "2026-12-04T09:00+00:00",
        " 2026-12-04T09:00:00Z",
    ],
)
def test_started_at_must_be_rfc_3339(tmp_path, text):
    """'2026-12-04/09:00:00' parsed as a time by fromisoformat and nested an attempt one folder deeper."""
    record = with_(with_(honest(), "started_at", text), "finished_at", "2026-12-04T10:00:00+00:00")
    with pytest.raises(records.RecordError, match="RFC 3339"):
        records.check(record, "x")
    assert records.check(with_(record, "started_at", "2026-12-04T09:00:00Z"), "x")


def test_record_urls_are_not_links_in_githubs_job_summary(tmp_path):
    run_dir = tmp_path / "run"
    write_record(
        run_dir / "cells" / f"{CELL.id}.json",
        with_(honest(status="failed"), "reason", "see https://evil.example/login or www.evil.example"),
    )
    md = report.write_report(run_dir)["markdown"].read_text()
    assert "https://evil" not in md and "www.evil" not in md
    assert "https:\u2060//evil.example/login" in md and "www\u2060.evil.example" in md


@pytest.mark.timeout(60)
def test_the_open_itself_follows_no_link_and_waits_on_no_fifo(tmp_path, monkeypatch):
    """The second line of defence: a link or FIFO swapped in after the lstat (here: the lstat check switched off) is
    refused by the open (O_NOFOLLOW) or by fstat (O_NONBLOCK: the FIFO's open does not wait for a writer)."""
    secret = tmp_path / "secret.json"
    write_record(secret, honest())
    (tmp_path / "link.json").symlink_to(secret)
    os.mkfifo(tmp_path / "fifo.json")
    monkeypatch.setattr(shared.record, "not_plain", lambda path, cap=records.MAX_BYTES: None)
    with pytest.raises(records.RecordError, match="not opened as a plain file"):
        records.read(tmp_path / "link.json")
    with pytest.raises(records.RecordError, match="not a plain file; not read"):
        records.read(tmp_path / "fifo.json")
    assert records.read(secret) == honest()


# ---------------------------------------------------------------- records.inconsistencies on a real record

EXAMPLE_RECORD = (
    ROOT / "results" / "community" / "example-cpu-amd-epyc-zen4-2c-20261205" / "cells" / "jax-cnn-cpu-fp32-1cpu.json"
)


def test_a_real_record_is_consistent_and_halved_samples_are_not():
    """A committed record's published figures follow from its samples; halve the samples (and the median, min and
    max with them) and its steady-state time implies half the task's batch a step."""
    real = json.loads(EXAMPLE_RECORD.read_text())
    assert records.inconsistencies(real) == []
    halved = copy.deepcopy(real)
    halved["timing"]["values"] = [v / 2 for v in real["timing"]["values"]]
    for key in ("median", "min", "max"):
        halved["timing"][key] = real["timing"][key] / 2
    [finding] = records.inconsistencies(halved)
    assert "steady_state_seconds" in finding and "does not follow from the samples" in finding
    assert records.contradictions(halved) == [finding]  # every reader refuses it
    [finding] = records.figures_that_do_not_follow(halved)  # and the submission's own words
    assert "imply 16 samples a step" in finding and "the task's batch is 32" in finding
    stretched = with_(real, "metrics.steady_state_seconds", real["metrics"]["steady_state_seconds"] * 1.01)
    assert records.inconsistencies(stretched)
    assert any("is not a whole number of steps" in f for f in records.figures_that_do_not_follow(stretched))
