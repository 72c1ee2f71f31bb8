"""The checks of a submission's own files: the digests and layout, the manifest, each record's schema and status,
the runner code's commit and hash, the machine, the image hashes and copied samples. Each returns its findings, one
line each naming the file and why; verdict.findings runs them all."""

import json
import math
import re
import statistics
from collections.abc import Mapping
from dataclasses import asdict
from pathlib import Path, PurePosixPath
from typing import Any

from scripts.plan import planfile as plans
from scripts.plan.matrix import Cell
from scripts.results import records
from scripts.results.records import Record
from scripts.results.submission.code import CommitTrust, committed_code_hash
from scripts.results.submission.machine import incomplete, machine_of, statuses
from scripts.results.submission.spec import (
    DIGESTS,
    HOST_PLACEHOLDER,
    MANIFEST,
    MANIFEST_SCHEMA,
    PLAN,
    SIGNATURE,
    Records,
    SubmissionError,
    contents,
    digest,
    stated_class,
)
from scripts.results.verify import samples
from shared.params import SAMPLE_UNIT, TIME_METRIC, TRAINING_TASKS
from shared.record import RecordError


def read_manifest(folder: Path) -> tuple[dict[str, Any] | None, list[str]]:
    """(manifest, [findings]); the manifest is None where it cannot be used at all."""
    try:
        manifest = json.loads(records.read_plain(folder / MANIFEST).decode())
    except (RecordError, ValueError, RecursionError) as e:
        return None, [f"{MANIFEST}: unreadable ({str(e)[:200]}); `make submit` writes it"]
    if records.jsonschema is None:
        return None, [f"{MANIFEST}: jsonschema is not installed, so nothing can be checked (make host)"]
    errors = sorted(
        records.jsonschema.Draft202012Validator(MANIFEST_SCHEMA).iter_errors(manifest),
        key=lambda e: list(map(str, e.absolute_path)),
    )
    if errors:
        return None, [
            f"{MANIFEST}: {'/'.join(map(str, e.absolute_path)) or '(the file)'}: {e.message[:300]}" for e in errors
        ]
    found = (
        []
        if manifest["name"] == folder.name
        else [f"{MANIFEST}: name {manifest['name']!r} is not the folder's ({folder.name!r})"]
    )
    return manifest, found


def check_digests(folder: Path) -> list[str]:
    """Every file listed with its SHA-256, none missing, none added, no link."""
    try:
        lines = records.read_plain(folder / DIGESTS).decode().splitlines()  # never a link followed out of the folder
    except (RecordError, UnicodeDecodeError) as e:
        return [f"{DIGESTS}: missing or unreadable ({str(e)[:200]}): nothing shows the files are as submitted"]
    listed, found = {}, []
    for n, line in enumerate(lines, 1):
        match = re.fullmatch(r"([0-9a-f]{64})  (\S.*)", line)
        rel = match.group(2) if match else ""
        if not match or rel.startswith("/") or ".." in PurePosixPath(rel).parts or rel in (DIGESTS, SIGNATURE, "."):
            found.append(f"{DIGESTS}: line {n} is not 'SHA-256  relative path' of a file here: {line[:120]!r}")
        else:
            listed[rel] = match.group(1)
    present = set(contents(folder)) - {DIGESTS, SIGNATURE}
    for rel in sorted(present - set(listed)):
        found.append(f"{rel}: not in {DIGESTS}: added after submit")
    for rel, expected in sorted(listed.items()):
        path = folder / rel
        if rel not in present:
            found.append(f"{rel}: listed in {DIGESTS} but missing: removed after submit")
        elif path.is_symlink() or not path.is_file():
            found.append(f"{rel}: not a plain file (a link or a special file has no place in a submission)")
        elif digest(path) != expected:
            found.append(f"{rel}: edited after submit (its SHA-256 is not the one in {DIGESTS})")
    return found


def layout(folder: Path) -> list[str]:
    """Files a submission does not hold: anything but the manifest, digests, plan, cells/*.json, logs/*.log."""
    fixed = {MANIFEST, DIGESTS, PLAN, SIGNATURE}
    return [
        f"{rel}: unexpected file (a submission holds {MANIFEST}, {DIGESTS}, {PLAN}, cells/*.json, logs/*.log)"
        for rel in contents(folder)
        if rel not in fixed and not re.fullmatch(r"cells/[^/]+\.json|logs/[^/]+\.log", rel)
    ]


