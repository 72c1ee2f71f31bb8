"""`verify`'s noise model on real records: the committed reference of this project's CPU machine class (made by
`make reference`, with a second honest run kept under runs/ by `scripts.reference --add`) and a third honest run of
the same class (tests/data/second-run: the `reference` profile, made the same day: a fourth run). Each test changes only what it names; the verdicts the old verify got wrong (an
OK for a broken clock or the wrong scale, a FAIL for a healthy install) are the cases."""
import json
import math
from pathlib import Path

import pytest

from scripts import verify
from shared.params import params_hash
from shared.record import write_record

ROOT = Path(__file__).resolve().parent.parent
REFERENCE = ROOT / "results" / "reference" / "cpu-amd-epyc-avx512-bf16-2c"
SECOND_RUN = ROOT / "tests" / "data" / "second-run"


def run_from(records, folder, plan=None):
    for cell_id, record in records.items():
        write_record(folder / "cells" / f"{cell_id}.json", record)
    (folder / "plan.json").write_text(json.dumps({"cells": plan if plan is not None else sorted(records)}))
    return folder


def scaled(record, factor):
    """The record as if every clock had read `factor` × its time: samples, medians, epochs and totals."""
    record = json.loads(json.dumps(record))
    timing, metrics = record["timing"], record["metrics"]
    for key in ("values",):
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
    return record


@pytest.fixture(scope="module")
def reference():
    if not REFERENCE.is_dir():
        pytest.fail(f"{REFERENCE} is missing: the committed reference these tests read (make reference)")
    return verify.records_by_id(REFERENCE)


def verify_run(reference_dir, run_dir, capsys):
    code = verify.main(["--reference", str(reference_dir), "--run", str(run_dir)])
    out = capsys.readouterr().out.strip().splitlines()
    ids = verify.records_by_id(run_dir)
    rows = {line.split()[0]: line for line in out if line.split() and line.split()[0] in ids}
    overall = next(line for line in out if line.startswith("overall:"))
    verdict = next(line for line in out if line.startswith(("OK:", "FAIL:", "INCOMPARABLE:")))
    return code, rows, overall, verdict


def test_the_reference_holds_samples_of_one_machine_class(reference):
    ok = [r for r in reference.values() if r["status"] == "ok"]
    assert len({verify.machine_class(r) for r in ok}) == 1 and len(ok) >= 40
    assert all(len(r["timing"]["values"]) >= 5 for r in ok if r["cell"]["task"] in ("cnn", "gru", "resnet50"))
    assert "machine class" in (REFERENCE / "README.md").read_text()


def test_every_time_times_a_hundredth_is_a_broken_clock_not_ok(reference, tmp_path, capsys):
    run = run_from({i: scaled(r, 0.01) for i, r in reference.items()}, tmp_path / "run")
    code, _, overall, verdict = verify_run(REFERENCE, run, capsys)
    assert code == 1 and verdict.startswith("FAIL: the whole run is off the reference")
    assert "faster than" in overall and "check the clock" in overall


def test_tiny_scale_records_are_incomparable_with_the_demo_reference(reference, tmp_path, capsys):
    tiny = {}
    for cell_id, record in reference.items():
        record = scaled(record, 0.2)
        record["cell"]["scale"] = "tiny"
        record["system"]["params_hash"] = params_hash(record["cell"]["task"], "tiny")
        tiny[cell_id] = record
    run = run_from(tiny, tmp_path / "run")
    code, rows, _, verdict = verify_run(REFERENCE, run, capsys)
    assert code == verify.INCOMPARABLE and verdict.startswith("INCOMPARABLE: nothing compared")
    assert "incomparable: scale tiny vs the reference's demo" in rows["pytorch-cnn-cpu-fp32-1cpu"]


def test_one_cell_twice_as_slow_among_honest_ones_is_exactly_that_cell(reference, tmp_path, capsys):
    slow = "pytorch-gru-cpu-fp32-1cpu"
    run = run_from({i: scaled(r, 2.0) if i == slow else r for i, r in reference.items()}, tmp_path / "run")
    code, rows, overall, verdict = verify_run(REFERENCE, run, capsys)
    assert code == 1 and "slower (×" in rows[slow] and "p=" in rows[slow]
    flagged = [i for i, row in rows.items() if "slower" in row or "faster than possible" in row]
    assert flagged == [slow]
    assert verdict.startswith("FAIL: 1 of ") and "slower than the reference beyond their tolerance (×1.5" in verdict


