"""Merge records written on many hosts into one run folder, then write its report.

    python -m scripts.results.merge results/full-20261203-0900 artifacts/   # every record under artifacts/, e.g. from
                                                                    # GitHub Actions artifacts or a Slurm array

Idempotent: a record already in the run (the same JSON) is left alone, so merging the same sources twice changes
nothing. A cell's records are its attempts: the latest is the cell's record in cells/ID.json, the earlier ones are kept
under attempts/ID/ and the report lists them (a retry supersedes the failed attempt, visibly). Latest by the attempt
number the host side gave it, never by what the record says: the folder a scheduler put it in (`record-ID-N`, GitHub's
artifact of run attempt N; Slurm's `JOB_TASK`, by job id; `attempt-N`), kept in RUN/attempts.json; only records that no
folder numbers are ordered by their start times (compared as times, a host's clock being all there is). Records are
copied whole, never edited (docs/design.md, "Result record"): each still says which host and GPUs ran it. The run's
plan.json (--plan, else the run folder's own, else the one its sources hold; read as a plain file: pick_plan) lets the
report name the cells that have no record at all.

Every source is untrusted (scripts/results/records.py): a record that breaks the schema, whose run id is not the plan's
or whose cell the plan does not hold, is copied to RUN/quarantine/ with its reason and the merge goes on; the report
lists it. Every path the merge writes is built from checked ids and confined to the run folder.
"""

import argparse
import hashlib
import json
import os
import re
import sys
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from scripts.paths import safe_id
from scripts.plan import planfile as plans
from scripts.plan.matrix import Cell
from scripts.plan.planfile import PlannedCell
from scripts.results import records, report
from scripts.results.records import Record
from shared.record import RecordError, write_atomic, write_record

SKIP = {"plan.json", "attempts.json"}
LOG_BYTES = 64 * 2**20  # a cell's log is copied only as a plain file of at most this size
# A folder that numbers the attempt inside it: GitHub's artifact record-ID-RUN_ATTEMPT, Slurm's RUN/slurm/JOB_TASK
# (array job ids only grow on a cluster: a resubmission is a later attempt), or attempt-N.
ATTEMPT = re.compile(r"(?:record-.+|attempt)-(\d{1,6})|(\d{1,12})_\d{1,7}")


class MergeError(Exception):
    """A source that cannot be merged; the message names the file."""


def cell_id(record: Record) -> str:
    return Cell(**record.data["cell"]).id


def sources(paths: Iterable[str | Path]) -> Iterator[tuple[Path, Path | None, int | None, tuple[str, ...]]]:
    """Every record file under `paths` (files or folders, searched recursively) as (file, log, attempt, folders):
    its log if one sits beside it (SOURCE/…/cells/ID.json → SOURCE/…/logs/ID.log), the attempt number of the
    innermost folder below the source that gives one (attempt_of), the folders between the source and the file (its
    slot: slot_cells). Report outputs and plans are not records."""
    for path in map(Path, paths):
        if not path.exists():
            raise MergeError(f"{path}: no such file or folder")
        for file in sorted([path] if path.is_file() else path.rglob("*.json")):
            inside = file.parts[len(path.parts) : -1]
            if file.name in SKIP or {"attempts", "quarantine"} & set(inside):
                continue
            log = file.parent.parent / "logs" / f"{file.stem}.log"
            # (a log that is a link, a FIFO or too big is refused where it is read: merge_one, records.read_plain)
            yield file, log if os.path.lexists(log) else None, attempt_of(inside), inside