def check_records(folder: Path) -> tuple[Records, list[str]]:
    """({path: record} of the records that validate, [findings]): the schema, file names, the plan's run and cells."""
    found, recs, invalid = [], {}, set()
    for path in sorted((folder / "cells").glob("*.json")):
        rel = f"cells/{path.name}"
        try:
            record = records.load(path)
        except RecordError as e:
            found.append(f"{rel}: fails validation: {str(e).replace(str(path) + ': ', '', 1)}")
            invalid.add(path.stem)
            continue
        recs[rel] = record
        if path.stem != Cell(**asdict(record.cell)).id:
            found.append(f"{rel}: holds cell {Cell(**asdict(record.cell)).id}, not the one its name says")
    try:
        plan_file = plans.read(folder / PLAN)
    except plans.PlanError as e:
        return recs, found + [f"{PLAN}: {str(e).replace(str(folder / PLAN) + ': ', '', 1)}"]
    planned = {c.id for c in plan_file.cells}
    for rel, record in recs.items():
        if record.run_id != plan_file.run_id:
            found.append(f"{rel}: run id {record.run_id!r} is not the plan's {plan_file.run_id!r}")
        if Path(rel).stem not in planned:
            found.append(f"{rel}: a cell the plan does not hold")
    for cell_id in sorted(planned - {Path(rel).stem for rel in recs} - invalid):
        found.append(
            f"cells/{cell_id}.json: missing: the plan holds this cell and every cell keeps its record "
            "(failed, skipped and timed-out ones too)"
        )
    return recs, found


def short_training(record: Record | Mapping[str, Any]) -> bool:
    """A demo or tiny training cell too short to fill one timing window (a demo DenseNet's two steps): its record
    says it kept none (timing.repeats 0) and it is timed by its epoch, one value, as verify takes it. At full scale
    every training cell fills windows, so there a cell without samples is rejected."""
    record = Record.of(record)
    return (
        record.cell.scale != "full"
        and record.cell.task in TRAINING_TASKS
        and record.timing.repeats == 0
        and bool(record.metrics.get("epoch_seconds"))
    )


def check_status(rel: str, record: Record | Mapping[str, Any]) -> list[str]:
    """An honest status: ok only with its time metric, samples, a system and no failure reason; else a reason."""
    record = Record.of(record)
    status, found, reason = record.status, [], record.reason or ""
    if status != "ok":
        if not reason.strip():
            found.append(f"{rel}: status {status} without a reason (a {status} cell says why)")
        return found
    task = record.cell.task
    if reason.strip():
        found.append(f"{rel}: status ok but it gives a failure reason ({reason[:80]!r})")
    value = record.metrics.get(TIME_METRIC[task])
    if not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        found.append(f"{rel}: status ok without its time metric metrics.{TIME_METRIC[task]}")
    if not stated_class(record):
        found.append(
            f"{rel}: status ok without a system description (the runner writes one with every result; "
            "a record the host wrote is failed, timeout or skipped)"
        )
    values = samples(record)
    if not values and short_training(record):
        pass
    elif not values:
        found.append(
            f"{rel}: status ok without samples (timing.values and timing.unit): a time is a set of post-warm-up samples"
        )
    # a sample of 0 s or less, NaN or infinity: refused with the record (records.contradictions); the median and every
    # other published figure: check_consistency
    return found + lacking(rel, record)


# What an ok record holds for its figures to be checked: every check of a published figure runs on its inputs, so an
# input left out would turn the check off (a ResNet-50 figure without `images`, a steady state without its epochs).
# The runners write all of it (shared/timing.py, shared/calibration.py, shared/sysinfo.py).
NEEDED_METRICS = {"resnet50": ("images", "seconds_per_1000_images")}
TRAINING_METRICS = ("train_samples", "epoch_seconds", "train_seconds", "steady_state_seconds")


RATE_METRICS = ("model_flops_per_sample", "achieved_flops")


def lacking(rel: str, record: Record | Mapping[str, Any]) -> list[str]:
    """What an ok record lacks of the inputs its published figures are checked from, one finding each."""
    record = Record.of(record)
    task, device = record.cell.task, record.cell.device
    metrics, system = record.metrics, record.system
    found = [
        f"{rel}: metrics.{key} is missing (the figures it publishes are checked from it)"
        for key in (*NEEDED_METRICS.get(task, TRAINING_METRICS), *RATE_METRICS)
        if metrics.get(key) is None
    ]
    unit = record.timing.unit
    if samples(record) and unit != SAMPLE_UNIT[task]:
        found.append(f"{rel}: timing.unit {unit!r} is not the {task} task's {SAMPLE_UNIT[task]!r}")
    needed = {
        "system.params_hash": record.params_hash,
        "git_commit": record.git_commit,
        "system.calibration.gemm_fp32_flops": record.facts("calibration").get("gemm_fp32_flops"),
    }
    if device == "gpu":
        needed.update(
            {"system.gpu_sm_counts": system.get("gpu_sm_counts"), "system.gpu_facts": system.get("gpu_facts")}
        )
    found += [
        f"{rel}: {key} is missing (what the record is checked against: the task's parameters, the commit, the "
        "hardware's own rate and ceiling)"
        for key, value in needed.items()
        if value in (None, [], {})
    ]
    return found


