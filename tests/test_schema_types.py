"""Every field of a record that a reader reads is typed and ranged by the schema (scripts/results/records.py, issue 48).

The fields are taken from records.SCHEMA itself, so a field added to it is covered here as it is added: each in turn
gets a value of a wrong type and one out of its range, and the loader refuses the record naming that field; the report
and the site, over a folder holding such records beside honest ones, finish, name the bad ones and show the good ones.
The attack that found the gap: `system.cpu_mhz = "fast"`, accepted, then a crash in shared/peaks.py. Also here: an ok
GPU record must carry its GPUs' facts, and shared/peaks.py gives no peak, never an error, for facts of any type."""

import copy
import json
import math
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scripts.plan.matrix import Cell
from scripts.results import records, report, site
from shared import peaks
from shared.record import write_record

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parent.parent
CPU_CELLS = ROOT / "results" / "reference" / "cpu-amd-epyc-f25-m17-s1-avx512-bf16-2c" / "cells"
GPU_CELLS = ROOT / "results" / "reference" / "gpu-nvidia-h200-140g-x1" / "cells"
GPU_RECORD = json.loads((GPU_CELLS / "jax-cnn-system-fp32-1gpu.json").read_text())
CPU_RECORD = json.loads((CPU_CELLS / "pytorch-cnn-cpu-fp32-1cpu.json").read_text())
H200 = GPU_RECORD["system"]["gpu_facts"][0]
# Small honest records to change one field of (a real record's thousands of samples would make each check slow)
SMALL_GPU = {
    "schema": 2,
    "run_id": "run-1",
    "cell": {**GPU_RECORD["cell"]},
    "status": "ok",
    "reason": None,
    "log_tail": None,
    "metrics": {"train_seconds": 10.0, "accuracy": 0.9},
    "timing": {"values": [0.5, 0.5, 0.6], "median": 0.5},
    "system": {"cpu": "AMD EPYC", "cpu_count": 2, "host": "node-a", "gpus": [H200["name"]], "gpu_facts": [H200]},
    "started_at": "2026-12-03T10:00:00+00:00",
    "finished_at": "2026-12-03T10:05:00+00:00",
    "git_commit": None,
}
SMALL_CPU = {**SMALL_GPU, "cell": {**CPU_RECORD["cell"]}, "system": {"cpu": "AMD EPYC", "cpu_count": 2}}
ALL_TYPES = ("string", "number", "integer", "boolean", "null", "array", "object")


def fields(rule: dict, path: tuple = ()) -> Iterator[tuple[tuple, dict]]:
    """(path, rule) of every field records.SCHEMA types, nested objects' and a list of objects' (path …, 0, key) too:
    the leaves and the objects that hold them alike."""
    for key, sub in rule.get("properties", {}).items():
        yield (*path, key), sub
        yield from fields(sub, (*path, key))
        items = sub.get("items")
        if isinstance(items, dict) and "properties" in items:
            yield from fields(items, (*path, key, 0))


FIELDS = dict(fields(records.SCHEMA))


def allowed(rule: dict) -> set[str]:
    types = rule.get("type", ALL_TYPES)
    return {types} if isinstance(types, str) else set(types)


def example(kind: str) -> st.SearchStrategy:
    """A JSON value of exactly the JSON type `kind` ("number": with a fraction, so no rule of "integer" takes it)."""
    return {
        "string": st.sampled_from(["fast", "", "2596", "NaN"]) | st.text(max_size=8),
        "number": st.floats(-1e6, 1e6).filter(lambda x: not x.is_integer()),
        "integer": st.integers(-(10**6), 10**6),
        "boolean": st.booleans(),
        "null": st.none(),
        "array": st.lists(st.integers(0, 9) | st.text(max_size=3), max_size=2),
        "object": st.dictionaries(st.sampled_from(["a", "name"]), st.integers(0, 9), max_size=2),
    }[kind]


def wrong_type(rule: dict) -> st.SearchStrategy | None:
    """A value no type of `rule` admits (JSON Schema's "number" takes integers; an enum or a const, what is not in
    it); None where every type is admitted."""
    if "enum" in rule or "const" in rule:
        choices = rule.get("enum", [rule.get("const")])
        kinds = [k for k in ALL_TYPES if k not in ("integer",)]
        return st.one_of(*(example(k) for k in kinds)).filter(lambda v: all(not same(v, c) for c in choices))
    kinds = set(ALL_TYPES) - allowed(rule)
    if "number" in allowed(rule):
        kinds.discard("integer")
    return st.one_of(*(example(k) for k in sorted(kinds))) if kinds else None