def slot_cells(
    file: Path, folders: Sequence[str], planned: Sequence[PlannedCell] | None = None
) -> list[tuple[str | None, str]]:
    """[(cell id, what gave it)]: the cells the record at `file` may be of, by its slot. Its file name (ID.json) always;
    the innermost folder that a scheduler made for one cell: GitHub's artifact record-ID-N, Slurm's JOB_TASK
    (task = the cell's index in the plan), a Kubernetes slot k8s-GROUP-INDEX (scripts/plan/planfile.py: slot_map)
    — the last two through `planned`, the plan's cells in order (None: no plan, not checked)."""
    slots: list[tuple[str | None, str]] = [(file.stem, f"its file name {file.name}")]
    for name in reversed(folders):
        artifact = re.fullmatch(r"record-(.+)-\d{1,6}", name)
        task = re.fullmatch(r"\d{1,12}_(\d{1,7})", name)
        pod = re.fullmatch(plans.SLOT_PATTERN, name)
        if artifact:
            slots.append((artifact.group(1), f"the artifact {name}"))
        elif task and planned is not None:
            index = int(task.group(1))
            slots.append((planned[index].id if index < len(planned) else None, f"Slurm task {name}"))
        elif pod and planned is not None:
            slots.append((plans.slot_map(planned).get(name), f"the Kubernetes slot {name}"))
        else:
            continue
        break
    return slots


def check_slot(
    record: Record, file: Path, folders: Sequence[str], planned: Sequence[PlannedCell] | None = None
) -> Record:
    """RecordError unless `record` is of the cell its slot was planned for (one cell per slot: a record claiming
    another cell's identity would replace that cell and leave its own missing)."""
    cid = cell_id(record)
    for wanted, what in slot_cells(file, folders, planned):
        if wanted != cid:
            raise RecordError(
                f"{file}: holds cell {cid}, but {what} is the slot of {wanted or 'no planned cell'}: one cell per slot"
            )
    return record


def attempt_of(folders: Sequence[str]) -> int | None:
    """The attempt number a scheduler gave the record by the folder it put it in (ATTEMPT), or None."""
    for name in reversed(folders):
        match = ATTEMPT.fullmatch(name)
        if match:
            return int(match.group(1) or match.group(2))
    return None


def order(record: Record, attempt: int | None) -> tuple[Any, ...]:
    """The sort key of a cell's attempts: the host-given number first (an unnumbered record counts as 0), then the
    record's own start and finish times, which decide only among records no folder numbers; between records equal in
    all of these, the SHA-256 of their canonical JSON, so the same record wins in whichever order the sources come."""
    canonical = json.dumps(record.data, sort_keys=True, separators=(",", ":"), default=str).encode()
    return (attempt or 0, *records.started(record.data), hashlib.sha256(canonical).hexdigest())


def attempt_name(record: Record, attempt: int | None = None) -> str:
    host = record.host or "unknown-host"
    number = f"attempt{attempt:03d}-" if attempt else ""
    return f"{number}{record.started_at}-{record.status}-{host}.json".replace(":", "").replace("+", "")


def keep_attempt(run_dir: Path, record: Record, attempt: int | None) -> None:
    """Store a superseded record under attempts/ID/ unless that very record is already there."""
    path = records.confined(run_dir, "attempts", cell_id(record), attempt_name(record, attempt))
    if not path.exists():
        write_record(path, record.data)


def numbers(run_dir: Path) -> dict[str, int]:
    """{cell id: attempt number} of the records in cells/ (RUN/attempts.json; what the merge wrote, or empty). Read as a
    plain file (records.read_plain): a link or a FIFO planted there counts as no index."""
    try:
        index = json.loads(records.read_plain(run_dir / "attempts.json").decode())
        return {k: v for k, v in index.items() if isinstance(k, str) and isinstance(v, int)}
    except (RecordError, ValueError, AttributeError, RecursionError):
        return {}