def check_code(
    manifest: dict[str, Any], recs: Records, repo: Path | str | None, ancestor_of: str, trust: CommitTrust
) -> list[str]:
    """The commit exists here (`trust`, code.commit_trust's answer for it: not UNKNOWN) and is on `ancestor_of` (not
    OFF_HISTORY), the code hash is runners/ + shared/ at it, every record ran at it."""
    commit = manifest["git_commit"]
    if trust is CommitTrust.UNKNOWN:
        return [
            f"{MANIFEST}: git_commit {commit} is not a commit of this repository (a fork's or a rewritten "
            "commit; a shallow clone may lack it: git fetch --unshallow)"
        ]
    found = []
    if trust is CommitTrust.OFF_HISTORY:
        found.append(f"{MANIFEST}: git_commit {commit[:12]} is not on {ancestor_of}")
    try:
        expected = committed_code_hash(commit, repo)
    except SubmissionError as e:
        return found + [f"{MANIFEST}: {e}"]
    if manifest["code_hash"] != expected:
        found.append(
            f"{MANIFEST}: code_hash {manifest['code_hash']} is not the hash of runners/ and shared/ at "
            f"commit {commit[:12]} ({expected})"
        )
    for rel, record in recs.items():
        ran = record.git_commit
        if ran is not None and not commit.startswith(ran):
            found.append(f"{rel}: ran at commit {ran}, not the submission's {commit[:12]}")
    return found


def check_machine(manifest: dict[str, Any], recs: Records) -> list[str]:
    """The machine description is complete and is the one the records give; the cell counts are the records'."""
    derived, disagreements = machine_of(recs)
    claimed = manifest["machine"]
    found = [f"cells/: the records describe more than one machine: {d}" for d in disagreements]
    cpu_classes = sorted({c for c in derived["machine_classes"] if c.startswith("cpu:")})
    if len(cpu_classes) > 1:  # a submission is one machine: its CPU cells share the cores they could use
        found.append(f"cells/: the CPU records describe more than one machine class: {', '.join(cpu_classes)}")
    found += [
        f"{MANIFEST}: {field} is missing (the machine description must be complete)"
        for field in incomplete(claimed, recs)
    ]
    found += [
        f"{MANIFEST}: machine.{key} is {claimed.get(key)!r}, the records say {derived.get(key)!r}"
        for key in sorted(set(derived) | set(claimed))
        if claimed.get(key) != derived.get(key)
    ]
    if manifest["hosts_removed"]:
        found += [
            f"{rel}: system.host names a host in a submission without host names"
            for rel, r in recs.items()
            if r.host not in (None, HOST_PLACEHOLDER)
        ]
    if manifest["cells"] != statuses(recs):
        found.append(f"{MANIFEST}: cells {manifest['cells']} are not the records' {statuses(recs)}")
    return found


def check_image_hashes(manifest: dict[str, Any], recs: Records) -> list[str]:
    """A record that ran in an image names the image's code hash: it must be the submission's."""
    return [
        f"{rel}: ran in an image of code hash {r.system['code_hash']}, not the submission's {manifest['code_hash']}"
        for rel, r in recs.items()
        if r.system.get("code_hash") not in (None, manifest["code_hash"])
    ]


# Two cells' samples are one run's when, sorted and divided by their median, they agree within this (relative): a copy
# scaled by any factor (× (1 + 1e-9), ×2) keeps that shape, while honest samples of two cells never share it.
REPLAY_TOLERANCE = 1e-6


def shape(values: list[float]) -> tuple[float, ...]:
    """Samples sorted and divided by their median: the same for every copy of them scaled by one factor."""
    ordered = sorted(values)
    middle = statistics.median(ordered)
    return tuple(v / middle for v in ordered)


def same_shape(a: tuple[float, ...], b: tuple[float, ...]) -> bool:
    """Whether two shapes (of as many samples) are one within REPLAY_TOLERANCE, sample by sample."""
    return len(a) == len(b) and all(
        abs(x - y) <= REPLAY_TOLERANCE * max(abs(x), abs(y)) for x, y in zip(a, b, strict=True)
    )


def replayed_samples(record: Record) -> tuple[float, ...] | None:
    """The shape of an ok record's samples (at least two, all finite and positive), else None: nothing to compare."""
    values = samples(record) if record.status == "ok" else []
    if len(values) < 2 or not all(isinstance(v, (int, float)) and math.isfinite(v) and v > 0 for v in values):
        return None
    return shape(values)


def check_copies(recs: Records) -> list[str]:
    """No two ok records share their samples up to one common factor: a cell turned ok with another cell's numbers,
    to the last digit or scaled."""
    seen: list[tuple[tuple[float, ...], str]] = []
    found = []
    for rel, record in sorted(recs.items()):
        mine = replayed_samples(record)
        if mine is None:
            continue
        other = next((where for theirs, where in seen if same_shape(mine, theirs)), None)
        if other is not None:
            found.append(
                f"{rel}: its samples are those of {other} times one factor (sorted, divided by their median, within "
                f"{REPLAY_TOLERANCE:g}): copied numbers"
            )
        seen.append((mine, rel))
    return found
