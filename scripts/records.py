"""Records are untrusted input wherever the host side reads them (DESIGN.md, "Result record").

A record arrives from a runner in a container, a cell job on another host, an artifact download: any of its fields
may be wrong, hostile or truncated. `read` checks a record file against SCHEMA (jsonschema), its ids against a safe
alphabet (so a cell id or host name can become a file name and never a path), its times as ISO 8601 and not in the
future; `confined` builds a path from record fields only under a given folder; `quarantine` puts a file that fails
aside with its reason, so one bad record never stops a merge or a report.
"""
import hashlib
import json
import os
import re
from datetime import datetime, timedelta, timezone
from pathlib import Path

try:
    import jsonschema
except ImportError:     # a bare GPU machine's Python (make gpu-check) may lack it: see OWN_RECORDS_ONLY
    jsonschema = None

from shared import params
from shared.record import CELL_KEYS, SCHEMA as RECORD_SCHEMA, STATUSES, RecordError, read_record

# File names and shell words as they are: no '/', no '..', no space, no newline. \Z, not $: jsonschema matches with
# Python's re.search, where $ also matches before a final newline ("run\n" would pass).
SAFE_ID = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}\Z"
MAX_BYTES = 8 * 2**20                             # a record is a few KB; its log tail at most tens of KB
CLOCK_SKEW = timedelta(minutes=10)                # how far in the future a host's clock may run before it is a lie

_id = {"type": "string", "pattern": SAFE_ID}
_number = {"type": ["number", "null"]}
_text = {"type": ["string", "null"], "maxLength": 200_000}
SCHEMA = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "rosetta result record",
    "type": "object",
    "additionalProperties": False,
    "required": ["schema", "run_id", "cell", "status", "started_at", "finished_at"],
    "properties": {
        "schema": {"const": RECORD_SCHEMA},
        "run_id": {"type": ["string", "null"], "pattern": SAFE_ID},
        "cell": {
            "type": "object", "additionalProperties": False, "required": list(CELL_KEYS),
            "properties": {"framework": _id, "task": {"enum": list(params.TASKS)}, "variant": _id,
                           "precision": {"enum": ["fp32", "tf32", "amp", "bf16"]},
                           "gpus": {"type": "integer", "minimum": 1, "maximum": 4096},
                           "device": {"enum": ["cpu", "gpu"]}, "data": {"enum": ["synthetic", "real"]},
                           "scale": {"enum": ["full", "demo", "tiny"]}}},
        "status": {"enum": list(STATUSES)},
        "reason": _text,
        "log_tail": _text,
        "metrics": {"type": "object", "properties": {
            **{key: _number for key in ("train_seconds", "steady_state_seconds", "seconds_per_1000_images",
                                        "accuracy", "auc")},
            "epoch_seconds": {"type": ["array", "null"], "items": {"type": "number"}},
            "loss_curve": {"type": ["array", "null"], "items": {"type": "number"}, "maxItems": 10_000}}},
        "timing": {"type": "object", "properties": {key: _number for key in ("min", "median", "max")}},
        "system": {"type": "object", "properties": {
            "host": {"type": ["string", "null"], "pattern": SAFE_ID},
            "cpu": _text, "cpu_count": {"type": ["integer", "null"]},
            # what verify and the report's ‡ compare by: shared.sysinfo.machine_class's alphabet, params_hash's hex
            "machine_class": {"type": ["string", "null"], "pattern": "^[a-z0-9?][a-z0-9?:._-]{0,199}\\Z"},
            "params_hash": {"type": ["string", "null"], "pattern": "^[0-9a-f]{12}\\Z"},
            "gpus": {"type": ["array", "null"], "items": {"type": "string", "maxLength": 200}}}},
        "started_at": {"type": "string", "maxLength": 40},
        "finished_at": {"type": "string", "maxLength": 40},
        "git_commit": {"type": ["string", "null"], "pattern": "^[0-9a-f]{4,40}\\Z"},
    },
}
VALIDATOR = jsonschema.Draft202012Validator(SCHEMA) if jsonschema else None
# Without jsonschema no record can be checked, so none is read, unless the one process that may read records without
# it says so: make gpu-check on a bare GPU machine, which reads only what its own runners wrote in its own run, and
# says in gpu-check.json that they were not schema-checked there (they are when copied: scripts.reference, merge).
OWN_RECORDS_ONLY = False


