"""Would the tests notice? One-line mutations of the verdict code, each tried alone on a copy of the tracked tree, with
the test files that guard it; a mutation the tests do not fail on "survived". A benchmark of the suite, not a test:

    .venv/host/bin/python bench/mutate_verdicts.py            # every mutation (about 10 minutes on two cores)
    .venv/host/bin/python bench/mutate_verdicts.py leak alpha # those whose name contains one of the words

Prints one line per mutation and the kill rate; exit 1 when any survived. The list holds the mutations issue 29
names (the rank test's α, the rank test on too few samples, the whole-run limit and its "too slow" side, accuracy
flagging only drops, the data-kind check, the per-cell sample count, the steady state from the minimum window, the
extraction figure from `min`, the barrier-leak threshold ×10) and one or more for every other threshold and branch of
scripts/results/verify.py and evidence.py, shared/timing.py and the record checks in scripts/results/records.py.
"""

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from bench import locate  # noqa: E402  (run as a script: bench/ is not on the path)

VERIFY = ["tests/test_verify.py", "tests/test_report.py"]
TIMING = ["tests/test_timing.py", "tests/test_record_consistency.py", "tests/test_gpu_check.py"]
RECORDS = ["tests/test_record_consistency.py", "tests/test_verify.py"]
EVIDENCE = ["tests/test_evidence.py", *VERIFY]  # the evidence a record's author could write (issue 48) first

