"""Check this install against reference records shipped in the repo (results/reference/NAME/cells/*.json).

    python -m scripts.verify                                   # run the demo profile, compare with the CPU reference
    python -m scripts.verify --run results/demo-… --reference results/reference/nvidia-h200

Per cell: the reference's time and quality metric, this machine's, their ratio and a verdict; then one line that says
what to do. A cell is off when it is slower than the reference beyond the time tolerance (shared machines are noisy:
compare ratios, not seconds), when its accuracy or AUC differs from the reference's by more than the margin (faster
but wrong is a broken install, not a fast one), when it failed or timed out, when it was planned but wrote no record,
when its record has no time, or when it was skipped where the reference ran. Cells of the reference that this run's plan does not contain, and
cells of the run that the reference lacks, are counted in the verdict but judge nothing. Exit code 0 when every
compared cell is as expected, 1 when any is off or nothing could be compared, 2 when the comparison cannot start.
"""
import argparse
import sys
from collections import Counter
from pathlib import Path

from tabulate import tabulate

from scripts import report, run
from scripts.matrix import ROOT
from scripts.plan import planned_ids
from scripts import records
from shared.record import RecordError

REFERENCES = ROOT / "results" / "reference"
DEFAULT_REFERENCE = REFERENCES / "cpu-2core"
TIME_TOLERANCE = 1.5   # measured / reference time above this is "slower", below its inverse "faster"
QUALITY_MARGIN = 0.05  # accuracy or AUC may differ from the reference's by this much


class VerifyError(Exception):
    """Nothing to compare with (no reference, no run); the message says what to pass instead."""


def records_by_id(folder):
    try:
        return {p.stem: records.read(p) for p in sorted(Path(folder).glob("cells/*.json"))}
    except RecordError as e:
        raise VerifyError(str(e)) from e


def planned(folder):
    """The cell ids the run meant to run (its plan.json), or None without a plan (a merged or hand-made folder):
    then every reference cell is expected."""
    return planned_ids(folder)


def time_of(record):
    task, metrics = record["cell"]["task"], record["metrics"]
    value = metrics.get(report.TIME_METRIC[task])
    if value is None and task == "densenet121" and metrics.get("train_seconds") is not None:
        value = metrics["train_seconds"] / 60
    return value


def first_line(text, width=70):
    return (str(text or "").strip().splitlines() or [""])[0][:width]


def judge_status(expected, measured):
    """(outcome, words) where one of the two cells did not run ok, else None: then the metrics decide."""
    if measured is None:
        return "missing", "missing: the run wrote no record of this planned cell"
    status, why = measured["status"], first_line(measured["reason"])
    if status in ("failed", "timeout"):
        return "failed", f"{status}: {why}"
    if expected is None:
        return "no reference", f"no reference ({status})"
    if expected["status"] != "ok":
        return ("ok", "skipped as in the reference") if status == "skipped" else \
            ("no reference", f"not compared: the reference cell is {expected['status']}")
    if status == "skipped":
        return "unexpected skip", f"skipped, the reference ran it: {why}"
    return None


def judge(expected, measured, tolerance, margin):
    """(outcomes, verdict words, (expected time, measured time, ratio, expected quality, measured quality)) of one
    cell; the outcomes are the tags the one-line verdict counts."""
    e_time = time_of(expected) if expected and expected["status"] == "ok" else None
    m_time = time_of(measured) if measured and measured["status"] == "ok" else None
    by_status = judge_status(expected, measured)
    if by_status:
        return [by_status[0]], by_status[1], (e_time, m_time, None, None, None)
    task = expected["cell"]["task"]
    ratio = m_time / e_time if m_time is not None and e_time else None
    found = []  # (outcome, words)
    if m_time is None:
        found.append(("no time", f"no {report.TIME_METRIC[task]} in the record"))
    elif ratio is not None and ratio > tolerance:
        found.append(("slower", f"slower (×{ratio:.2f})"))
    elif ratio is not None and ratio < 1 / tolerance:
        found.append(("faster", f"faster (×{ratio:.2f})"))
    quality = report.QUALITY_METRIC.get(task)
    e_q, m_q = (expected["metrics"].get(quality), measured["metrics"].get(quality)) if quality else (None, None)
    if e_q is not None and (m_q is None or abs(m_q - e_q) > margin):
        found.append(("quality", f"{quality} {'missing' if m_q is None else f'{m_q:.3f}'}, expected {e_q:.3f}"))
    return [o for o, _ in found] or ["ok"], "; ".join(w for _, w in found) or "ok", (e_time, m_time, ratio, e_q, m_q)