def same(value: Any, choice: Any) -> bool:
    return (
        type(value) is type(choice)
        and value == choice
        or (not isinstance(value, bool) and not isinstance(choice, bool) and value == choice)
    )


def out_of_range(rule: dict) -> st.SearchStrategy | None:
    """A value of an admitted type outside `rule`'s range: above its maximum or below its minimum, longer than its
    maxLength, not of its pattern, a list with an item out of range or of more than maxItems; None without a range."""
    kinds, ways = allowed(rule), []
    integral = "number" not in kinds
    if kinds & {"number", "integer"}:
        if "maximum" in rule:
            top = rule["maximum"]
            ways.append(
                st.integers(int(top) + 1, int(top) * 2 + 2)
                if integral
                else st.floats(top, top * 10 + 1, exclude_min=True)
            )
        if "minimum" in rule:
            low = rule["minimum"]
            ways.append(
                st.integers(int(low) - 10**6, int(low) - 1) if integral else st.floats(low - 1e6, low, exclude_max=True)
            )
    if "string" in kinds:
        if "maxLength" in rule:
            ways.append(st.integers(rule["maxLength"] + 1, rule["maxLength"] + 50).map(lambda n: "x" * n))
        if "pattern" in rule:
            ways.append(st.sampled_from(["../../x", "a b", "x\n", "", "<b>"]).filter(unmatched(rule["pattern"])))
    if "array" in kinds:
        items = rule.get("items") or {}
        inner = out_of_range(items) if items else None
        if inner is not None:
            ways.append(st.lists(inner, min_size=1, max_size=2))
        if rule.get("maxItems", 10**9) <= 5000:
            ways.append(st.just([valid(items)] * (rule["maxItems"] + 1)))
    if "object" in kinds and "maxProperties" in rule:
        ways.append(st.just({f"k{i}": None for i in range(rule["maxProperties"] + 1)}))
    return st.one_of(*ways) if ways else None


def unmatched(pattern: str):
    return lambda text: re.search(pattern, text) is None


def valid(rule: dict) -> Any:
    """A value `rule` admits, for the items of an over-long list."""
    kinds = allowed(rule)
    return 0 if kinds & {"number", "integer"} else "x" if "string" in kinds else {} if "object" in kinds else None


def put(record: dict, path: tuple, value: Any) -> dict:
    """A copy of `record` with the field at `path` set to `value`, the objects (and the list's first item) above it
    made where the record has none."""
    record = copy.deepcopy(record)
    target: Any = record
    for key, below in zip(path, path[1:], strict=False):
        if isinstance(key, int):
            target = target[key]
            continue
        held = target.get(key)
        if isinstance(below, int):
            if not (isinstance(held, list) and held and isinstance(held[0], dict)):
                target[key] = [copy.deepcopy(H200)]
        elif not isinstance(held, dict):
            target[key] = {}
        target = target[key]
    target[path[-1]] = value
    return record


def name(path: tuple) -> str:
    return "/".join(map(str, path))


def refused_naming(record: dict, path: tuple) -> str:
    """The loader's reason for refusing `record`, which must name the field at `path`."""
    with pytest.raises(records.RecordError) as caught:
        records.check(record, "generated")
    reason = str(caught.value)
    # the version is checked before the schema, in its own words
    named = re.match(r"generated: ([^:]*):", reason)
    assert named and (named[1] + "/").startswith(name(path) + "/") or (path == ("schema",) and "schema" in reason), (
        path,
        reason,
    )
    return reason