# (name, file, the line's text as it is, as mutated, the tests that guard it)
MUTATIONS = [
    # scripts/results/verify.py: thresholds
    ("alpha-0.5", "scripts/results/verify.py", "ALPHA = 0.05 ", "ALPHA = 0.5 ", VERIFY),
    ("alpha-0.01", "scripts/results/verify.py", "ALPHA = 0.05 ", "ALPHA = 0.01 ", VERIFY),
    ("tolerance-2", "scripts/results/verify.py", "TIME_TOLERANCE = 1.5 ", "TIME_TOLERANCE = 2.0 ", VERIFY),
    ("tolerance-1.4", "scripts/results/verify.py", "TIME_TOLERANCE = 1.5 ", "TIME_TOLERANCE = 1.4 ", VERIFY),
    ("overall-limit-20", "scripts/results/verify.py", "OVERALL_TOLERANCE = 1.25 ", "OVERALL_TOLERANCE = 20 ", VERIFY),
    (
        "overall-limit-1.15",
        "scripts/results/verify.py",
        "OVERALL_TOLERANCE = 1.25 ",
        "OVERALL_TOLERANCE = 1.15 ",
        VERIFY,
    ),
    (
        "overall-too-slow-side-removed",
        "scripts/results/verify.py",
        "off = same_class and (rest > OVERALL_TOLERANCE or rest < 1 / OVERALL_TOLERANCE)",
        "off = same_class and (rest < 1 / OVERALL_TOLERANCE)",
        VERIFY,
    ),
    (
        "overall-too-fast-side-removed",
        "scripts/results/verify.py",
        "off = same_class and (rest > OVERALL_TOLERANCE or rest < 1 / OVERALL_TOLERANCE)",
        "off = same_class and (rest > OVERALL_TOLERANCE)",
        VERIFY,
    ),
    ("quality-margin-0.1", "scripts/results/verify.py", "QUALITY_MARGIN = 0.05 ", "QUALITY_MARGIN = 0.1 ", VERIFY),
    ("quality-only-drops", "scripts/results/verify.py", "abs(m_q - e_q) > margin", "e_q - m_q > margin", VERIFY),
    ("waited-tolerance-3", "scripts/results/verify.py", "WAITED_TOLERANCE = 2.0 ", "WAITED_TOLERANCE = 3.0 ", VERIFY),
    (
        "calibration-noise-1.5",
        "scripts/results/verify.py",
        "CALIBRATION_NOISE = 1.05 ",
        "CALIBRATION_NOISE = 1.5 ",
        VERIFY,
    ),
    (
        "calibration-noise-1",
        "scripts/results/verify.py",
        "CALIBRATION_NOISE = 1.05 ",
        "CALIBRATION_NOISE = 1.0 ",
        VERIFY,
    ),
    ("min-overall-cells-50", "scripts/results/verify.py", "MIN_OVERALL_CELLS = 5 ", "MIN_OVERALL_CELLS = 50 ", VERIFY),
    # scripts/results/verify.py: branches
    (
        "rank-test-on-2-samples",
        "scripts/results/stats.py",
        "if len(reference_samples) < MIN_SAMPLES or len(m) < MIN_SAMPLES:",
        "if len(reference_samples) < 2 or len(m) < 2:",
        VERIFY,
    ),
    (
        "rank-test-two-sided",
        "scripts/results/stats.py",
        'alternative="greater" if ratio > 1 else "less"',
        'alternative="two-sided"',
        VERIFY,
    ),
    (
        "rank-test-wrong-side",
        "scripts/results/stats.py",
        'alternative="greater" if ratio > 1 else "less"',
        'alternative="less" if ratio > 1 else "greater"',
        VERIFY,
    ),
    ("rank-test-ignored", "scripts/results/verify.py", "if p is not None and p >= ALPHA:", "if False:", VERIFY),
    (
        "data-kind-check-removed",
        "scripts/results/verify.py",
        "if expected.cell.data != measured.cell.data:",
        "if False:",
        VERIFY,
    ),
    (
        "params-hash-check-removed",
        "scripts/results/verify.py",
        "elif e_hash is None or e_hash != m_hash:",
        "elif False:",
        VERIFY,
    ),
    ("class-check-removed", "scripts/results/verify.py", "if e_class != m_class:", "if False:", VERIFY),
    ("unit-check-removed", "scripts/results/verify.py", "if e_unit != m_unit:", "if False:", VERIFY),
    (
        "samples-missing-removed",
        "scripts/results/verify.py",
        "if timed(measured) < timed(expected):",
        "if False:",
        VERIFY,
    ),
    ("refused-passes", "scripts/results/verify.py", "if isinstance(measured, Refused):", "if False:", VERIFY),
    (
        "incomparable-is-a-footnote",
        "scripts/results/verify.py",
        'if counts["incomparable"]:\n        problems.append',
        "if False:\n        problems.append",
        VERIFY,
    ),
    (
        "overall-is-the-mean",
        "scripts/results/verify.py",
        "return (statistics.median(ratios) if len(ratios) >= MIN_OVERALL_CELLS",
        "return (statistics.mean(ratios) if len(ratios) >= MIN_OVERALL_CELLS",
        VERIFY,
    ),
    (
        "whole-overall-divided-out",
        "scripts/results/verify.py",
        "factor = within(calibrated, raw)",
        "factor = raw if basis >= MIN_OVERALL_CELLS else 1.0",
        VERIFY,
    ),
    ("calibration-ignored", "scripts/results/verify.py", "factor = within(calibrated, raw)", "factor = 1.0", VERIFY),
    (
        "calibration-excuses-more-than-the-cells-show",
        "scripts/results/verify.py",
        "return min(calibrated / CALIBRATION_NOISE, max(raw, 1.0)) if calibrated > 1 else calibrated",
        "return calibrated / CALIBRATION_NOISE if calibrated > 1 else calibrated",
        VERIFY,
    ),
    (
        "ratio-of-medians",
        "scripts/results/verify.py",
        "ratio = stats.ratio_estimate(m_samples, pooled)",
        "ratio = m_time / e_time",
        VERIFY,
    ),
    (
        "reference-not-pooled",
        "scripts/results/verify.py",
        "pooled = known.pooled if known.pooled else samples(expected)",
        "pooled = samples(expected)",
        VERIFY,
    ),
    (
        "faster-not-a-deviation",
        "scripts/results/verify.py",
        "if normalised is not None and (normalised > tolerance or normalised < 1 / tolerance):",
        "if normalised is not None and normalised > tolerance:",
        VERIFY,
    ),
    (
        "tolerance-loosenable",
        "scripts/results/verify.py",
        "if not 1 < args.time_tolerance <= TIME_TOLERANCE",
        "if not 1 < args.time_tolerance",
        VERIFY,
    ),
    # scripts/results/records.py: the record checks
    (
        "nan-accepted",
        "scripts/results/records.py",
        "isinstance(value, float) and not math.isfinite(value) or",
        "False or",
        RECORDS,
    ),
    (
        "beyond-floats-accepted",
        "scripts/results/records.py",
        "isinstance(value, int) and not isinstance(value, bool) and abs(value) > sys.float_info.max",
        "False",
        RECORDS,
    ),
    (
        "sample-of-no-time-accepted",
        "scripts/results/records.py",
        "if any(number(v) and v <= 0 for v in kept):",
        "if False:",
        RECORDS,
    ),
    (
        "accuracy-above-one-accepted",
        "scripts/results/records.py",
        "if number(value) and math.isfinite(value) and not 0 <= value <= 1:",
        "if number(value) and math.isfinite(value) and value < 0:",
        RECORDS,
    ),
    (
        "steady-state-unchecked",
        "scripts/results/records.py",
        "if recomputed is not None and differs(published, recomputed):",
        "if False:",
        RECORDS,
    ),
    (
        "extraction-unchecked",
        "scripts/results/records.py",
        "            if differs(published, recomputed):",
        "            if False:",
        RECORDS,
    ),
    ("consistency-tolerance-1e-2", "scripts/results/records.py", "CONSISTENT = 1e-6 ", "CONSISTENT = 1e-2 ", RECORDS),
    ("class-not-rederived", "scripts/results/records.py", "if derived != claimed:", "if False:", RECORDS),
    # scripts/results/stats.py: samples still falling while timed
    ("falling-alpha-0.5", "scripts/results/stats.py", "FALLING_ALPHA = 0.01 ", "FALLING_ALPHA = 0.5 ", VERIFY),
    ("falling-two-sided", "scripts/results/stats.py", 'alternative="less"', 'alternative="two-sided"', VERIFY),
    (
        "falling-unnamed-in-a-row-off",
        "scripts/results/verify.py",
        "falling = stats.still_falling(samples(measured))",
        "falling = None",
        VERIFY,
    ),
    # shared/timing.py
    (
        "steady-state-min-window",
        "shared/timing.py",
        "return float(statistics.median(windows) * steps",
        "return float(min(windows) * steps",
        TIMING,
    ),
    (
        "steady-state-mean-window",
        "shared/timing.py",
        "return float(statistics.median(windows) * steps",
        "return float(statistics.mean(windows) * steps",
        TIMING,
    ),
    (
        "extraction-from-min",
        "shared/timing.py",
        'return {"seconds_per_1000_images": timing["median"] / images',
        'return {"seconds_per_1000_images": timing["min"] / images',
        TIMING,
    ),
    ("leak-seconds-x10", "shared/timing.py", "LEAK_SECONDS = 1e-3 ", "LEAK_SECONDS = 1e-2 ", TIMING),
    ("leak-share-x10", "shared/timing.py", "LEAK_SHARE = 0.02 ", "LEAK_SHARE = 0.2 ", TIMING),
    ("unstable-spread-0.2", "shared/timing.py", "UNSTABLE_SPREAD = 0.10 ", "UNSTABLE_SPREAD = 0.20 ", TIMING),
    ("min-samples-4", "shared/timing.py", "MIN_SAMPLES = 5 ", "MIN_SAMPLES = 4 ", TIMING),
    ("warmup-agreement-0.2", "shared/timing.py", "WARMUP_AGREEMENT = 0.10 ", "WARMUP_AGREEMENT = 0.20 ", TIMING),
    ("warmup-cap-10", "shared/timing.py", "WARMUP_CAP = 5 ", "WARMUP_CAP = 10 ", TIMING),
    ("window-steps-4", "shared/timing.py", "WINDOW_STEPS = 5 ", "WINDOW_STEPS = 4 ", TIMING),
    (
        "repeat-fewer-than-min-samples",
        "shared/timing.py",
        "for _ in range(max(repeats, MIN_SAMPLES)):",
        "for _ in range(repeats):",
        TIMING,
    ),
    (
        "spread-from-fewer-samples",
        "shared/timing.py",
        "if len(values) >= MIN_SAMPLES and median > 0",
        "if len(values) >= 2 and median > 0",
        TIMING,
    ),
    (
        "first-step-in-a-window",
        "shared/timing.py",
        "                    probing += edge()\n                    window_start = time.perf_counter()\n",
        "                    probing += edge()\n",
        TIMING,
    ),
    (
        "leak-floor-ignored",
        "shared/timing.py",
        "if seconds > max(LEAK_SECONDS, LEAK_SHARE * interval)",
        "if seconds > LEAK_SHARE * interval",
        TIMING,
    ),
    (
        "training-warmup-windows-kept",
        "shared/timing.py",
        "return list(windows[warm_windows(windows)[0]:])",
        "return list(windows)",
        TIMING,
    ),
    (
        "training-warmup-one-window-less",
        "shared/timing.py",
        "            return i + 1, True",
        "            return i, True",
        TIMING,
    ),
    (
        "training-warmup-uncapped",
        "shared/timing.py",
        "for i in range(1, min(len(windows), WARMUP_CAP)):",
        "for i in range(1, len(windows)):",
        TIMING,
    ),
    (
        "training-timing-from-every-window",
        "shared/timing.py",
        "**summarize(windows[count:], warmup=warmup",
        "**summarize(windows, warmup=warmup",
        TIMING,
    ),
    # scripts/results/verify.py: like with like (the cores' distance)
    ("apart-1.6", "scripts/results/evidence.py", "APART = 1.4 ", "APART = 1.6 ", VERIFY),
    (
        "distance-moved-as-one",
        "scripts/results/evidence.py",
        "return where.pop() if len(where) == 1 else None",
        "return sorted(where)[0]",
        VERIFY,
    ),
    (
        "distance-any-samples",
        "scripts/results/verify.py",
        "    if len(same) >= MIN_SAMPLES:\n        return same,",
        "    if same:\n        return same,",
        VERIFY,
    ),
    (
        "distance-ignored",
        "scripts/results/verify.py",
        "    if where is None:\n        return pooled, None",
        "    if True:\n        return pooled, None",
        VERIFY,
    ),
    # sample by sample: the cores' distance at every window edge (shared/timing.py, verify.by_sample)
    (
        "by-sample-ignored",
        "scripts/results/verify.py",
        "    if sampled:\n        return sampled\n",
        "    if False:\n        return sampled\n",
        VERIFY,
    ),
    (
        "sample-distance-one-edge",
        "scripts/results/evidence.py",
        "return [a if a == b else None for a, b in zip(where, where[1:], strict=False)]",
        "return where[:-1]",
        VERIFY,
    ),
    (
        "edges-head-not-tail",
        "scripts/results/evidence.py",
        "for t in trips[-(count + 1):]]",
        "for t in trips[:count + 1]]",
        VERIFY,
    ),
    (
        "probe-inside-the-epoch",
        "shared/timing.py",
        "epoch_seconds.append(epoch_time() - probing)",
        "epoch_seconds.append(epoch_time())",
        TIMING,
    ),
    # scripts/results/verify.py: what a hostile run folder may hold (a red-team pass, 2026-12-06)
    (
        "plan-decides-what-is-judged",
        "scripts/results/verify.py",
        "wanted = None if not partial else set(plan if plan is not None else measured)",
        "wanted = None if plan is None else set(plan)",
        VERIFY,
    ),
    ("record-under-another-name", "scripts/results/verify.py", "    if holds != cell_id:\n", "    if False:\n", VERIFY),
    (
        "record-of-another-run",
        "scripts/results/verify.py",
        "if run_id is not None and record.run_id != run_id:",
        "if False:",
        VERIFY,
    ),
    (
        "run-figures-not-rederived",
        "scripts/results/verify.py",
        "wrong = records.inconsistencies(record.data)",
        "wrong = records.contradictions(record.data)",
        VERIFY,
    ),
    (
        "placement-without-edges",
        "scripts/results/verify.py",
        "if not edges(measured) and any(edges(r) for r in records):",
        "if False:",
        VERIFY,
    ),
    (
        "confirmed-by-an-earlier-run",
        "scripts/results/evidence.py",
        'if records.moment(second.started_at, "started_at") < records.moment(first.finished_at, "finished_at"):',
        "if False:",
        VERIFY,
    ),
    (
        "confirmed-by-other-code",
        "scripts/results/evidence.py",
        "if None not in commits and commits[0] != commits[1]:",
        "if False:",
        VERIFY,
    ),
    (
        "quality-margin-loosened",
        "scripts/results/verify.py",
        "not 0 <= args.quality_margin <= QUALITY_MARGIN",
        "args.quality_margin < 0",
        VERIFY,
    ),
    (
        "all-failed-is-incomparable",
        "scripts/results/verify.py",
        "return found or {this_machine()[0]}",
        "return found",
        VERIFY,
    ),
    (
        "plan-nested-too-deeply",
        "scripts/plan/planfile.py",
        "    except RecursionError:\n",
        "    except ZeroDivisionError:\n",
        VERIFY,
    ),
    # shared/timing.py: the stopwatch's path for a barrier that returns early (its audit, outside the interval)
    (
        "stopwatch-audits-another-interval",
        "shared/timing.py",
        "_audit.append((elapsed[0], sync()))",
        "_audit.append((1.0, sync()))",
        ["tests/test_timing.py"],
    ),
    (
        "stopwatch-sync-inside-the-interval",
        "shared/timing.py",
        "_audit.append((elapsed[0], sync()))",
        "_audit.append((elapsed[0], sync())); elapsed[0] = time.perf_counter() - start",
        ["tests/test_timing.py"],
    ),
    (
        "stopwatch-no-closing-barrier",
        "shared/timing.py",
        "    yield lambda: elapsed[0]\n    barrier()\n",
        "    yield lambda: elapsed[0]\n",
        ["tests/test_timing.py"],
    ),
    (
        "stopwatch-audit-skipped",
        "shared/timing.py",
        "    if sync is not None:\n",
        "    if False:\n",
        ["tests/test_timing.py"],
    ),
    (
        "stopwatch-opening-barrier-in-the-interval",
        "shared/timing.py",
        "    barrier()\n    start = time.perf_counter()\n",
        "    start = time.perf_counter()\n    barrier()\n",
        ["tests/test_timing.py"],
    ),
    (
        "probe-before-the-last-pass",
        "shared/timing.py",
        "        values.append(t())\n        edge()\n",
        "        values.append(t())\n",
        TIMING,
    ),
    # scripts/results/evidence.py: the evidence a record's author could write (issue 48)
    (
        "edge-round-trip-floor-ignored",
        "scripts/results/evidence.py",
        "FLOOR_NS <= t <= CEILING_NS",
        "t <= CEILING_NS",
        EVIDENCE,
    ),
    (
        "edge-round-trip-ceiling-ignored",
        "scripts/results/evidence.py",
        "FLOOR_NS <= t <= CEILING_NS",
        "FLOOR_NS <= t",
        EVIDENCE,
    ),
    ("edges-without-probe-believed", "scripts/results/evidence.py", "if len(probe) < 2:", "if False:", EVIDENCE),
    (
        "edges-apart-against-the-probe-believed",
        "scripts/results/evidence.py",
        "if all(t and t > APART * edge_line for t in sides) and all(t <= APART * probe_line for t in probe):",
        "if False:",
        EVIDENCE,
    ),
    (
        "edge-finding-excuses-anyway",
        "scripts/results/verify.py",
        "finding = checks.round_trip_finding(record, comparable_runs(runs, cell_id)) if record and ok else None",
        "finding = None",
        EVIDENCE,
    ),
    (
        "edge-line-from-the-judged-run",
        "scripts/results/verify.py",
        "    floor = edge_floor(records)\n    if not floor",
        "    floor = edge_floor(records + [measured])\n    if not floor",
        EVIDENCE,
    ),
    (
        "edge-nearer-keeps-its-value",
        "scripts/results/verify.py",
        'NEAREST = {"nearer": "near"}',
        "NEAREST = {}",
        EVIDENCE,
    ),
    (
        "moved-sample-keeps-its-value",
        "scripts/results/verify.py",
        'scaled(measured, "near", ours)',
        "scaled(measured, None, ours)",
        EVIDENCE,
    ),
    (
        "confirm-same-run-id",
        "scripts/results/evidence.py",
        "if second.run_id is not None and second.run_id == other.run_id:",
        "if False:",
        EVIDENCE,
    ),
    (
        "confirm-copied-samples",
        "scripts/results/evidence.py",
        "if set(mine) & set(theirs):",
        "if False:",
        EVIDENCE,
    ),
    (
        "confirm-scaled-copy",
        "scripts/results/evidence.py",
        "if max(ratios) - min(ratios) <= SCALED_COPY * max(ratios):",
        "if False:",
        EVIDENCE,
    ),
    (
        "confirm-reference-not-compared",
        "scripts/results/evidence.py",
        'others = [("the run judged", first)] + [("the reference", of(r)) for r in reference]',
        'others = [("the run judged", first)]',
        EVIDENCE,
    ),
    (
        "calibration-noise-explains",
        "scripts/results/verify.py",
        "return min(calibrated / CALIBRATION_NOISE, max(raw, 1.0)) if calibrated > 1 else calibrated",
        "return min(calibrated, max(raw, 1.0)) if calibrated > 1 else calibrated",
        EVIDENCE,
    ),
    (
        "quality-margin-cap-doubled",
        "scripts/results/verify.py",
        "not 0 <= args.quality_margin <= QUALITY_MARGIN",
        "not 0 <= args.quality_margin <= 2 * QUALITY_MARGIN",
        EVIDENCE,
    ),
    # issue 49: a reference that cannot judge the run says so (exit 3), and the row's ratio follows from its columns
    (
        "reference-of-another-class-judged",
        "scripts/results/verify.py",
        "if theirs and not ours & theirs and not set(measured) & set(reference):",
        "if False:",
        VERIFY,
    ),
    ("calibrated-otherwise-judged", "scripts/results/verify.py", "if a != b:", "if False:", VERIFY),
    (
        "row-shows-the-pooled-median",
        "scripts/results/verify.py",
        "if known.own and ratio:",
        "if False:",
        VERIFY,
    ),
]


