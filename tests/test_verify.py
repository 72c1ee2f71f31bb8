"""`verify`'s noise model on real records: the committed reference of this project's CPU machine class (made by
`make reference`) and a second honest run of the same class (tests/data/second-run, the `reference` profile's cnn
and gru cells, made the same day). Each test changes only what it names; the verdicts the old verify got wrong (an
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
    assert verdict.startswith("FAIL: 1 of ") and "slower than the reference beyond ×1.5" in verdict


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