def test_the_schema_types_every_field_a_reader_reads():
    """Every field a reader of scripts/results, shared/peaks.py or gpu_check reads is in the schema with a type, and
    every number of them with a range: the attack's cpu_mhz, the cores, the memory, the GPU facts, the versions, the
    calibration, the timing, the figures."""
    read = {
        ("system", key)
        for key in (
            "cpu_mhz",
            "cpu_max_mhz",
            "cpu_usable",
            "cpu_count",
            "cpu_flags",
            "cpu_family",
            "cpu_model_number",
            "cpu_vendor",
            "cpu_stepping",
            "cpu",
            "memory_gib",
            "gpus",
            "gpu_sm_counts",
            "gpu_facts",
            "driver",
            "cuda",
            "cudnn",
            "framework_version",
            "os",
            "host",
            "code_hash",
            "params_hash",
            "machine_class",
        )
    }
    read |= {("system", "gpu_facts", 0, key) for key in ("name", "memory_mib", "driver")}
    read |= {("system", "calibration", key) for key in ("gemm_fp32_flops", "gemm_reduced_flops")}
    read |= {("timing", "barrier_audit", key) for key in ("checks", "leaks", "max_after_seconds")}
    read |= {("timing", key) for key in ("values", "warmup_windows", "round_trips_ns", "unit", "spread", "unstable")}
    read |= {("metrics", key) for key in (*records.NUMBER_METRICS, *records.INTEGER_METRICS, "epoch_seconds")}
    assert read <= set(FIELDS), sorted(read - set(FIELDS))
    for path, rule in FIELDS.items():
        assert "type" in rule or "enum" in rule or "const" in rule, name(path)
        if "type" in rule and allowed(rule) & {"number", "integer"} and path[0] != "cell":
            assert "maximum" in rule and ("minimum" in rule or "exclusiveMinimum" in rule), name(path)
        if "string" in allowed(rule):
            assert "maxLength" in rule or "pattern" in rule or "enum" in rule, name(path)


def base_for(path: tuple) -> dict:
    """The honest record to change `path` of: the GPU one, whose facts it must carry, or the CPU one."""
    return SMALL_GPU if path[:2] == ("system", "gpu_facts") or path[0] != "system" else SMALL_CPU


def test_the_small_records_are_honest():
    for record in (SMALL_GPU, SMALL_CPU):
        assert records.check(copy.deepcopy(record), "small") == record


WRONG = {path: wrong_type(rule) for path, rule in FIELDS.items()}
RANGED = {path: out_of_range(rule) for path, rule in FIELDS.items()}


