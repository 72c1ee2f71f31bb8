"""Check this install against reference records shipped in the repo (results/reference/NAME/cells/*.json).

    python -m scripts.verify                 # run the demo profile, compare with this machine class's reference
    python -m scripts.verify --run results/demo-… --reference results/reference/nvidia-h200

A cell is compared only with the reference cell of the same id, data kind, task parameters (`system.params_hash`)
and machine class (`system.machine_class`: CPU model, instruction set and usable cores, or GPU model and count);
anything else is listed as incomparable, with why, and judges nothing.

The noise model (asv's `compare`, pyperf): the run's overall speed relative to the reference is the geometric mean of
the comparable cells' steady-state ratios. It is reported on its own line and divided out before cells are judged, so
a uniformly slower machine is "1.3× slower overall", not "21 cells slower"; on the same machine class an overall
factor beyond ×OVERALL_TOLERANCE either way is itself off (faster than the same hardware can be: check the clock).
A cell is off when its normalised ratio is beyond its time tolerance either way *and* a Mann-Whitney U test on the
two cells' samples agrees (with fewer than MIN_SAMPLES samples on a side the ratio alone decides, and the row says
so). A cell's tolerance is ×TIME_TOLERANCE, wider where the reference itself knows better: a reference made of several
honest runs (`python -m scripts.reference --add`, kept under runs/) shows how far a healthy install moves between runs
(a CNTK GRU at half speed in one run of two, cause unknown), and a cell of that machine class then gets
×(its between-run factor × BETWEEN_RUNS_MARGIN); a cell timed by one value (no samples: a demo DenseNet's two steps)
gets at least ×SINGLE_VALUE_TOLERANCE. Steady state (the median sample) and the time as waited (compile and first step included) are judged apart: the
time as waited only adds a note, since compile caches and imports move it on a healthy machine. Quality (accuracy,
AUC) beyond the margin, a failed or missing cell and a skip where the reference ran are off as before.

Exit codes: 0 every compared cell as expected, 1 something is off, 2 the comparison cannot start (no reference, no
run), 3 nothing in the run is comparable with the reference (the message names a reference that fits, or how to make
one).
"""
import argparse
import math
import statistics
import sys
from collections import Counter
from pathlib import Path

from scipy.stats import mannwhitneyu
from tabulate import tabulate

from scripts import records, report, run
from scripts.matrix import ROOT
from scripts.plan import planned_ids
from shared import sysinfo
from shared.record import RecordError
from shared.timing import MIN_SAMPLES

REFERENCES = ROOT / "results" / "reference"
TIME_TOLERANCE = 1.5     # a normalised steady-state ratio beyond this (either way) is off, if the rank test agrees
WAITED_TOLERANCE = 2.0   # the time as waited beyond this (normalised) adds a note
OVERALL_TOLERANCE = 2.0  # the whole run against a reference of the same machine class
QUALITY_MARGIN = 0.05    # accuracy or AUC may differ from the reference's by this much
ALPHA = 0.01             # the rank test's significance level (two-sided)
BETWEEN_RUNS_MARGIN = 1.25   # a cell's tolerance: at least its reference runs' own spread, times this
SINGLE_VALUE_TOLERANCE = 2.0  # a cell timed by fewer than MIN_SAMPLES samples: one value, compile noise and all
MIN_OVERALL_CELLS = 5    # fewer comparable cells estimate no overall factor: one cell's ratio would hide itself
INCOMPARABLE = 3         # exit code: nothing to compare with


class VerifyError(Exception):
    """Nothing to compare with (no reference, no run); the message says what to pass instead."""


def records_by_id(folder):
    try:
        return {p.stem: records.read(p) for p in sorted(Path(folder).glob("cells/*.json"))}
    except RecordError as e:
        raise VerifyError(str(e)) from e


def reference_runs(folder):
    """The reference's runs, each {cell id: record}: cells/ (the one verify compares samples with) first, then every
    further honest run kept under runs/RUN_ID/."""
    runs = [records_by_id(folder)]
    for extra in sorted(p for p in Path(folder).glob("runs/*") if p.is_dir()):
        try:
            runs.append({p.stem: records.read(p) for p in sorted(extra.glob("*.json"))})
        except RecordError as e:
            raise VerifyError(str(e)) from e
    return runs


def between_runs(runs):
    """{cell id: (slowest / fastest steady state) over the reference's runs}, for the cells that are ok and
    comparable with the first run's in at least two runs."""
    factors = {}
    for cell_id, first in runs[0].items():
        times = [steady(r[cell_id]) for r in runs if cell_id in r and r[cell_id]["status"] == "ok"
                 and first["status"] == "ok" and why_incomparable(first, r[cell_id]) is None]
        times = [t for t in times if t]
        if len(times) >= 2:
            factors[cell_id] = max(times) / min(times)
    return factors


