"""Merge records written on many hosts into one run folder, then write its report.

    python -m scripts.merge results/full-20261203-0900 artifacts/   # every record under artifacts/, e.g. from
                                                                    # GitHub Actions artifacts or a Slurm array

Idempotent: a record already in the run (the same JSON) is left alone, so merging the same sources twice changes
nothing. A cell's records are its attempts: the latest (by start time) is the cell's record in cells/ID.json, the
earlier ones are kept under attempts/ID/ and the report lists them (a retry supersedes the failed attempt, visibly).
Records are copied whole, never edited (DESIGN.md): each still says which host and GPUs ran it. The run's plan.json
(copied from the first source that has one, or --plan) lets the report name the cells that have no record at all.
"""
import argparse
import json
import shutil
import sys
from pathlib import Path

from scripts import report
from scripts.matrix import Cell
from shared.record import RecordError, read_record, write_record

SKIP = {"plan.json"}


class MergeError(Exception):
    """A source that cannot be merged; the message names the file."""


def cell_id(record):
    return Cell(**record["cell"]).id


def sources(paths):
    """Every record file under `paths` (files or folders, searched recursively), with its log if one sits beside it
    (SOURCE/…/cells/ID.json → SOURCE/…/logs/ID.log). Report outputs and plans are not records."""
    for path in map(Path, paths):
        if not path.exists():
            raise MergeError(f"{path}: no such file or folder")
        for file in sorted([path] if path.is_file() else path.rglob("*.json")):
            if file.name in SKIP or "attempts" in file.parts[len(path.parts):]:
                continue
            log = file.parent.parent / "logs" / f"{file.stem}.log"
            yield file, log if log.exists() else None


def attempt_name(record):
    host = (record.get("system") or {}).get("host") or "unknown-host"
    return f"{record['started_at']}-{record['status']}-{host}.json".replace(":", "")


def keep_attempt(run_dir, record):
    """Store a superseded record under attempts/ID/ unless that very record is already there."""
    path = run_dir / "attempts" / cell_id(record) / attempt_name(record)
    if not path.exists():
        write_record(path, record)


def merge_one(run_dir, record, log):
    """Place one record; returns what happened: 'new', 'same', 'superseded' (it replaced an earlier attempt) or
    'older' (it is an earlier attempt of a cell that has a later one)."""
    target = run_dir / "cells" / f"{cell_id(record)}.json"
    current = read_record(target) if target.exists() else None
    if current == record:
        return "same"
    if current is not None and (current["started_at"], current["finished_at"]) > (record["started_at"],
                                                                                   record["finished_at"]):
        keep_attempt(run_dir, record)
        return "older"
    if current is not None:
        keep_attempt(run_dir, current)
    write_record(target, record)
    if log is not None:
        (run_dir / "logs").mkdir(parents=True, exist_ok=True)
        shutil.copyfile(log, run_dir / "logs" / log.name)
    return "superseded" if current is not None else "new"


def merge(run_dir, paths, plan=None):
    """Merge every record under `paths` into `run_dir`; {outcome: count}."""
    run_dir = Path(run_dir)
    counts = {"new": 0, "same": 0, "superseded": 0, "older": 0}
    for file, log in sources(paths):
        try:
            record = read_record(file)
        except RecordError as e:
            raise MergeError(str(e)) from e
        if not isinstance(record.get("cell"), dict):
            raise MergeError(f"{file}: not a cell record (no `cell`); pass the folders holding cells/*.json")
        counts[merge_one(run_dir, record, log)] += 1
    plan = plan or next((p for path in map(Path, paths) if path.is_dir() for p in sorted(path.rglob("plan.json"))),
                        None)
    if plan is not None and not (run_dir / "plan.json").exists():
        shutil.copyfile(plan, run_dir / "plan.json")
    return counts


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m scripts.merge", description=__doc__.split("\n")[0])
    ap.add_argument("run_dir", type=Path, help="the run folder to merge into (created if new)")
    ap.add_argument("sources", nargs="+", type=Path, help="record files or folders holding them")
    ap.add_argument("--plan", type=Path, help="the run's plan file, to name cells without a record")
    ap.add_argument("--no-report", action="store_true", help="only merge the records")
    args = ap.parse_args(argv)
    try:
        counts = merge(args.run_dir, args.sources, args.plan)
        print(f"{args.run_dir}: {counts['new']} new records, {counts['superseded']} replacing an earlier attempt, "
              f"{counts['older']} earlier attempts kept aside, {counts['same']} already merged")
        if not args.no_report:
            paths = report.write_report(args.run_dir)
            print(paths["markdown"].read_text())
    except (MergeError, report.ReportError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