def test_a_cell_whose_reference_runs_differ_gets_that_much_room_and_no_other_cell_does(reference, tmp_path, capsys):
    """A healthy install moves some cells between runs (the reference's own runs show which and how far): such a
    cell at its between-run factor is ok, a steady cell moved by the same factor is off."""
    between = verify.between_runs(verify.reference_runs(REFERENCE))
    wide = max(between, key=between.get)
    steady = [i for i in between if between[i] < 1.2 and verify.samples(reference[i])]    # the least noisy of them:
    narrow = min(steady, key=lambda i: reference[i]["timing"]["spread"])               # its samples cannot overlap
    factor = between[wide]
    assert factor > verify.TIME_TOLERANCE * 1.1 and between[narrow] < 1.2   # the committed runs show both kinds
    run = run_from({i: scaled(r, factor) if i in (wide, narrow) else r for i, r in reference.items()},
                   tmp_path / "run")
    code, rows, _, verdict = verify_run(REFERENCE, run, capsys)
    assert code == 1 and "slower (×" in rows[narrow]
    assert "within its tolerance" in rows[wide] and "the reference's runs differ by" in rows[wide]
    assert verdict.startswith("FAIL: 1 of ")


def test_a_cell_timed_by_one_value_gets_a_single_values_room(reference, tmp_path, capsys):
    """A demo DenseNet times two steps: no samples, so one value, compile noise and all, is all there is."""
    single = "tensorflow-densenet121-cpu-fp32-2cpu"
    assert not verify.samples(reference[single])
    for factor, off in ((1.8, False), (2.6, True)):
        run = run_from({i: scaled(r, factor) if i == single else r for i, r in reference.items()},
                       tmp_path / f"run-{factor}")
        code, rows, _, _ = verify_run(REFERENCE, run, capsys)
        assert (code == 1 and "slower (×" in rows[single]) if off else \
            (code == 0 and "one value, no samples" in rows[single]), rows[single]


def test_a_uniformly_slower_run_is_ok_with_the_factor_stated(reference, tmp_path, capsys):
    run = run_from({i: scaled(r, 1.4) for i, r in reference.items()}, tmp_path / "run")
    code, _, overall, verdict = verify_run(REFERENCE, run, capsys)
    assert code == 0 and verdict.startswith("OK: ")
    assert "1.40× slower than the reference" in overall


def test_two_honest_runs_of_one_machine_class_are_ok(reference, capsys):
    code, rows, overall, verdict = verify_run(REFERENCE, SECOND_RUN, capsys)
    assert code == 0, "\n".join(rows.values()) + "\n" + overall + "\n" + verdict
    assert not any("incomparable" in row for row in rows.values())


def test_another_machine_class_is_incomparable_and_verify_names_a_fitting_reference(reference, tmp_path, capsys):
    other = {}
    for cell_id, record in reference.items():
        record = json.loads(json.dumps(record))
        record["system"]["machine_class"] = "cpu:intel-xeon-platinum-8480:amx:8c"
        other[cell_id] = record
    run = run_from(other, tmp_path / "run")
    code, rows, _, verdict = verify_run(REFERENCE, run, capsys)
    assert code == verify.INCOMPARABLE
    assert "machine cpu:intel-xeon-platinum-8480:amx:8c vs the reference's cpu:" in rows["pytorch-cnn-cpu-fp32-1cpu"]
    # and with the right class under results/reference, verify picks it without being told
    assert verify.fitting_references({verify.machine_class(next(iter(reference.values())))})[0] == REFERENCE


def test_the_overall_factor_is_the_geometric_mean_of_the_cell_ratios_and_needs_five_cells(reference):
    factors = [2.0, 0.5, 1.0, 1.5, 0.8]
    ids = [i for i, r in reference.items() if r["status"] == "ok"][:5]
    run = {i: scaled(reference[i], f) for i, f in zip(ids, factors)}
    overall, basis = verify.overall_factor(reference, run, ids)
    assert basis == 5 and overall == pytest.approx(math.prod(factors) ** (1 / 5), rel=0.02)
    # four cells estimate nothing: a subset's cells are judged by their own ratios, which a factor would hide
    assert verify.overall_factor(reference, run, ids[:4]) == (1.0, 4)


def test_make_reference_then_add_keeps_the_second_run_beside_the_first(tmp_path, monkeypatch):
    """`scripts.reference` copies a run as the reference of its machine class; `--add` keeps another run of that
    class under runs/RUN_ID/ and says in the README how far cells moved between them; the first run cannot be added
    to itself, and a run of another class has no reference to join."""
    from scripts import reference as make_reference
    monkeypatch.setattr(verify, "REFERENCES", tmp_path / "reference")
    first = tmp_path / "first"
    run_from(verify.records_by_id(REFERENCE), first, plan=json.loads((REFERENCE / "plan.json").read_text())["cells"])
    target = make_reference.copy(first)
    assert make_reference.add(SECOND_RUN) == target
    assert [p.name for p in (target / "runs").iterdir()] == [SECOND_RUN.name]
    assert len(verify.reference_runs(target)) == 2 and verify.between_runs(verify.reference_runs(target))
    readme = (target / "README.md").read_text()
    assert readme.count(make_reference.RUNS_MARK) == 1 and "verify widens each cell's tolerance" in readme
    make_reference.add(SECOND_RUN)                                       # again: replaced, not duplicated
    assert (target / "README.md").read_text().count(make_reference.RUNS_MARK) == 1
    with pytest.raises(ValueError, match="the reference's own first run"):
        make_reference.add(first)