def merge_one(
    run_dir: Path,
    record: Record,
    log: Path | None,
    attempt: int | None = None,
    index: dict[str, int] | None = None,
) -> str:
    """Place one (checked) record, `attempt` being the number its folder gave it; `index` is the run's {cell id:
    attempt number} (numbers()), updated here, which the caller writes back. Returns what happened: 'new', 'same',
    'superseded' (it replaced an earlier attempt) or 'older' (an earlier attempt of a cell that has a later one)."""
    index = {} if index is None else index
    cid = cell_id(record)
    target = records.confined(run_dir, "cells", f"{cid}.json")
    try:
        current = records.load(target) if target.exists() else None
    except RecordError as e:  # what a bad earlier merge or a hand edit left: aside, and this record takes its place
        records.quarantine(run_dir, target, str(e))
        current = None
    if current == record:
        return "same"
    if current is not None and order(current, index.get(cid)) > order(record, attempt):
        keep_attempt(run_dir, record, attempt)
        return "older"
    if current is not None:
        keep_attempt(run_dir, current, index.get(cid))
    write_record(target, record.data)
    if attempt or cid in index:
        index[cid] = attempt or 0
    if log is not None:
        copy = records.confined(run_dir, "logs", f"{cell_id(record)}.log")
        copy.parent.mkdir(parents=True, exist_ok=True)
        try:
            records.write_replacing(copy, "", binary=records.read_plain(log, LOG_BYTES))
        except RecordError:
            pass  # swapped for a link or a FIFO since sources() looked: the record goes in without its log
    return "superseded" if current is not None else "new"


def read_plan(path: Path) -> tuple[bytes, dict[str, Any]]:
    """(the bytes, the JSON object) of a plan file, read as untrusted input (records.read_plain: a plain file of at
    most 8 MiB, never a link, FIFO or device, so nothing here waits on a writer); RecordError naming why not."""
    data = records.read_plain(path)
    try:
        doc = json.loads(data.decode())
    except (ValueError, RecursionError) as e:
        raise RecordError(f"{path}: not JSON ({str(e)[:200]})") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("cells"), list):
        raise RecordError(f"{path}: not a plan (an object with a list of cells)")
    return data, doc


def run_of(run_dir: Path) -> tuple[str | None, str]:
    """(the run id `run_dir` already holds, what says so): its plan.json's, else its records' (cells/*.json) where
    they agree on one; (None, "") for a new folder. A MergeError where the folder's own plan cannot be read."""
    if os.path.lexists(run_dir / "plan.json"):
        try:
            return read_plan(run_dir / "plan.json")[1].get("run_id"), f"{run_dir}/plan.json"
        except RecordError as e:
            raise MergeError(f"the run's own plan is not usable ({e}); remove it and merge with --plan") from e
    ids = set()
    for path in sorted((run_dir / "cells").glob("*.json")):
        try:
            ids.add(records.load(path).run_id)
        except RecordError:
            continue  # merge_one quarantines it when its cell comes
    return (ids.pop(), f"the records in {run_dir}/cells") if len(ids) == 1 else (None, "")


def pick_plan(run_dir: Path, paths: Sequence[Path], plan: Path | None) -> tuple[bytes, dict[str, Any]] | None:
    """The plan the records are checked against, as (bytes, JSON): --plan, else the run's own plan.json, else the one
    plan.json its sources hold. Any of them that is not a plain JSON file is refused (MergeError), and so is one of
    another run than the folder's (run_of: its plan, its records) or the sources' plans naming several runs: a plan
    of run B beside B's records would otherwise let them into run A."""
    found = sorted({p for path in paths if path.is_dir() for p in path.rglob("plan.json")})
    chosen = plan or (run_dir / "plan.json" if os.path.lexists(run_dir / "plan.json") else None)
    candidates = [chosen] if chosen else found
    if not candidates:
        return None
    read = []
    for path in candidates:
        try:
            read.append(read_plan(Path(path)))
        except RecordError as e:
            raise MergeError(f"{e}; pass the run's plan.json with --plan") from e
    run_id, where = run_of(run_dir)
    named = {doc.get("run_id") for _, doc in read}
    if len(named) > 1:
        raise MergeError(
            f"the sources' plans name several runs ({', '.join(sorted(map(str, named)))}): merge each run into its "
            "own folder, or name the run's plan with --plan"
        )
    if run_id is not None and named != {run_id}:
        raise MergeError(
            f"{candidates[0]}: a plan of run {next(iter(named))!r}, but {where} say run {run_id!r}: merge "
            "another run's records into its own folder"
        )
    return read[0]


