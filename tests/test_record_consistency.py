"""A record whose published figures do not follow from its own samples is refused (scripts/results/records.py,
`contradictions`), as is NaN or infinity anywhere and an accuracy or AUC outside [0, 1]: built from the committed
reference records (results/reference/cpu-amd-epyc-f25-m17-s1-avx512-bf16-2c), each case changes one figure of a real
record."""

import json
from pathlib import Path

import pytest

from scripts.results import records
from shared.record import RecordError, write_record

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parent.parent
CELLS = ROOT / "results" / "reference" / "cpu-amd-epyc-f25-m17-s1-avx512-bf16-2c" / "cells"


def real(cell_id):
    return json.loads((CELLS / f"{cell_id}.json").read_text())


def refused(record, tmp_path, match):
    path = tmp_path / "cell.json"
    write_record(path, record)
    with pytest.raises(RecordError, match=match):
        records.read(path)


def test_every_committed_record_is_consistent():
    paths = sorted(ROOT.glob("results/reference/*/cells/*.json")) + sorted(ROOT.glob("results/reference/*/runs/*/*"))
    paths += sorted((ROOT / "tests" / "data").glob("*/cells/*.json"))
    assert len(paths) > 150
    for path in paths:
        assert records.contradictions(json.loads(path.read_text())) == [], path


@pytest.mark.parametrize(
    "cell_id",
    [
        "pytorch-cnn-cpu-fp32-1cpu",
        "tensorflow-gru-cpu-fp32-1cpu",
        "r-keras-gru-cpu-fp32-1cpu",
        "pytorch-densenet121-cpu-fp32-2cpu",
    ],
)
@pytest.mark.parametrize("factor", [3.0, 1.001])
def test_a_steady_state_that_does_not_follow_from_the_samples_is_refused(tmp_path, cell_id, factor):
    record = real(cell_id)
    record["metrics"]["steady_state_seconds"] *= factor
    refused(record, tmp_path, "inconsistent: metrics/steady_state_seconds .* does not follow from the samples")


@pytest.mark.parametrize("cell_id", ["pytorch-cnn-cpu-fp32-1cpu", "pytorch-densenet121-cpu-fp32-2cpu"])
def test_a_warm_up_split_other_than_the_rules_is_refused(tmp_path, cell_id):
    """Which windows are warm-up is the rule's to say (shared.timing.warm_windows): a record that calls a sample
    warm-up, or a warm-up window a sample, is refused however its other figures were made to fit."""
    record = real(cell_id)
    warm, values = record["timing"]["warmup_windows"], record["timing"]["values"]
    assert warm and len(values) >= 5  # the demo's warm-up and its five samples
    longer = json.loads(json.dumps(record))
    longer["timing"].update(warmup_windows=[*warm, values[0]], values=values[1:])
    shorter = json.loads(json.dumps(record))
    shorter["timing"].update(warmup_windows=warm[:-1], values=[warm[-1], *values])
    for changed in (longer, shorter):
        assert any(
            line.startswith("timing.warmup_windows holds") for line in records.figures_that_do_not_follow(changed)
        )
        refused(changed, tmp_path, "inconsistent: ")
    assert records.inconsistencies(record) == []


def test_the_samples_changed_under_a_published_steady_state_are_refused_too(tmp_path):
    record = real("pytorch-cnn-cpu-fp32-1cpu")
    record["timing"]["values"] = [v / 3 for v in record["timing"]["values"]]
    refused(record, tmp_path, "steady_state_seconds .* \\(median window .* × 56 steps × 1 epochs")
    assert records.contradictions(real("pytorch-cnn-cpu-fp32-1cpu")) == []


@pytest.mark.parametrize("factor", [3.0, 0.999])
def test_seconds_per_1000_images_that_do_not_follow_from_the_passes_are_refused(tmp_path, factor):
    record = real("pytorch-resnet50-cpu-fp32-1cpu")
    record["metrics"]["seconds_per_1000_images"] *= factor
    refused(record, tmp_path, "seconds_per_1000_images .* does not follow from the passes")


@pytest.mark.parametrize(
    "key, value", [("accuracy", 1.04), ("accuracy", -0.01), ("accuracy", float("nan")), ("accuracy", float("inf"))]
)
def test_an_accuracy_outside_zero_to_one_or_not_finite_is_refused(tmp_path, key, value):
    record = real("pytorch-cnn-cpu-fp32-1cpu")
    record["metrics"][key] = value
    refused(record, tmp_path, "metrics/accuracy .*(not within \\[0, 1\\]|not a finite number)")