@settings(max_examples=3, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_each_field_of_a_wrong_type_or_out_of_range_is_refused_naming_it(data):
    """Each field the schema types, in turn, of a type it does not admit and then out of its range: the loader refuses
    the record, naming the field."""
    assert len(FIELDS) > 100 and sum(s is not None for s in RANGED.values()) > 80
    for path in FIELDS:
        for kind in (WRONG, RANGED):
            if kind[path] is None:
                continue
            value = data.draw(kind[path], label=f"{name(path)} {'type' if kind is WRONG else 'range'}")
            refused_naming(put(base_for(path), path, value), path)


def test_the_committed_records_still_validate():
    """The schema's types and ranges hold for every committed record (the references and the community's)."""
    import subprocess

    listed = subprocess.run(["git", "ls-files", "results"], cwd=ROOT, capture_output=True, text=True)
    seen = 0
    for line in listed.stdout.split():
        if not line.endswith(".json"):
            continue
        data = json.loads((ROOT / line).read_text())
        if isinstance(data, dict) and {"cell", "status"} <= set(data):
            assert records.schema_problem(data) is None, (line, records.schema_problem(data))
            seen += 1
    assert seen > 200


def bad_folder(tmp_path: Path) -> tuple[Path, dict[str, tuple]]:
    """A run folder of honest records (CPU and GPU) and, for every typed field, one record with it of a wrong type or
    out of range, in turn (a fixed value of each strategy); {file name: the field}."""
    folder = tmp_path / "run"
    honest = [CPU_CELLS / "pytorch-cnn-cpu-fp32-1cpu.json", CPU_CELLS / "jax-gru-cpu-fp32-1cpu.json"]
    honest += [GPU_CELLS / "jax-cnn-system-fp32-1gpu.json"]
    for path in honest:
        write_record(folder / "cells" / path.name, json.loads(path.read_text()))
    bad = {}
    for i, path in enumerate(FIELDS):
        kind, strategy = ("range", RANGED[path]) if i % 2 and RANGED[path] is not None else ("type", WRONG[path])
        if strategy is None:
            continue
        file = f"zz-bad-{i}-{kind}.json"
        (folder / "cells" / file).write_text(json.dumps(put(base_for(path), path, first(path, kind))))
        bad[file] = path
    return folder, bad


def first(path: tuple, kind: str) -> Any:
    """A fixed value for the field at `path` that its rule refuses: of a wrong type, or at the edge of its range."""
    import jsonschema

    rule = FIELDS[path]
    refuses = lambda value: not jsonschema.Draft202012Validator(rule).is_valid(value)
    return next(filter(refuses, ["fast", 0.5, [], {}, True, None, 7] if kind == "type" else edges(rule)))


def edges(rule: dict) -> list:
    """out_of_range's values nearest the rule's range, for the items of a list too."""
    kinds, found = allowed(rule), []
    if kinds & {"number", "integer"}:
        found += [rule["maximum"] + 1] if "maximum" in rule else []
        found += [rule["minimum"] - 1] if "minimum" in rule else []
    if "string" in kinds:
        found += ["x" * (rule["maxLength"] + 1)] if "maxLength" in rule else []
        found += ["../../x", "", "x\n"] if "pattern" in rule else []
    if "array" in kinds and rule.get("items"):
        found += [[edge] for edge in edges(rule["items"])]
        found += [[valid(rule["items"])] * (rule["maxItems"] + 1)] if rule.get("maxItems", 10**9) <= 5000 else []
    if "object" in kinds and "maxProperties" in rule:
        found.append({f"k{i}": None for i in range(rule["maxProperties"] + 1)})
    return found


def test_the_report_and_the_site_survive_a_folder_of_mistyped_records(tmp_path, capsys):
    """Over a folder holding a mistyped and an out-of-range record for every field beside honest ones, the report
    finishes, quarantines each bad record with a reason naming its field and shows the honest cells; the site's
    reading leaves each bad record out, naming it, and its results pages draw the honest ones."""
    folder, bad = bad_folder(tmp_path)
    paths = report.write_report(folder)
    markdown = paths["markdown"].read_text()
    for cell in ("pytorch", "jax"):
        assert cell in markdown
    reasons = dict(records.quarantined(folder))
    assert len(reasons) == len(bad)
    for source, reason in reasons.items():
        path = bad[Path(source).name]
        assert name(path) in reason or path == ("schema",), (source, reason)
    got, _ = site.read_source(folder)
    assert sorted(Cell(**r.data["cell"]).id for r in got) == sorted(
        ["pytorch-cnn-cpu-fp32-1cpu", "jax-gru-cpu-fp32-1cpu", "jax-cnn-system-fp32-1gpu"]
    )
    left_out = capsys.readouterr().err
    assert all(file in left_out for file in bad)
    frame = report.to_frame([{**r.data, "_source": "run/x", "_links": ("records/x.json", None)} for r in got])
    frame["source"], frame["links"] = frame["_source"], frame["_links"]
    (tmp_path / "site" / "plots").mkdir(parents=True)
    assert "pytorch" in site.results_page("cnn", frame, tmp_path / "site", [])
    assert "jax" in site.results_page("gru", frame, tmp_path / "site", [])


def test_the_cpu_mhz_attack_is_refused_and_the_report_and_site_go_on(tmp_path, capsys):
    """The issue's attack: a community record whose cpu_mhz is "fast" is refused by the loader, naming the field; the
    report and the site's reading of the folder go on with the honest records."""
    record = copy.deepcopy(CPU_RECORD)
    record["system"]["cpu_mhz"] = "fast"
    folder = tmp_path / "submission"
    write_record(folder / "cells" / "pytorch-cnn-cpu-fp32-1cpu.json", record)
    write_record(
        folder / "cells" / "jax-gru-cpu-fp32-1cpu.json",
        json.loads((CPU_CELLS / "jax-gru-cpu-fp32-1cpu.json").read_text()),
    )
    with pytest.raises(records.RecordError, match=r"system/cpu_mhz: 'fast' is not of type 'number', 'null'"):
        records.load(folder / "cells" / "pytorch-cnn-cpu-fp32-1cpu.json")
    paths = report.write_report(folder)
    assert "jax" in paths["markdown"].read_text()
    assert any("system/cpu_mhz" in reason for _, reason in records.quarantined(folder))
    got, _ = site.read_source(folder)
    assert [r.cell.framework for r in got] == ["jax"] and "system/cpu_mhz" in capsys.readouterr().err
    assert peaks.device_peak(record["system"], "cpu", "fp32") == (None, "no CPU clock in the record")


# ---------------------------------------------------------------- an ok GPU record carries its GPUs' facts


@pytest.mark.parametrize(
    "change, field",
    [
        (lambda s: s.pop("gpu_facts"), "system"),
        (lambda s: s.update(gpu_facts=[]), "system/gpu_facts"),
        (lambda s: s.update(gpu_facts=None), "system/gpu_facts"),
        (lambda s: s["gpu_facts"][0].pop("name"), "system/gpu_facts/0"),
        (lambda s: s["gpu_facts"][0].update(name=None), "system/gpu_facts/0/name"),
        (lambda s: s["gpu_facts"][0].update(name=""), "system/gpu_facts/0/name"),
        (lambda s: s["gpu_facts"][0].pop("memory_mib"), "system/gpu_facts/0"),
        (lambda s: s["gpu_facts"][0].update(memory_mib=None), "system/gpu_facts/0/memory_mib"),
        (lambda s: s["gpu_facts"][0].update(memory_mib=0), "system/gpu_facts/0/memory_mib"),
        (lambda s: s["gpu_facts"][0].pop("driver"), "system/gpu_facts/0"),
        (lambda s: s["gpu_facts"][0].update(driver=None), "system/gpu_facts/0/driver"),
    ],
)
def test_an_ok_gpu_record_without_its_gpu_facts_is_refused(change, field):
    """An ok record of a GPU cell names its GPUs (name, memory, driver: what its machine class and its peak come
    from); without them it is refused, naming the field. A failed GPU record, which ran nothing, and a CPU record
    need none."""
    assert records.GPU_FACTS_REQUIRED == ("name", "memory_mib", "driver")
    record = copy.deepcopy(GPU_RECORD)
    record["system"].pop("machine_class")  # derived on reading (its facts are what is taken away here)
    records.check(copy.deepcopy(record), "honest")
    change(record["system"])
    with pytest.raises(records.RecordError, match=f"generated: {re.escape(field)}: "):
        records.check(copy.deepcopy(record), "generated")
    record["status"], record["reason"] = "failed", "CUDA error"
    records.check(record, "failed")  # a failed record ran nothing: no facts to require
    cpu = copy.deepcopy(CPU_RECORD)
    cpu["system"]["gpu_facts"] = []
    records.check(cpu, "cpu")


# ---------------------------------------------------------------- shared/peaks.py: no peak, never an error

_any_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=6,
)
_fact_keys = (
    "cpu_mhz",
    "cpu_max_mhz",
    "cpu_usable",
    "cpu_count",
    "cpu_flags",
    "cpu_family",
    "cpu_model_number",
    "cpu_vendor",
    "gpu_facts",
    "gpus",
)