def compare(reference, measured, plan, tolerance=TIME_TOLERANCE, margin=QUALITY_MARGIN):
    """Judge every cell the run planned (or, without a plan, every reference cell) and every cell the run has.
    Returns (table rows, Counter of outcomes, number of reference cells outside the plan)."""
    expected_ids = [i for i in reference if plan is None or i in plan]
    ids = expected_ids + sorted(set(measured) - set(expected_ids))
    rows, counts = [], Counter()
    for cell_id in ids:
        expected, got = reference.get(cell_id), measured.get(cell_id)
        outcomes, words, (e_time, m_time, ratio, e_q, m_q) = judge(expected, got, tolerance, margin)
        counts.update(outcomes)
        counts["compared"] += "no reference" not in outcomes
        metric = report.TIME_METRIC[(expected or got)["cell"]["task"]]
        rows.append([cell_id, metric, e_time, m_time, ratio, e_q, m_q, words])
    return rows, counts, len(reference) - len(expected_ids)


def plural(n, word):
    return f"{n} {word}{'' if n == 1 else 's'}"


def one_line(counts, outside, tolerance, margin):
    """The verdict a person can act on: what is off and how much, or that all is as expected; then what was not
    compared and why."""
    n = counts["compared"]
    notes = []
    if counts["faster"]:
        notes.append(f"{counts['faster']} faster than the reference beyond ×{tolerance:g} (a faster machine?)")
    if counts["no reference"]:
        notes.append(f"{plural(counts['no reference'], 'cell')} not compared (no reference record)")
    if outside:
        notes.append(f"{plural(outside, 'reference cell')} not in this run's plan")
    if n == 0:
        return ("FAIL: nothing compared — this run and the reference share no cell; pass the reference of this "
                "profile and machine with --reference" + "".join(f"; {x}" for x in notes))
    problems = []
    if counts["failed"]:
        problems.append(f"{counts['failed']} of {plural(n, 'cell')} failed or timed out (see each log under logs/)")
    if counts["missing"]:
        problems.append(f"{counts['missing']} missing (no record)")
    if counts["unexpected skip"]:
        problems.append(f"{counts['unexpected skip']} skipped where the reference ran")
    if counts["no time"]:
        problems.append(f"{counts['no time']} ok but without a time (a runner that broke the record contract)")
    if counts["slower"]:
        problems.append(f"{counts['slower']} of {plural(n, 'cell')} slower than the reference beyond ×{tolerance:g}")
    if counts["quality"]:
        problems.append(f"{counts['quality']} of {plural(n, 'cell')} with accuracy/AUC off the reference by more "
                        f"than ±{margin:g}")
    elif problems:
        problems.append("accuracy/AUC as expected")
    if problems:
        return "FAIL: " + "; ".join(problems + notes)
    return (f"OK: {plural(n, 'cell')} as expected — time within ×{tolerance:g} of the reference, accuracy/AUC within "
            f"±{margin:g} of it" + "".join(f"; {x}" for x in notes))


def latest_run(profile):
    runs = run.runs_of(run.RESULTS, profile)
    if not runs:
        raise VerifyError(f"no run of profile {profile!r} under {run.RESULTS} to compare")
    return runs[-1]


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m scripts.verify", description=__doc__.split("\n")[0])
    ap.add_argument("--reference", type=Path, default=DEFAULT_REFERENCE, help="a reference run folder")
    ap.add_argument("--run", type=Path, help="compare this run folder instead of running the profile")
    ap.add_argument("--profile", default="demo", help="the profile to run when no --run is given")
    ap.add_argument("--time-tolerance", type=float, default=TIME_TOLERANCE, metavar="RATIO",
                    help=f"measured/reference time above this is slower (default {TIME_TOLERANCE})")
    ap.add_argument("--quality-margin", type=float, default=QUALITY_MARGIN, metavar="DELTA",
                    help=f"largest accepted accuracy/AUC difference (default {QUALITY_MARGIN})")
    args = ap.parse_args(argv)
    if args.time_tolerance <= 1 or args.quality_margin < 0:
        ap.error("--time-tolerance must be above 1 and --quality-margin 0 or more")
    try:
        reference = records_by_id(args.reference)
        if not reference:
            available = ", ".join(p.name for p in REFERENCES.iterdir()) if REFERENCES.exists() else "none"
            raise VerifyError(f"no reference records under {args.reference}/cells; available: {available}")
        if args.run is None:
            if run.main(["--profile", args.profile]) == 2:
                return 2  # the run could not start; it said why
            args.run = latest_run(args.profile)
        if not (args.run / "cells").is_dir():
            raise VerifyError(f"{args.run} is not a run folder (no cells/); pass one of results/PROFILE-DATE-TIME")
        measured = records_by_id(args.run)
    except VerifyError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    rows, counts, outside = compare(reference, measured, planned(args.run), args.time_tolerance,
                                    args.quality_margin)
    print(f"reference {args.reference} vs {args.run}")
    print(tabulate(rows, headers=["cell", "metric", "expected", "measured", "ratio", "quality expected",
                                  "quality measured", "verdict"], floatfmt=".3g", missingval="—"))
    verdict = one_line(counts, outside, args.time_tolerance, args.quality_margin)
    print(verdict)
    return 0 if verdict.startswith("OK") else 1


if __name__ == "__main__":
    sys.exit(main())