def safe_id(text):
    """True for a string of the safe alphabet (SAFE_ID)."""
    return isinstance(text, str) and re.search(SAFE_ID, text) is not None


def moment(text, where):
    """An ISO 8601 time as an aware datetime (a record's times are compared as times, never as strings)."""
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        raise RecordError(f"{where}: {text!r} is not an ISO 8601 time") from None
    return when if when.tzinfo else when.replace(tzinfo=timezone.utc)


def check(record, where):
    """Raise a RecordError naming the first field of `record` that breaks the schema or the clock."""
    if not isinstance(record, dict):
        raise RecordError(f"{where}: a record is a JSON object, this is a {type(record).__name__}")
    if VALIDATOR is None and not OWN_RECORDS_ONLY:
        raise RecordError(f"{where}: jsonschema is not installed, so no record can be checked; install it "
                          "(pip install -r scripts/requirements.txt, or make host)")
    error = jsonschema.exceptions.best_match(VALIDATOR.iter_errors(record)) if VALIDATOR else None
    if error is not None:
        field = "/".join(map(str, error.absolute_path)) or "(the record)"
        raise RecordError(f"{where}: {field}: {error.message[:300]}")
    started, finished = (moment(record[key], f"{where}: {key}") for key in ("started_at", "finished_at"))
    if max(started, finished) > datetime.now(timezone.utc) + CLOCK_SKEW:
        raise RecordError(f"{where}: started_at/finished_at {record['started_at']} … {record['finished_at']} lie in "
                          "the future (a wrong clock or a forged record)")
    if finished < started:
        raise RecordError(f"{where}: finished_at {record['finished_at']} is before started_at {record['started_at']}")
    return record


def read(path):
    """A record file, read and checked; RecordError (with the reason) for anything that is not a sound record."""
    path = Path(path)
    try:
        size = path.stat().st_size
    except OSError as e:
        raise RecordError(f"{path}: unreadable ({e})") from e
    if size > MAX_BYTES:
        raise RecordError(f"{path}: {size} bytes, more than any record ({MAX_BYTES}); not read")
    try:
        return check(read_record(path), str(path))
    except RecursionError:
        raise RecordError(f"{path}: nested too deeply to be a record") from None


def started(record):
    """The sort key of a record's attempts: start, then finish, as times."""
    return moment(record["started_at"], "started_at"), moment(record["finished_at"], "finished_at")


def confined(root, *parts):
    """root/parts…, refused (RecordError) unless it stays under `root` once resolved: the last line of defence
    behind the safe alphabet, for every path a record's fields name."""
    root = Path(root).resolve()
    path = root.joinpath(*parts).resolve()
    if path == root or root not in path.parents:
        raise RecordError(f"{'/'.join(map(str, parts))!r} would leave {root}")
    return path


def quarantine(run_dir, source, reason):
    """Put a copy of the file `source` under RUN/quarantine/ (named by its content's hash, so the same bad file is
    kept once) with its reason beside it; returns the copy's path. The source itself is left as it was."""
    folder = Path(run_dir) / "quarantine"
    folder.mkdir(parents=True, exist_ok=True)
    try:
        data = Path(source).read_bytes()[:MAX_BYTES]
    except OSError:
        data = b""
    name = hashlib.sha256(data).hexdigest()[:16]
    (folder / f"{name}.json.quarantined").write_bytes(data)
    (folder / f"{name}.reason.txt").write_text(f"source: {os.fspath(source)}\nreason: {reason}\n")
    return folder / f"{name}.json.quarantined"


def quarantined(run_dir):
    """[(source, reason)] of the files quarantined in `run_dir`, for the report."""
    found = []
    for note in sorted((Path(run_dir) / "quarantine").glob("*.reason.txt")):
        lines = dict(line.split(": ", 1) for line in note.read_text().splitlines() if ": " in line)
        found.append((lines.get("source", "?"), lines.get("reason", "?")))
    return found
