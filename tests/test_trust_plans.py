"""Plans and the files beside records as untrusted input (issue 48): a plan's numbers and images, the whole plan against
the matrix, merge's plan and run id, plain files only for references, Slurm's resolved run folder, Theano's cache per
cell; and the rules of records.py and merge.py that no test pinned before. Each layer is tested on its own."""

import concurrent.futures
import json
import math
import os
import shutil
import sys
from dataclasses import replace
from pathlib import Path

import pytest
from conftest import ROOT

import shared.record
from scripts import cell as cell_command
from scripts.launch import executors, k8s, slurm
from scripts.launch.executors import ExecutorError, LocalExecutor, RunSettings
from scripts.plan import planfile as plans
from scripts.plan.matrix import Cell, load
from scripts.results import merge, records, reference, verify
from scripts.results.submission import derived
from shared.record import RecordError, make_record, write_record

pytestmark = pytest.mark.unit

CELL = Cell("pytorch", "cnn", "cpu", "fp32", 1, "cpu", "synthetic", "tiny")  # the smoke profile's first cell
EVIL = "attacker.example/evil:latest"
EXAMPLE = ROOT / "results" / "community" / "example-cpu-amd-epyc-zen4-2c-20261205"


def smoke(run_id="smoke-1"):
    return plans.make(load(), "smoke", run_id)


def plan_doc(run_id="smoke-1", **changes):
    doc = json.loads(plans.to_json(smoke(run_id)))
    doc.update(changes)
    return doc


def write_doc(path, doc):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc))  # json writes NaN and Infinity as such, as a hostile plan may
    return path


def record(run_id="smoke-1", started="2026-12-03T10:00:00+00:00", cell=CELL):
    r = make_record(
        vars(cell),
        "failed",
        run_id=run_id,
        reason="CUDA error",
        system={"cpu": "AMD EPYC", "cpu_count": 2, "host": "node-a"},
        started_at=started,
    )
    r["finished_at"] = started.replace("10:00", "10:05").replace("11:00", "11:05")
    return r


# ---------------------------------------------------------------- the plan's values, on reading (check_values)


@pytest.mark.parametrize(
    "key, value",
    [
        ("repeats", 10**6),
        ("repeats", 0),
        ("repeats", "5"),
        ("repeats", True),
        ("repeats", 2.5),
        ("timeout_s", math.nan),
        ("timeout_s", math.inf),
        ("timeout_s", -60.0),
        ("timeout_s", 1e9),
        ("executor", "kubectl"),
    ],
)
def test_a_plans_numbers_out_of_range_or_not_finite_are_refused_on_reading(tmp_path, key, value):
    path = write_doc(tmp_path / "plan.json", plan_doc(**{key: value}))
    with pytest.raises(plans.PlanError, match=f"{key} .* is not "):
        plans.read(path)


def test_a_cells_gpu_count_out_of_range_is_refused_on_reading(tmp_path):
    doc = plan_doc()
    doc["cells"][0]["gpus"] = 10**6
    doc["cells"][0]["id"] = Cell(**{k: doc["cells"][0][k] for k in Cell.__dataclass_fields__}).id
    with pytest.raises(plans.PlanError, match="gpus 1000000 is not a whole number"):
        plans.read(write_doc(tmp_path / "plan.json", doc))


def test_a_plan_naming_another_registrys_image_is_refused_on_reading_and_launching(tmp_path):
    doc = plan_doc()
    doc["cells"][0]["image"] = EVIL
    with pytest.raises(plans.PlanError, match="image 'attacker.example/evil:latest' is not rosetta/FAMILY:VARIANT"):
        plans.read(write_doc(tmp_path / "plan.json", doc))
    good = smoke()
    hostile = replace(good, cells=(replace(good.cells[0], image=EVIL), *good.cells[1:]))
    with pytest.raises(plans.PlanError, match="image"):
        k8s.manifests(hostile, k8s.Target(image_prefix="", data_claim="d", results_claim="r"))


# ---------------------------------------------------------------- the plan against the matrix (check_against)