def tracked_copy(target):
    """The tracked files of the checkout (as they are now, edits included) under `target`, .venv linked."""
    files = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, check=True, stdout=subprocess.PIPE).stdout
    for name in filter(None, files.decode().split("\0")):
        source, dest = ROOT / name, target / name
        if source.is_file():
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_bytes(source.read_bytes())
    (target / ".venv").symlink_to((ROOT / ".venv").resolve())


def survives(copy, path, old, new, tests):
    """True where every guarding test passes with the mutation applied (a mutation the tests do not notice)."""
    file = copy / path
    text = file.read_text()
    try:
        file.write_text(locate.apply(text, old, new))
    except ValueError as e:
        raise SystemExit(
            f"{path}: the mutation's code {e} (expected once): update bench/mutate_verdicts.py to the code"
        ) from e
    try:
        proc = subprocess.run(
            [
                str(copy / ".venv" / "host" / "bin" / "python"),
                "-m",
                "pytest",
                "-x",
                "-q",
                "-p",
                "no:cacheprovider",
                "-o",
                "addopts=",
                *tests,
            ],
            cwd=copy,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
        return proc.returncode == 0
    finally:
        file.write_text(text)


def main(argv):
    ap = argparse.ArgumentParser(prog="./rosetta bench.mutate_verdicts", description=__doc__.split("\n")[0])
    ap.add_argument("words", nargs="*", help="run only the mutations whose name contains one of these words")
    words = ap.parse_args(argv).words
    chosen = [m for m in MUTATIONS if not words or any(word in m[0] for word in words)]
    survived = []
    with tempfile.TemporaryDirectory(prefix="mutate-") as tmp:
        copy = Path(tmp)
        tracked_copy(copy)
        for name, path, old, new, tests in chosen:
            start = time.perf_counter()
            alive = survives(copy, path, old, new, tests)
            print(
                f"{'SURVIVED' if alive else 'killed  '}  {name:36} {path}  ({time.perf_counter() - start:.0f} s)",
                flush=True,
            )
            if alive:
                survived.append(name)
    killed = len(chosen) - len(survived)
    print(
        f"kill rate: {killed}/{len(chosen)} ({killed / max(len(chosen), 1):.0%})"
        + (f"; survived: {', '.join(survived)}" if survived else "")
    )
    return 1 if survived else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