def cell_tolerance(expected, measured, tolerance, between=None):
    """(the cell's tolerance, why it is wider than `tolerance` or None)."""
    wider, why = tolerance, None
    if between and between * BETWEEN_RUNS_MARGIN > wider:
        wider, why = between * BETWEEN_RUNS_MARGIN, f"the reference's runs differ by ×{between:.2f}"
    if min(len(samples(expected)), len(samples(measured))) < MIN_SAMPLES and SINGLE_VALUE_TOLERANCE > wider:
        wider, why = SINGLE_VALUE_TOLERANCE, "one value, no samples"
    return wider, why


# ---------------------------------------------------------------- what a record measured

def machine_class(record):
    """The record's machine class, or one derived from its facts for records written before the key existed."""
    system = record.get("system") or {}
    return system.get("machine_class") or sysinfo.machine_class(system, record["cell"]["device"],
                                                                record["cell"]["gpus"])


def samples(record):
    """The post-warm-up samples of an ok record (seconds per step or per pass), [] where it kept none."""
    timing = record.get("timing") or {}
    return [float(v) for v in timing.get("values") or []] if timing.get("unit") else []


def steady(record):
    """The steady-state figure the ratio is taken of: the median sample where the record has samples, else the
    task's recorded time (older records)."""
    values = samples(record)
    if values:
        return statistics.median(values)
    metrics, task = record["metrics"], record["cell"]["task"]
    value = metrics.get("steady_state_seconds") if task in report.TRAINING_TASKS else None
    return value if value is not None else metrics.get(report.TIME_METRIC[task])


def waited(record):
    """The time a user waits for the cell's timed work, compile and first step included."""
    metrics = record["metrics"]
    if record["cell"]["task"] in report.TRAINING_TASKS:
        return metrics.get("train_seconds")
    timing = record.get("timing") or {}
    passes = timing.get("values") or []
    return (timing.get("warmup") or 0) + sum(passes) if passes else metrics.get("seconds_per_1000_images")


def why_incomparable(expected, measured):
    """Why two ok records of one cell id cannot be compared, or None where they can."""
    reasons = []
    if expected["cell"]["data"] != measured["cell"]["data"]:
        reasons.append(f"data {measured['cell']['data']} vs the reference's {expected['cell']['data']}")
    e_hash, m_hash = (r.get("system", {}).get("params_hash") for r in (expected, measured))
    if expected["cell"]["scale"] != measured["cell"]["scale"]:
        reasons.append(f"scale {measured['cell']['scale']} vs the reference's {expected['cell']['scale']}")
    elif e_hash is None or e_hash != m_hash:
        reasons.append("task parameters differ" if e_hash and m_hash else
                       "task parameters not recorded (a record from before params_hash)")
    e_class, m_class = machine_class(expected), machine_class(measured)
    if e_class != m_class:
        reasons.append(f"machine {m_class} vs the reference's {e_class}")
    e_unit, m_unit = ((r.get("timing") or {}).get("unit") for r in (expected, measured))
    if e_unit != m_unit:
        reasons.append(f"timed in {m_unit or 'epochs/passes'} vs the reference's {e_unit or 'epochs/passes'}")
    return "; ".join(reasons) or None


# ---------------------------------------------------------------- judging

def judge_status(expected, measured):
    """(outcome, words) where one of the two cells did not run ok or they cannot be compared, else None."""
    if measured is None:
        return "missing", "missing: the run wrote no record of this planned cell"
    status, why = measured["status"], report.first_line(measured["reason"])[:70]
    if status in ("failed", "timeout"):
        return "failed", f"{status}: {why}"
    if expected is None:
        return "no reference", f"no reference ({status})"
    if expected["status"] != "ok":
        return ("ok", "skipped as in the reference") if status == "skipped" else \
            ("no reference", f"not compared: the reference cell is {expected['status']}")
    if status == "skipped":
        return "unexpected skip", f"skipped, the reference ran it: {why}"
    reason = why_incomparable(expected, measured)
    if reason:
        return "incomparable", f"incomparable: {reason}"
    if not positive(steady(measured)):
        return "no time", f"no {report.TIME_METRIC[measured['cell']['task']]} in the record"
    if not positive(steady(expected)):     # a ratio needs a positive, finite reference time
        return "no reference", "not compared: the reference cell has no positive, finite time"
    return None