def expected(
    run_dir: Path, plan: tuple[bytes, dict[str, Any]] | None
) -> tuple[str | None, set[str] | None, tuple[PlannedCell, ...] | None]:
    """(run id, {cell id}, the planned cells in order) the records must belong to, from the run's plan (pick_plan);
    None for what the plan does not say (no plan, or a bare list of ids from an earlier version: then only the
    cells are checked)."""
    if plan is None:
        return None, None, None
    doc = plan[1]
    try:
        ids = {c["id"] if isinstance(c, dict) else c for c in doc["cells"]}
    except (KeyError, TypeError) as e:
        raise MergeError(f"not a readable plan file ({e}); pass the run's plan.json with --plan") from e
    run_id = doc.get("run_id")
    if run_id is not None and not safe_id(run_id):
        raise MergeError(
            f"run id {run_id!r} of the plan is not of the safe alphabet; this plan was not written by "
            "`python -m scripts.plan`"
        )
    try:
        planned = plans.parse(doc, "the run's plan").cells
    except plans.PlanError:
        planned = None  # a bare list of ids: the file name and the artifact still name each slot
    return run_id, ids, planned


def admit(record: Record, run_id: str | None, cell_ids: set | None, where: Path) -> Record:
    """RecordError unless `record` belongs to the run: its run id and its cell are the plan's. (Its cell block is
    there and names a cell: the schema requires it of every record records.load reads.)"""
    if run_id is not None and record.run_id != run_id:
        raise RecordError(f"{where}: run id {record.run_id!r} is not this run's ({run_id!r})")
    if cell_ids is not None and cell_id(record) not in cell_ids:
        raise RecordError(f"{where}: cell {cell_id(record)} is not in the run's plan")
    return record


def merge(run_dir: str | Path, paths: Sequence[str | Path], plan: str | Path | None = None) -> dict[str, int]:
    """Merge every record under `paths` into `run_dir`; {outcome: count}. A source that is not a sound record of
    this run is quarantined (counted as such), never fatal."""
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    chosen = pick_plan(run_dir, [Path(p) for p in paths], Path(plan) if plan else None)
    run_id, cell_ids, planned = expected(run_dir, chosen)
    counts = {"new": 0, "same": 0, "superseded": 0, "older": 0, "quarantined": 0}
    index = numbers(run_dir)
    before = dict(index)
    for file, log, attempt, folders in sources(paths):
        try:
            record = admit(records.load(file), run_id, cell_ids, file)
            check_slot(record, file, folders, planned)
            counts[merge_one(run_dir, record, log, attempt, index)] += 1
        except RecordError as e:
            records.quarantine(run_dir, file, str(e))
            counts["quarantined"] += 1
    if index != before:  # once per merge, not once per record: a GitHub run numbers every record
        write_atomic(run_dir / "attempts.json", json.dumps(index, indent=1, sort_keys=True) + "\n")
    if chosen is not None and not os.path.lexists(run_dir / "plan.json"):
        records.write_replacing(run_dir / "plan.json", "", binary=chosen[0])  # the bytes checked, not the path again
    return counts


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m scripts.results.merge", description=__doc__.split("\n")[0])
    ap.add_argument("run_dir", type=Path, help="the run folder to merge into (created if new)")
    ap.add_argument("sources", nargs="+", type=Path, help="record files or folders holding them")
    ap.add_argument("--plan", type=Path, help="the run's plan file, to name cells without a record")
    ap.add_argument("--no-report", action="store_true", help="only merge the records")
    args = ap.parse_args(argv)
    try:
        counts = merge(args.run_dir, args.sources, args.plan)
        print(
            f"{args.run_dir}: {counts['new']} new records, {counts['superseded']} replacing an earlier attempt, "
            f"{counts['older']} earlier attempts kept aside, {counts['same']} already merged, "
            f"{counts['quarantined']} quarantined (not sound records of this run: {args.run_dir}/quarantine/)"
        )
        for _source, reason in records.quarantined(args.run_dir):
            print(f"quarantined: {reason}", file=sys.stderr)
        if not args.no_report:
            paths = report.write_report(args.run_dir)
            print(paths["markdown"].read_text())
    except (MergeError, report.ReportError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