@settings(max_examples=100, deadline=None)
@given(
    st.dictionaries(st.sampled_from(_fact_keys), _any_json, max_size=6),
    st.sampled_from(["cpu", "gpu"]),
    st.sampled_from(["fp32", "tf32", "amp", "bf16"]),
    _any_json,
)
def test_peaks_give_no_peak_for_facts_of_any_type(system, device, precision, achieved):
    """Whatever a record's facts hold (missing, None, text, lists, NaN, huge integers), shared/peaks.py answers with
    a peak (a finite positive number) or none and its reason, never an error; shares likewise."""
    peak, words = peaks.device_peak(system, device, precision)
    assert isinstance(words, str)
    assert peak is None or (isinstance(peak, float) and math.isfinite(peak) and peak > 0)
    got = peaks.shares(achieved, peak, achieved)
    assert set(got) == {"efficiency", "efficiency_of_gemm", "implausible"}


@pytest.mark.parametrize(
    "system",
    [
        {"cpu_mhz": "fast", "cpu_count": 2},
        {"cpu_mhz": None, "cpu_count": 2},
        {"cpu_mhz": 2596, "cpu_count": "two"},
        {"cpu_mhz": float("nan"), "cpu_count": 2},
        {"cpu_mhz": 10**400, "cpu_count": 2},
        {"cpu_mhz": -5, "cpu_count": 2},
        {"cpu_mhz": True, "cpu_count": 2},
        {"cpu_mhz": 1e300, "cpu_count": 1e300},  # each finite, their product not
    ],
)
def test_a_cpu_fact_that_is_not_a_positive_number_gives_no_peak(system):
    """A clock or a core count that is missing, null, text, NaN, huge, negative or a boolean gives no CPU peak: it is
    not guessed, and not an error."""
    assert peaks.cpu_peak(system) is None
    assert peaks.device_peak(system, "cpu", "fp32")[0] is None
    assert peaks.cpu_peak({"cpu_mhz": 2596, "cpu_count": 2}) == 2 * 2596e6 * 16


@pytest.mark.parametrize("facts", [None, "H100", [None], ["H100"], [{"name": 7}], [{}], {}])
def test_gpu_facts_of_another_shape_give_no_peak(facts):
    assert peaks.device_peak({"gpu_facts": facts}, "gpu", "fp32")[0] is None
    assert peaks.device_peak({"gpu_facts": facts, "gpus": ["NVIDIA H100 80GB HBM3"]}, "gpu", "fp32")[0] == 67e12