def test_a_plan_is_checked_against_the_matrix_value_by_value():
    matrix, good = load(), smoke()
    assert plans.check_against(good, matrix) is good
    cut = replace(good, cells=good.cells[:1], plan=replace(good.plan, cells=good.plan.cells[:1]))
    assert plans.check_against(cut, matrix) is cut  # fewer cells than the profile: a retry, --only
    for plan in (replace(good.plan, repeats=4), replace(good.plan, timeout_s=good.plan.timeout_s * 2)):
        with pytest.raises(plans.PlanError, match="is not profile smoke's in matrix.yaml"):
            plans.check_against(replace(good, plan=plan), matrix)
    other_image = replace(good.cells[0], image="rosetta/pytorch:cu130")
    with pytest.raises(
        plans.PlanError, match="names image 'rosetta/pytorch:cu130'.*matrix.yaml gives 'rosetta/pytorch:cpu'"
    ):
        plans.check_against(replace(good, cells=(other_image, *good.cells[1:])), matrix)


def test_scripts_cell_never_launches_an_image_without_an_expected_code_hash(tmp_path):
    good = smoke()
    hostile = replace(good.cells[0], image=EVIL)  # past every reader: the executor's own refusal
    plan_file = replace(good, cells=(hostile,))
    with pytest.raises(ExecutorError, match="no expected code hash for its image 'attacker.example/evil:latest'"):
        cell_command.executor_for(plan_file, hostile, "pyxis", ROOT / "matrix.yaml", "registry.example.org#")
    executor, _ = cell_command.executor_for(good, good.cells[0], "apptainer", ROOT / "matrix.yaml", "/sif")
    assert executor.expected_code_hash(good.cells[0].cell)


def test_launchers_refuse_a_plan_whose_values_are_not_the_matrixs(tmp_path, capsys):
    path = write_doc(tmp_path / "plan.json", plan_doc(repeats=4))  # in range, but not the smoke profile's
    run = tmp_path / "run"
    argv = [str(path), "--index", "0", "--run-dir", str(run), "--runtime", "apptainer", "--data-root", str(tmp_path)]
    assert cell_command.main(argv) == 2  # (apptainer, no data: were the plan taken, the cell would fail at once)
    assert "repeats 4 is not profile smoke's" in capsys.readouterr().err and not run.exists()
    assert (
        slurm.main([str(path), "--dry-run", "--run-dir", str(run), "--runtime", "pyxis", "--data-root", "/nonexistent"])
        == 2
    )
    assert "repeats 4 is not profile smoke's" in capsys.readouterr().err and not run.exists()
    out = tmp_path / "jobs.yaml"
    argv = [str(path), "--image-prefix", "r.example/", "--data-claim", "d", "--results-claim", "r", "--out", str(out)]
    assert k8s.main(argv) == 2
    assert "repeats 4 is not profile smoke's" in capsys.readouterr().err and not out.exists()


# ---------------------------------------------------------------- the submission's whole plan (derived.check_plan)


@pytest.mark.parametrize("key, value", [("repeats", 10**6), ("timeout_s", math.nan), ("executor", "compose")])
def test_the_submission_checker_compares_the_whole_plan_not_only_its_cells(tmp_path, monkeypatch, key, value):
    wanted = plan_doc()
    monkeypatch.setattr(derived, "derived_at", lambda *args: (wanted, {}))  # the commit's own plan, as re-derived
    manifest = {"profile": "smoke", "run_id": "smoke-1", "git_commit": "0" * 40}
    write_doc(tmp_path / "plan.json", wanted)
    assert derived.check_plan(tmp_path, manifest, tmp_path) == ([], {})
    write_doc(tmp_path / "plan.json", {**wanted, key: value})
    found, _ = derived.check_plan(tmp_path, manifest, tmp_path)
    assert found == [
        f"plan.json: {key} {value!r} is not profile smoke's plan's at commit 000000000000 ({wanted[key]!r})"
    ]


# ---------------------------------------------------------------- merge: the plan as untrusted input


def source_with(folder, plan_path_maker, *recs):
    for r in recs:
        write_record(folder / "cells" / f"{Cell(**r['cell']).id}.json", r)
    plan_path_maker(folder / "plan.json")
    return folder


def test_a_fifo_plan_in_a_source_is_refused_without_hanging(tmp_path):
    source = source_with(tmp_path / "src", os.mkfifo, record())
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        done = pool.submit(merge.merge, tmp_path / "run", [source])
        try:
            with pytest.raises(merge.MergeError, match="plan.json: a FIFO, not a plain file"):
                done.result(timeout=20)
        finally:
            if not done.done():  # it hangs: a writer's open (without blocking) lets the reader go, so the test ends
                os.close(os.open(source / "plan.json", os.O_WRONLY | os.O_NONBLOCK))
    assert not (tmp_path / "run" / "cells").exists()