def positive(value):
    """A time that can be divided by and taken the log of: a finite number above 0."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value > 0


def rank_test(expected, measured, overall):
    """The two-sided Mann-Whitney U p-value of the measured samples (divided by the overall factor) against the
    reference's, or None with fewer than MIN_SAMPLES samples on a side."""
    e, m = samples(expected), samples(measured)
    if len(e) < MIN_SAMPLES or len(m) < MIN_SAMPLES:
        return None
    return float(mannwhitneyu([v / overall for v in m], e, alternative="two-sided").pvalue)


def judge(expected, measured, overall, tolerance, margin, between=None):
    """(outcomes, words, row values) of one cell; `between` is the reference's between-run factor of the cell. Row
    values: reference and measured steady state, their raw ratio, the ratio after the overall factor, the cell's
    tolerance, the rank test's p, measured quality."""
    by_status = judge_status(expected, measured)
    if by_status:
        return [by_status[0]], by_status[1], (None,) * 7
    e_time, m_time = steady(expected), steady(measured)
    ratio = m_time / e_time if e_time else None
    normalised = ratio / overall if ratio else None
    p = rank_test(expected, measured, overall)
    limit, wider = cell_tolerance(expected, measured, tolerance, between)
    found, notes = [], []
    if normalised is not None and (normalised > limit or normalised < 1 / limit):
        faster = normalised < 1
        if p is not None and p >= ALPHA:
            notes.append(f"×{normalised:.2f} but within its noise (p={p:.2g})")
        else:
            test = f", p={p:.2g}" if p is not None else f", no rank test (<{MIN_SAMPLES} samples)"
            found.append(("faster", f"faster than possible? check the clock (×{normalised:.2f}{test})") if faster
                         else ("slower", f"slower (×{normalised:.2f}{test})"))
    elif normalised is not None and wider and (normalised > tolerance or normalised < 1 / tolerance):
        notes.append(f"×{normalised:.2f}, within its tolerance of ×{limit:.2f} ({wider})")
    e_wait, m_wait = waited(expected), waited(measured)
    if e_wait and m_wait:
        wait_ratio = m_wait / e_wait / overall
        if wait_ratio > WAITED_TOLERANCE or wait_ratio < 1 / WAITED_TOLERANCE:
            notes.append(f"time as waited ×{wait_ratio:.2f} (compile, caches, first step)")
            found.append(("waited", None))
    quality = report.QUALITY_METRIC.get(expected["cell"]["task"])
    e_q, m_q = (expected["metrics"].get(quality), measured["metrics"].get(quality)) if quality else (None, None)
    if e_q is not None and (m_q is None or abs(m_q - e_q) > margin):
        found.append(("quality", f"{quality} {'missing' if m_q is None else f'{m_q:.3f}'}, expected {e_q:.3f}"))
    outcomes = [o for o, _ in found if o != "waited"] or ["ok"]
    outcomes += [o for o, _ in found if o == "waited"]
    words = "; ".join([w for _, w in found if w] + notes) or "ok"
    return outcomes, words, (e_time, m_time, ratio, normalised, limit, p, m_q)


def overall_factor(reference, measured, ids):
    """The geometric mean of the steady-state ratios of the comparable ok cells and how many cells it rests on; 1.0
    with fewer than MIN_OVERALL_CELLS (a subset is then judged by its raw ratios)."""
    logs = []
    for cell_id in ids:
        expected, got = reference.get(cell_id), measured.get(cell_id)
        if judge_status(expected, got) is None:
            logs.append(math.log(steady(got) / steady(expected)))
    return (math.exp(statistics.mean(logs)) if len(logs) >= MIN_OVERALL_CELLS else 1.0), len(logs)


def compare(reference, measured, plan, tolerance=TIME_TOLERANCE, margin=QUALITY_MARGIN, between=None):
    """Judge every cell the run planned (or, without a plan, every reference cell) and every cell the run has;
    `between`: the reference's between-run factors (between_runs). Returns (table rows, Counter of outcomes, number
    of reference cells outside the plan, overall factor)."""
    between = between or {}
    wanted = None if plan is None else set(plan)
    expected_ids = [i for i in reference if wanted is None or i in wanted]
    ids = expected_ids + sorted(set(measured) - set(expected_ids))
    overall, basis = overall_factor(reference, measured, ids)
    rows, counts = [], Counter()
    for cell_id in ids:
        expected, got = reference.get(cell_id), measured.get(cell_id)
        outcomes, words, values = judge(expected, got, overall, tolerance, margin, between.get(cell_id))
        counts.update(outcomes)
        counts["compared"] += not {"no reference", "incomparable"} & set(outcomes)
        rows.append([cell_id, *values, words])
    counts["overall basis"] = basis
    return rows, counts, len(reference) - len(expected_ids), overall


