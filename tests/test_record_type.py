"""records.load gives a typed Record (scripts/results/records.py): what older writers left out is filled in once, by
`upgrade`, and the readers of scripts/results read attributes, never chains of `.get(…) or {}`."""

import copy
import json
import re
from pathlib import Path

import pytest

from scripts.results import records
from shared import params, sysinfo
from shared.record import write_record

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parent.parent
CELLS = ROOT / "results" / "reference" / "cpu-amd-epyc-f25-m17-s1-avx512-bf16-2c" / "cells"
CELL_ID = "pytorch-cnn-cpu-fp32-1cpu"


def real(cell_id=CELL_ID):
    return json.loads((CELLS / f"{cell_id}.json").read_text())


def test_load_gives_attributes(tmp_path):
    data = real()
    record = records.load(CELLS / f"{CELL_ID}.json")
    assert record.data == data and record == records.Record.of(data)
    assert record.cell.framework == "pytorch" and record.cell.task == "cnn" and record.cell.tuning == "default"
    assert record.status == "ok" and record.started_at == data["started_at"]
    assert record.timing.values == tuple(data["timing"]["values"]) and record.timing.unit == data["timing"]["unit"]
    assert record.samples == [float(v) for v in data["timing"]["values"]]
    assert record.timing.median == data["timing"]["median"] and record.timing.q1 == data["timing"]["q1"]
    assert record.machine_class == data["system"]["machine_class"] and record.host == data["system"]["host"]
    assert record.metrics["accuracy"] == data["metrics"]["accuracy"]
    assert record.facts("calibration")["gemm_fp32_flops"] == data["system"]["calibration"]["gemm_fp32_flops"]
    with pytest.raises(TypeError):
        record.metrics["accuracy"] = 0  # type: ignore[index]  # read-only
    with pytest.raises(AttributeError):
        record.status = "failed"  # type: ignore[misc]  # frozen


def test_an_older_record_is_upgraded_in_one_place(tmp_path):
    """A record of schema 1 from before the tuning axis, the machine class and the samples, and a host-written one
    without metrics, timing or system: upgrade fills each, and leaves the record as written."""
    older = real()
    del older["cell"]["tuning"], older["system"]["machine_class"]
    written = copy.deepcopy(older)
    path = tmp_path / "cell.json"
    write_record(path, older)
    record = records.load(path)
    assert record.data == written  # as written: nothing added on disk or in `data`
    assert record.cell.tuning == params.DEFAULT_TUNING
    assert record.machine_class == sysinfo.machine_class(older["system"], "cpu", 1) == real()["system"]["machine_class"]
    del older["timing"]["unit"]  # before the samples' unit, a record's windows were not its samples
    record = records.Record.of(older)
    assert record.samples == [] and record.timing.values == tuple(older["timing"]["values"])
    assert record.steady == older["metrics"]["steady_state_seconds"]  # the recorded time, no samples to take it from

    host_written = {key: older[key] for key in ("schema", "run_id", "cell", "started_at", "finished_at")}
    record = records.Record.of({**host_written, "status": "failed", "reason": "boom", "system": None})
    assert record.metrics == {} and record.system["machine_class"] == "cpu:unknown:isa-unknown:?c"
    assert record.timing == records.Timing() and record.host is None and record.facts("placement") == {}
    assert records.upgrade(host_written) is not host_written and "metrics" not in host_written


def test_of_keeps_a_record():
    record = records.Record.of(real())
    assert records.Record.of(record) is record


# The readers of scripts/results that take a Record: none of them chains `.get(…) or {}` over a record's blocks. The
# submission package reads Records too (record.data only where it needs the record as written: a redacted copy,
# records.inconsistencies); every module of it is listed, so a new one is covered as it is added. records.py's checks
# (contradictions, figures_that_do_not_follow) judge the dict before a Record exists, after the schema: they index
# what it guarantees and read each optional block once into a local, never a chain.
SUBMISSION = ROOT / "scripts" / "results" / "submission"
READERS = (
    "verify.py",
    "report.py",
    "reference.py",
    "site.py",
    "merge.py",
    "records.py",
    *sorted(f"submission/{p.name}" for p in SUBMISSION.glob("*.py")),
)


def test_no_get_or_empty_chains_in_the_readers():
    """No reader, the submission package's modules among them, chains `.get(…) or {}`: it reads attributes."""
    assert "submission/checks.py" in READERS and "submission/derived.py" in READERS
    chains = {
        name: re.findall(r"\.get\([^()]*\)\s*or\s*\{\}", (ROOT / "scripts" / "results" / name).read_text())
        for name in READERS
    }
    assert {name: found for name, found in chains.items() if found} == {}


def test_the_readers_get_records():
    from scripts.results import reference, report, site, verify

    folder = CELLS.parent
    assert all(isinstance(r, records.Record) for r in verify.records_by_id(folder).values())
    assert all(isinstance(r, records.Record) for r in report.load_records([folder]))
    assert all(isinstance(r, records.Record) for r in site.read_source(folder)[0])
    _, got, classes = reference.checked(folder, allow_failed=True)
    assert all(isinstance(r, records.Record) for r in got) and len(classes) == 1