def test_a_linked_or_oversize_plan_is_refused(tmp_path):
    plans.write(tmp_path / "real-plan.json", smoke())
    source = source_with(tmp_path / "src", lambda p: p.symlink_to(tmp_path / "real-plan.json"), record())
    with pytest.raises(merge.MergeError, match="a symbolic link, not a plain file"):
        merge.merge(tmp_path / "run", [source])
    with pytest.raises(merge.MergeError, match="a symbolic link"):
        merge.merge(tmp_path / "run2", [tmp_path / "real-plan.json"], plan=source / "plan.json")
    big = tmp_path / "big" / "plan.json"
    big.parent.mkdir()
    big.write_bytes(b" " * (shared.record.MAX_BYTES + 1))
    with pytest.raises(merge.MergeError, match="more than any record"):
        merge.merge(tmp_path / "run3", [big.parent])


def test_a_source_plan_of_another_run_lets_none_of_its_records_in(tmp_path):
    run = tmp_path / "run"
    plans.write(run / "plan.json", smoke("smoke-1"))
    other = source_with(tmp_path / "src", lambda p: plans.write(p, smoke("smoke-2")), record("smoke-2"))
    counts = merge.merge(run, [other])
    assert counts["quarantined"] == 1 and counts["new"] == 0 and not (run / "cells").exists()
    assert json.loads((run / "plan.json").read_text())["run_id"] == "smoke-1"
    with pytest.raises(merge.MergeError, match="a plan of run 'smoke-2', but .*plan.json say run 'smoke-1'"):
        merge.merge(run, [other], plan=other / "plan.json")


def test_a_source_plan_of_another_run_than_the_folders_records_is_refused(tmp_path):
    run = tmp_path / "run"
    write_record(run / "cells" / f"{CELL.id}.json", record("smoke-1"))
    other = source_with(tmp_path / "src", lambda p: plans.write(p, smoke("smoke-2")), record("smoke-2"))
    with pytest.raises(merge.MergeError, match="records in .* say run 'smoke-1'"):
        merge.merge(run, [other])
    assert records.load(run / "cells" / f"{CELL.id}.json").run_id == "smoke-1"
    twin = source_with(tmp_path / "twin", lambda p: plans.write(p, smoke("smoke-3")))
    with pytest.raises(merge.MergeError, match="the sources' plans name several runs"):
        merge.merge(tmp_path / "new", [other, twin])


def test_merge_refuses_a_plan_whose_run_id_is_not_of_the_safe_alphabet(tmp_path):
    plan = write_doc(tmp_path / "plan.json", {**plan_doc(), "run_id": "smoke 1"})
    write_record(tmp_path / "src" / "cells" / f"{CELL.id}.json", record("smoke 1"))
    with pytest.raises(merge.MergeError, match="run id 'smoke 1' of the plan is not of the safe alphabet"):
        merge.merge(tmp_path / "run", [tmp_path / "src"], plan=plan)
    assert not (tmp_path / "run" / "cells").exists()


# ---------------------------------------------------------------- merge: rules no test pinned before


def test_merge_takes_nothing_from_a_sources_quarantine_folder(tmp_path):
    source = tmp_path / "src"
    write_record(source / "quarantine" / f"{CELL.id}.json", record())
    assert merge.merge(tmp_path / "run", [source])["new"] == 0
    assert not (tmp_path / "run" / "cells").exists()


def test_a_cells_attempt_number_from_an_earlier_merge_still_decides(tmp_path):
    run = tmp_path / "run"
    write_record_in(tmp_path / "a" / "attempt-2", record(started="2026-12-03T10:00:00+00:00"))
    merge.merge(run, [tmp_path / "a"])
    assert json.loads((run / "attempts.json").read_text()) == {CELL.id: 2}
    write_record_in(tmp_path / "b" / "attempt-1", record(started="2026-12-03T11:00:00+00:00"))  # clock: later
    assert merge.merge(run, [tmp_path / "b"])["older"] == 1  # the next merge still knows cells/ holds attempt 2
    assert records.load(run / "cells" / f"{CELL.id}.json").started_at.startswith("2026-12-03T10:00")


def write_record_in(folder, r):
    write_record(folder / "cells" / f"{Cell(**r['cell']).id}.json", r)
    return folder


def test_a_bad_record_already_in_the_run_is_quarantined_not_overwritten(tmp_path):
    run = tmp_path / "run"
    bad = b'{"schema": 1, "run_id": "smoke-1", "hand": "edited"}'
    (run / "cells").mkdir(parents=True)
    (run / "cells" / f"{CELL.id}.json").write_bytes(bad)
    assert merge.merge(run, [write_record_in(tmp_path / "src", record())])["new"] == 1
    kept = [p.read_bytes() for p in (run / "quarantine").glob("*.json.quarantined")]
    assert kept == [bad] and any(str(run / "cells") in source for source, _ in records.quarantined(run))