def plural(n, word):
    return f"{n} {word}{'' if n == 1 else 's'}"


def overall_line(overall, basis, same_class=True):
    """The run's speed relative to the reference in words, and whether it is itself off."""
    if basis == 0:
        return "overall: nothing comparable", False
    if basis < MIN_OVERALL_CELLS:
        return (f"overall: not estimated from {plural(basis, 'cell')} (at least {MIN_OVERALL_CELLS}); cells are judged "
                "by their raw ratios"), False
    words = "as fast as" if abs(math.log(overall)) < math.log(1.05) else \
        (f"{overall:.2f}× slower than" if overall > 1 else f"{1 / overall:.2f}× faster than")
    line = f"overall: this run is {words} the reference (geometric mean over {plural(basis, 'cell')})"
    off = same_class and (overall > OVERALL_TOLERANCE or overall < 1 / OVERALL_TOLERANCE)
    if off and overall < 1:
        line += (f" — beyond ×{OVERALL_TOLERANCE:g} on the same machine class: faster than the same hardware can be; "
                 "check the clock (a missing barrier, a timer that stops early)")
    elif off:
        line += (f" — beyond ×{OVERALL_TOLERANCE:g} on the same machine class: a throttled, busy or misconfigured "
                 "machine (power profile, another load, fewer cores than it claims)")
    return line, off


def one_line(counts, outside, tolerance, margin, overall_off=False):
    """The verdict a person can act on: what is off and how much, or that all is as expected; then what was not
    compared and why."""
    n = counts["compared"]
    notes = []
    if counts["incomparable"]:
        notes.append(f"{plural(counts['incomparable'], 'cell')} incomparable (see each row)")
    if counts["no reference"]:
        notes.append(f"{plural(counts['no reference'], 'cell')} not compared (no reference record)")
    if outside:
        notes.append(f"{plural(outside, 'reference cell')} not in this run's plan")
    if counts["waited"]:
        notes.append(f"{plural(counts['waited'], 'cell')} with a time as waited beyond ×{WAITED_TOLERANCE:g} "
                     "(compile, caches: a note, not a failure)")
    if n == 0:
        return "INCOMPARABLE: nothing compared" + "".join(f"; {x}" for x in notes)
    problems = []
    if overall_off:
        problems.append("the whole run is off the reference (see the overall line)")
    if counts["failed"]:
        problems.append(f"{counts['failed']} of {plural(n, 'cell')} failed or timed out (see each log under logs/)")
    if counts["missing"]:
        problems.append(f"{counts['missing']} missing (no record)")
    if counts["unexpected skip"]:
        problems.append(f"{counts['unexpected skip']} skipped where the reference ran")
    if counts["no time"]:
        problems.append(f"{counts['no time']} ok but without a time (a runner that broke the record contract)")
    if counts["slower"]:
        problems.append(f"{counts['slower']} of {plural(n, 'cell')} slower than the reference beyond their "
                        f"tolerance (×{tolerance:g} or wider, see each row; the run's overall factor divided out)")
    if counts["faster"]:
        problems.append(f"{counts['faster']} of {plural(n, 'cell')} faster than the reference beyond their "
                        f"tolerance (×{tolerance:g} or wider, see each row; the run's overall factor divided out: "
                        "faster than possible? check the clock)")
    if counts["quality"]:
        problems.append(f"{counts['quality']} of {plural(n, 'cell')} with accuracy/AUC off the reference by more "
                        f"than ±{margin:g}")
    if problems:
        return "FAIL: " + "; ".join(problems + notes)
    if counts["overall basis"] == 0 and counts["incomparable"]:   # only skips agreed: no time was compared
        return "INCOMPARABLE: nothing compared" + "".join(f"; {x}" for x in notes)
    return (f"OK: {plural(n, 'cell')} as expected — steady state within ×{tolerance:g} of the reference (wider where "
            f"the reference's own runs differ more, or a cell has one value) once the overall factor is divided out "
            f"(or within its noise), accuracy/AUC within ±{margin:g}"
            + "".join(f"; {x}" for x in notes))


# ---------------------------------------------------------------- which reference

def classes_of(folder):
    """The machine classes of a reference's ok records."""
    found = Counter()
    for path in sorted(Path(folder).glob("cells/*.json")):
        try:
            record = records.read(path)
        except RecordError:
            continue
        if record["status"] == "ok":
            found[machine_class(record)] += 1
    return found