@pytest.mark.parametrize("value", [0.0, 1.0])
def test_an_accuracy_on_the_edge_is_accepted(value):
    record = real("pytorch-cnn-cpu-fp32-1cpu")
    record["metrics"]["accuracy"] = value
    assert records.inconsistencies(record) == []


def test_an_auc_above_one_is_refused(tmp_path):
    record = real("pytorch-densenet121-cpu-fp32-2cpu")
    record["metrics"]["auc"] = 1.2
    refused(record, tmp_path, "metrics/auc 1.2 is not within")


def test_a_placement_that_is_not_a_pair_of_round_trips_is_refused(tmp_path):
    record = real("pytorch-cnn-cpu-fp32-1cpu")
    record["system"]["placement"] = {"before_ns": 270.5, "after_ns": 480.0, "cpus": [0, 1]}  # shared/placement.py
    path = tmp_path / "cell.json"
    write_record(path, record)
    assert records.read(path)["system"]["placement"]["after_ns"] == 480.0
    record["system"]["placement"]["before_ns"] = "near"
    refused(record, tmp_path, "system/placement/before_ns")


@pytest.mark.parametrize(
    "where",
    [
        ("system", "calibration", "gemm_fp32_flops"),
        ("timing", "values", 2),
        ("metrics", "epoch_seconds", 0),
        ("metrics", "final_loss"),
    ],
)
def test_nan_or_infinity_anywhere_is_refused(tmp_path, where):
    for bad in (float("nan"), float("-inf")):
        record = real("pytorch-cnn-cpu-fp32-1cpu")
        target = record
        for key in where[:-1]:
            target = target[key]
        target[where[-1]] = bad
        refused(record, tmp_path, "/".join(map(str, where)) + " is not a finite number")


def test_a_record_of_task_parameters_this_checkout_does_not_know_is_not_recomputed():
    record = real("pytorch-cnn-cpu-fp32-1cpu")
    record["metrics"]["steady_state_seconds"] *= 3
    for key in ("steady_samples_per_second", "achieved_flops", "efficiency", "efficiency_of_gemm"):
        record["metrics"][key] /= 3  # its throughput still follows from its own times
    record["system"]["params_hash"] = "0123456789ab"  # another batch size: verify refuses to compare it instead
    assert records.inconsistencies(record) == []
    record["status"] = "failed"
    record["system"]["params_hash"] = real("pytorch-cnn-cpu-fp32-1cpu")["system"]["params_hash"]
    assert records.contradictions(record) == []  # a failed record publishes no figure to check


# The record schema's fingerprint at each version of shared.record.SCHEMA. A key added to (or a type changed in)
# scripts/results/records.py's SCHEMA without a new version fails here: readers of older records must be able to tell
# which keys a record can have from its version alone.
SCHEMA_FINGERPRINTS = {1: "212db6875c274c71", 2: "aac2d7872fd16d4b"}


def fingerprint(schema):
    import hashlib

    return hashlib.sha256(json.dumps(schema, sort_keys=True).encode()).hexdigest()[:16]


def test_the_schema_changes_only_with_its_version():
    from shared.record import SCHEMA

    assert SCHEMA_FINGERPRINTS.get(SCHEMA) == fingerprint(records.SCHEMA), (
        f"the record schema changed ({fingerprint(records.SCHEMA)}) but shared.record.SCHEMA is still {SCHEMA}: raise "
        f"it, add {{{SCHEMA + 1}: {fingerprint(records.SCHEMA)!r}}} here, and fill the new key in for older records "
        "in scripts/results/records.py's upgrade"
    )


def test_a_key_added_anywhere_changes_the_fingerprint():
    """The fingerprint sees a key added to any block of the schema, and every key a writer writes is in the schema
    (so a key added to shared/record.py's make_record or CELL_KEYS cannot bypass the version)."""
    import copy

    from shared.record import CELL_KEYS, make_record

    for block in ((), ("cell",), ("metrics",), ("timing",), ("system",)):
        changed = copy.deepcopy(records.SCHEMA)
        target = changed
        for key in block:
            target = target["properties"][key]
        target["properties"]["a_new_key"] = {"type": "string"}
        assert fingerprint(changed) != fingerprint(records.SCHEMA), block
    cell = dict(
        zip(CELL_KEYS, ("pytorch", "cnn", "cpu", "fp32", 1, "cpu", "synthetic", "full", "default"), strict=True)
    )
    written = make_record(cell, "failed")
    assert set(written) == set(records.SCHEMA["properties"])
    assert set(written["cell"]) == set(records.SCHEMA["properties"]["cell"]["properties"])