def test_a_record_path_outside_the_root_or_in_a_sibling_named_like_it_is_refused(tmp_path):
    root = tmp_path / "run"
    (tmp_path / "run-evil").mkdir()
    for parts in (("..", "run-evil", "x.json"), ("..", "..", "etc", "passwd"), ("/etc/passwd",)):
        with pytest.raises(RecordError, match="would leave"):
            records.confined(root, *parts)
    assert records.confined(root, "cells", "x.json") == root.resolve() / "cells" / "x.json"


def test_the_plain_file_reader_caps_what_it_reads_not_only_what_lstat_said(tmp_path, monkeypatch):
    grown = tmp_path / "grown.json"
    grown.write_bytes(b"x" * 64)
    monkeypatch.setattr(shared.record, "not_plain", lambda path, cap: None)  # it grew after lstat looked
    with pytest.raises(RecordError, match="more than any record \\(16 bytes\\)"):
        shared.record.read_plain(grown, 16)


# ---------------------------------------------------------------- references, Slurm's run folder, Theano's cache


def test_a_reference_copies_no_file_through_a_link(tmp_path, monkeypatch):
    refs = tmp_path / "results" / "reference"
    monkeypatch.setattr(verify, "REFERENCES", refs)
    secret = tmp_path / "secret.txt"
    secret.write_text("TOKEN=hunter2")
    run = tmp_path / "run"
    (run / "cells").mkdir(parents=True)
    shutil.copyfile(EXAMPLE / "cells" / "jax-cnn-cpu-fp32-1cpu.json", run / "cells" / "jax-cnn-cpu-fp32-1cpu.json")
    shutil.copyfile(EXAMPLE / "plan.json", run / "plan.json")
    (run / "barriers.json").symlink_to(secret)
    with pytest.raises(ValueError, match="barriers.json: a symbolic link, not a plain file"):
        reference.copy(run)
    assert not refs.exists() or not any("hunter2" in p.read_text() for p in refs.rglob("*") if p.is_file())
    with pytest.raises(ValueError, match="a symbolic link"):  # the copy itself, whatever checked before it
        reference.copy_plain(run / "barriers.json", tmp_path / "copy.json")
    assert not (tmp_path / "copy.json").exists()


def test_slurm_checks_the_run_folder_it_resolves_not_the_link_named(tmp_path):
    evil = tmp_path / "evil\ntouch pwned\n#"
    evil.mkdir()
    (tmp_path / "run").symlink_to(evil)
    with pytest.raises(slurm.SlurmError, match="its path goes into #SBATCH lines"):
        slurm.submit(
            smoke(),
            tmp_path / "plan.json",
            tmp_path / "run",
            parallel=1,
            runtime="local",
            image_prefix="",
            data_root=tmp_path,
            extra=[],
            dry_run=True,
        )
    assert not (evil / "slurm").exists()


def test_each_local_cell_gets_a_theano_compile_cache_of_its_own(tmp_path, monkeypatch):
    seen = []
    monkeypatch.setattr(executors, "popen", lambda argv, log, env, cwd: seen.append(env))
    monkeypatch.setenv("THEANO_FLAGS", "base_compiledir=/tmp/shared-by-all")
    executor = LocalExecutor({"lasagne": sys.executable, "keras2-theano": sys.executable})
    run = RunSettings("r", 1, 60.0, tmp_path)
    cells = [Cell(fw, "cnn", "cpu", "fp32", 1, "cpu", "synthetic", "tiny") for fw in ("lasagne", "keras2-theano")]
    outs = [tmp_path / "run" / "cells" / f"{c.id}.json" for c in cells]
    for c, out in zip(cells, outs, strict=True):
        executor.launch(c, out, out.with_suffix(".log"), run)
    caches = [Path(env["ROSETTA_CACHE_DIR"]) for env in seen]
    assert caches[0] != caches[1] and all(c.is_dir() and not any(c.iterdir()) for c in caches)
    for env, cache, out in zip(seen, caches, outs, strict=True):
        assert cache.parent == executors.own_folder(out)
        assert env["THEANO_FLAGS"].endswith(f",base_compiledir={cache / 'theano'}")  # last: it wins
    executor.collect(outs[0])
    assert not caches[0].exists() and caches[1].exists()