def fitting_references(wanted_classes, exclude=None):
    """The reference folders holding records of any of `wanted_classes`, best first."""
    scored = []
    for folder in sorted(REFERENCES.iterdir()) if REFERENCES.is_dir() else []:
        if folder.is_dir() and folder != exclude:
            hits = sum(n for c, n in classes_of(folder).items() if c in wanted_classes)
            if hits:
                scored.append((hits, folder))
    return [folder for _, folder in sorted(scored, key=lambda x: -x[0])]


def this_machine():
    """This machine's class for a CPU cell (what the demo profile runs)."""
    facts = sysinfo.cpu_facts()
    return sysinfo.machine_class(facts, "cpu")


def how_to_make_one(machine):
    return (f"make one on this machine with `make reference` (the `reference` profile; it writes "
            f"results/reference/{sysinfo.slug(machine)}), or pass --reference")


def read_run(folder):
    """A run folder's records by cell id; VerifyError for a folder that is not a run."""
    if not (folder / "cells").is_dir():
        raise VerifyError(f"{folder} is not a run folder (no cells/); pass one of results/PROFILE-DATE-TIME")
    return records_by_id(folder)


def ok_classes(records):
    """The machine classes of the ok records among `records` ({cell id: record})."""
    return {machine_class(r) for r in records.values() if r["status"] == "ok"}


def latest_run(profile):
    runs = run.runs_of(run.RESULTS, profile)
    if not runs:
        raise VerifyError(f"no run of profile {profile!r} under {run.RESULTS} to compare")
    return runs[-1]


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m scripts.verify", description=__doc__.split("\n")[0])
    ap.add_argument("--reference", type=Path,
                    help="a reference run folder (default: the one of this machine class)")
    ap.add_argument("--run", type=Path, help="compare this run folder instead of running the profile")
    ap.add_argument("--profile", default="demo", help="the profile to run when no --run is given")
    ap.add_argument("--time-tolerance", type=float, default=TIME_TOLERANCE, metavar="RATIO",
                    help=f"normalised steady-state ratio beyond which a cell is off (default {TIME_TOLERANCE})")
    ap.add_argument("--quality-margin", type=float, default=QUALITY_MARGIN, metavar="DELTA",
                    help=f"largest accepted accuracy/AUC difference (default {QUALITY_MARGIN})")
    args = ap.parse_args(argv)
    if args.time_tolerance <= 1 or args.quality_margin < 0:
        ap.error("--time-tolerance must be above 1 and --quality-margin 0 or more")
    try:
        measured = None
        if args.reference is None:
            measured = None if args.run is None else read_run(args.run)
            machine = this_machine() if args.run is None else None
            wanted = {machine} if args.run is None else ok_classes(measured)
            fitting = fitting_references(wanted)
            if not fitting:
                print(f"no reference under {REFERENCES} holds records of {', '.join(sorted(wanted)) or 'this run'}; "
                      f"{how_to_make_one(machine or next(iter(sorted(wanted)), 'this machine'))}", file=sys.stderr)
                return INCOMPARABLE
            args.reference = fitting[0]
        runs = reference_runs(args.reference)
        reference = runs[0]
        if not reference:
            available = ", ".join(p.name for p in REFERENCES.iterdir()) if REFERENCES.exists() else "none"
            raise VerifyError(f"no reference records under {args.reference}/cells; available: {available}")
        if args.run is None:
            if run.main(["--profile", args.profile]) == 2:
                return 2  # the run could not start; it said why
            args.run = latest_run(args.profile)
        measured = measured if measured is not None else read_run(args.run)
    except VerifyError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    rows, counts, outside, overall = compare(reference, measured, planned_ids(args.run), args.time_tolerance,
                                             args.quality_margin, between_runs(runs))
    print(f"reference {args.reference} ({plural(len(runs), 'run')}) vs {args.run}")
    print(tabulate(rows, headers=["cell", "reference", "measured", "ratio", "÷ overall", "tolerance", "rank test p",
                                  "quality", "verdict"], floatfmt=".3g", missingval="—"))
    line, overall_off = overall_line(overall, counts["overall basis"])
    print(line)
    verdict = one_line(counts, outside, args.time_tolerance, args.quality_margin, overall_off)
    print(verdict)
    if verdict.startswith("INCOMPARABLE"):
        wanted = ok_classes(measured)
        fitting = fitting_references(wanted, exclude=args.reference)
        print("a reference that fits: " + ", ".join(map(str, fitting)) if fitting else
              how_to_make_one(next(iter(sorted(wanted)), "this machine")))
        return INCOMPARABLE
    return 0 if verdict.startswith("OK") else 1


if __name__ == "__main__":
    sys.exit(main())
