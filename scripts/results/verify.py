"""Check this install against reference records shipped in the repo (results/reference/NAME/cells/*.json).

    python -m scripts.results.verify                 # run the demo profile, compare with this machine class's reference
    python -m scripts.results.verify --run results/demo-… --reference results/reference/nvidia-h200

The rules, in the order a cell meets them, and why each is so (with the false-alarm rates measured over the
committed honest runs) are in docs/verify.md; each constant below names the rule it sets. In short: a run cell is
compared only with the reference cell of the same id, data kind, task parameters, machine class and timing unit, and
a reference cell the run cannot be compared on fails; the run's overall factor is divided out only as far as its own
calibration explains it (×OVERALL_TOLERANCE left at most); a cell is off when its Hodges-Lehmann ratio against the
reference's pooled samples is beyond ×TIME_TOLERANCE either way and the one-sided rank test agrees (p < ALPHA,
scripts/results/stats.py), judged at the cores' distance its samples were measured at where the reference has
samples there; where verify ran the profile itself, a time verdict stands only if a second run of the cell agrees
(`confirm`). Quality beyond QUALITY_MARGIN, a failed, missing or refused record and a skip where the reference ran
are off.

Exit codes: 0 every compared cell as expected, 1 something is off, 2 the comparison cannot start (no reference, no
run), 3 nothing in the run is comparable with the reference (the message names a reference that fits, or how to make
one).
"""

import argparse
import math
import statistics
import sys
from collections import Counter
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any

from tabulate import tabulate

from scripts.paths import REFERENCES, RESULTS
from scripts.plan.matrix import Cell
from scripts.plan.planfile import planned_ids, planned_run
from scripts.results import evidence as checks
from scripts.results import records, report, stats
from scripts.results.evidence import (
    distance,
    edge_floor,
    edges,
    floor_of,
    round_trips,
    sample_distances,
)
from scripts.results.records import Record
from scripts.results.runs import runs_of, start_run
from shared import params, sysinfo
from shared.calibration import outdated
from shared.record import RecordError
from shared.timing import MIN_SAMPLES

TIME_TOLERANCE = 1.5  # a cell's ratio beyond this (either way) is off, if the rank test agrees; also the cap
WAITED_TOLERANCE = 2.0  # the time as waited beyond this (normalised) adds a note
OVERALL_TOLERANCE = 1.25  # the unexplained overall factor (same machine class) beyond this either way is off
QUALITY_MARGIN = 0.05  # accuracy or AUC may differ from the reference's by this much
ALPHA = 0.05  # the one-sided rank test's significance level (the ratio's own direction)
STRATUM_RUN = 3  # a run's samples at one distance give its figure there (at_one_distance) from this many
CALIBRATION_NOISE = 1.05  # calibrations within this of the reference's explain nothing (its honest runs: ≤ ×1.03)
MIN_OVERALL_CELLS = 5  # fewer comparable cells estimate no overall factor: one cell's ratio would hide itself
INCOMPARABLE = 3  # exit code: nothing to compare with
CLOSE = {"nearer": "as near as these"}  # evidence.side's words in a row
NEAREST = {"nearer": "near"}  # cores nearer than the reference saw them are judged at its nearest: no excuse

RecordLike = Record | Mapping[str, Any]  # a record as verify's helpers take it: a Record, or a record dict (of)
Run = Mapping[str, RecordLike]  # one run's records by cell id
Runs = Sequence[Run]  # the reference's runs (reference_runs): the reference cells first


class VerifyError(Exception):
    """Nothing to compare with (no reference, no run); the message says what to pass instead."""


def records_by_id(folder: Path) -> dict[str, Record]:
    try:
        return {p.stem: records.load(p) for p in sorted(Path(folder).glob("cells/*.json"))}
    except RecordError as e:
        raise VerifyError(str(e)) from e


def reference_runs(folder: Path) -> list[dict[str, Record]]:
    """The reference's runs, each {cell id: record}: cells/ (the reference cells) first, then every further honest
    run kept under runs/RUN_ID/."""
    runs = [records_by_id(folder)]
    for extra in sorted(p for p in Path(folder).glob("runs/*") if p.is_dir()):
        try:
            runs.append({p.stem: records.load(p) for p in sorted(extra.glob("*.json"))})
        except RecordError as e:
            raise VerifyError(str(e)) from e
    return runs


def of(record: Record | Mapping[str, Any]) -> Record:
    """`record` as a Record (records.Record.of): a record dict, as callers outside verify build them, or a Record."""
    return Record.of(record)


def comparable_runs(runs: Runs, cell_id: str) -> list[Record]:
    """The ok records of `cell_id` in every reference run that are comparable with the first run's."""
    first = sound(runs[0].get(cell_id))
    if first is None or first.status != "ok":
        return []
    found = [of(r[cell_id]) for r in runs if cell_id in r]
    return [r for r in found if r.status == "ok" and why_incomparable(first, r) is None]


def between_runs(runs: Runs) -> dict[str, float]:
    """{cell id: (slowest / fastest steady state) over the reference's runs}, for the cells that are ok and
    comparable with the first run's in at least two runs (the README's figure; never a tolerance)."""
    factors = {}
    for cell_id in runs[0] if runs else ():
        times = [t for t in (steady(r) for r in comparable_runs(runs, cell_id)) if t]
        if len(times) >= 2:
            factors[cell_id] = max(times) / min(times)
    return factors


def run_distances(runs: Runs, cell_id: str) -> list[tuple[str | None, float | None]]:
    """[(the cores' distance, steady state)] of each of the reference's comparable runs of the cell: "near", "apart",
    or None (moved during the cell, or not measured: a record from before shared/placement.py)."""
    records = comparable_runs(runs, cell_id)
    floor = floor_of(records)
    return [(distance(r, floor), steady(r)) for r in records]


def at_one_distance(runs: Runs, cell_id: str) -> float | None:
    """The cell's widest between-run factor among its runs at one same distance (near with near, apart with apart),
    or None where no two runs share one: what is left of its between-run factor once like is compared with like.
    Where every run measured the distance at its window edges, a run's figure at a distance is the median of its
    samples there (STRATUM_RUN or more of them); else its steady state, where its cores were at one distance
    throughout."""
    records, groups = comparable_runs(runs, cell_id), dict[str, list[float]]()
    floor = edge_floor(records)
    if floor and all(edges(r) for r in records):
        for r in records:
            sides = sample_distances(r, floor)
            for side in ("near", "apart"):
                values = [v for v, w in zip(samples(r), sides, strict=False) if w == side]
                if len(values) >= STRATUM_RUN:
                    groups.setdefault(side, []).append(statistics.median(values))
        factors = [max(times) / min(times) for times in groups.values() if len(times) >= 2]
        return max(factors) if factors else None
    for where, time in run_distances(runs, cell_id):
        if where and time:
            groups.setdefault(where, []).append(time)
    factors = [max(times) / min(times) for times in groups.values() if len(times) >= 2]
    return max(factors) if factors else None


def reference_time(runs: Runs, cell_id: str) -> float | None:
    """The median steady state of `cell_id` over the reference's comparable runs, or None."""
    times = [t for t in map(steady, comparable_runs(runs, cell_id)) if t]
    return statistics.median(times) if times else None


def pooled_samples(runs: Runs) -> dict[str, list[float]]:
    """{cell id: the samples of every comparable honest reference run of the cell, pooled}."""
    return (
        {cell_id: [v for r in comparable_runs(runs, cell_id) for v in samples(r)] for cell_id in runs[0]}
        if runs
        else {}
    )


# ---------------------------------------------------------------- what a record measured


def machine_class(record: RecordLike) -> str:
    """The record's machine class, or one derived from its facts for records written before the key existed
    (records.upgrade)."""
    return of(record).machine_class


def samples(record: RecordLike) -> list[float]:
    """The post-warm-up samples of an ok record (seconds per step or per pass), [] where it kept none."""
    return of(record).samples


def timed(record: RecordLike) -> int:
    """How many windows or passes the record timed after its first step: its samples and, for training, the warm-up
    windows before them (how many of those there are varies between honest runs; their sum does not)."""
    record = of(record)
    return len(record.samples) + len(record.timing.warmup_windows)


def steady(record: RecordLike) -> float | None:
    """The steady-state figure the ratio is taken of: the median sample where the record has samples, else the
    task's recorded time (older records; Record.steady)."""
    return of(record).steady


def waited(record: RecordLike) -> float | None:
    """The time a user waits for the cell's timed work, compile and first step included."""
    record = of(record)
    if record.cell.task in params.TRAINING_TASKS:
        return record.metrics.get("train_seconds")
    passes = record.timing.values
    return (record.timing.warmup or 0) + sum(passes) if passes else record.metrics.get("seconds_per_1000_images")


def calibration(record: RecordLike) -> tuple[Any, Any]:
    """(GEMM FLOP/s, host-copy bytes/s) of a record's own calibration, None where it has none."""
    block = of(record).facts("calibration")
    return block.get("gemm_fp32_flops"), block.get("host_copy_bytes_per_s")


def why_incomparable(expected: RecordLike, measured: RecordLike) -> str | None:
    """Why two ok records of one cell id cannot be compared, or None where they can."""
    expected, measured = of(expected), of(measured)
    reasons = []
    if expected.cell.data != measured.cell.data:
        reasons.append(f"data {measured.cell.data} vs the reference's {expected.cell.data}")
    e_hash, m_hash = expected.params_hash, measured.params_hash
    if expected.cell.scale != measured.cell.scale:
        reasons.append(f"scale {measured.cell.scale} vs the reference's {expected.cell.scale}")
    elif e_hash is None or e_hash != m_hash:
        reasons.append(
            "task parameters differ"
            if e_hash and m_hash
            else "task parameters not recorded (a record from before params_hash)"
        )
    e_class, m_class = machine_class(expected), machine_class(measured)
    if e_class != m_class:
        reasons.append(f"machine {m_class} vs the reference's {e_class}")
    e_unit, m_unit = expected.timing.unit, measured.timing.unit
    if e_unit != m_unit:
        reasons.append(f"timed in {m_unit or 'epochs/passes'} vs the reference's {e_unit or 'epochs/passes'}")
    return "; ".join(reasons) or None


# ---------------------------------------------------------------- judging


class Outcome(StrEnum):
    """What verify found of one cell; its value is the word the summary counts it under."""

    OK = "ok"
    SLOWER = "slower"
    FASTER = "faster"
    QUALITY = "quality"
    WAITED = "waited"  # a note, never a failure alone
    MISSING = "missing"
    REFUSED = "refused"
    FAILED = "failed"
    NO_REFERENCE = "no reference"
    UNEXPECTED_SKIP = "unexpected skip"
    INCOMPARABLE = "incomparable"
    SAMPLES_MISSING = "samples missing"
    NO_TIME = "no time"
    UNCONFIRMED = "unconfirmed"


# What a run's tally counts beside the outcomes.
TALLIED = {"compared", "comparable", "overall basis"}


class Tally(Counter):
    """The counts of one comparison: a key that is neither an Outcome nor in TALLIED is a mistake, not a 0."""

    def __missing__(self, key):
        if key not in TALLIED and key not in Outcome._value2member_map_:
            raise KeyError(f"verify counts no {key!r}")
        return 0


@dataclass(frozen=True)
class Refused:
    """A record of the judged run that read_run would not use, and why: it stands in for the record and fails its
    cell."""

    reason: str


Judged = RecordLike | Refused | None  # a judged run's entry for a cell: missing (None) or refused stand in for it
JudgedRun = Mapping[str, RecordLike | Refused]  # a judged run's records by cell id (read_run)
Facts = tuple[Mapping[str, Any], str, int]  # (system facts, device, GPUs) of a record (ok_facts)


def sound(record: Judged) -> Record | None:
    """The record itself where read_run kept it: None where it was missing or refused."""
    return None if record is None or isinstance(record, Refused) else Record.of(record)


@dataclass(frozen=True)
class CellVerdict:
    """One cell judged: its outcomes (the first decides; `waited` only adds a note), the words of its row, and the
    figures the row shows (None where there are none)."""

    outcomes: tuple
    words: str
    reference_time: float | None = None  # the reference's steady state (the median of its pooled samples)
    measured_time: float | None = None  # the run's steady state
    raw_ratio: float | None = None  # measured over reference, before the explained factor is divided out
    ratio: float | None = None  # the ratio judged
    tolerance: float | None = None
    p: float | None = None  # the one-sided rank test's p-value, where there are samples enough on both sides
    quality: float | None = None  # the run's accuracy or AUC

    @property
    def row(self) -> tuple[float | None, ...]:
        return (
            self.reference_time,
            self.measured_time,
            self.raw_ratio,
            self.ratio,
            self.tolerance,
            self.p,
            self.quality,
        )


def judge_status(expected: RecordLike | None, measured: Judged) -> tuple[Outcome, str] | None:
    """(outcome, words) where one of the two cells did not run ok or they cannot be compared, else None."""
    if measured is None:
        return Outcome.MISSING, "missing: the run has no record of this cell (the reference has)"
    if isinstance(measured, Refused):
        return Outcome.REFUSED, f"refused: {measured.reason[:200]}"
    measured = of(measured)
    status, why = measured.status, report.first_line(measured.reason or "no reason given")[:70]
    if status in ("failed", "timeout"):
        return Outcome.FAILED, f"{status}: {why}"
    if expected is None:
        return Outcome.NO_REFERENCE, f"no reference ({status})"
    expected = of(expected)
    if expected.status != "ok":
        return (
            (Outcome.OK, "skipped as in the reference")
            if status == "skipped"
            else (Outcome.NO_REFERENCE, f"not compared: the reference cell is {expected.status}")
        )
    if status == "skipped":
        return Outcome.UNEXPECTED_SKIP, f"skipped, the reference ran it: {why}"
    reason = why_incomparable(expected, measured)
    if reason:
        return Outcome.INCOMPARABLE, f"incomparable: {reason}"
    if timed(measured) < timed(expected):
        return Outcome.SAMPLES_MISSING, (
            f"samples missing: {timed(measured)} of the {timed(expected)} windows or passes "
            "the reference cell timed (samples and warm-up windows)"
        )
    if not positive(steady(measured)):
        return Outcome.NO_TIME, f"no {params.TIME_METRIC[measured.cell.task]} in the record"
    if not positive(steady(expected)):  # a ratio needs a positive, finite reference time
        return Outcome.NO_REFERENCE, "not compared: the reference cell has no positive, finite time"
    return None


def positive(value: Any) -> bool:
    """A time that can be divided by and taken the log of: a finite number above 0."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value > 0


def placement_words(expected: RecordLike | None, measured: RecordLike | None, where: str | None = None) -> str:
    """For a cell off in time: how far apart the machine's cores were around it, beside the reference's, and which
    of the reference's samples it was judged against (`where`: at_distance's words); a round trip well above the
    reference's is the host moving the cores apart (docs/verify.md), not the install."""
    here, there = round_trips(measured), round_trips(expected)
    if not here:
        return ""
    words = f"; the cores' round trip {'→'.join(f'{v:.0f}' for v in here)} ns"
    return (
        words
        + (f" (reference: {'→'.join(f'{v:.0f}' for v in there)} ns)" if there else "")
        + (f", {where}" if where else "")
    )


def by_sample(
    records: list[Record], measured: Record, pooled: list[float] | None, believed: bool = True
) -> tuple[list[float], list[float], str] | None:
    """Like with like sample by sample (the records measured the cores' distance at every window edge): every sample
    of either side divided by the median of the reference's samples at its distance and multiplied by the pooled
    median, where the reference has MIN_SAMPLES or more at that distance; a measured sample at no one distance (the
    cores moved during it) is judged as one near, at the nearer mode (a sample timed partly near is no slower than
    that mode, and the label then buys nothing); a reference sample so, or one at a distance the reference lacks,
    keeps its value. Nothing is dropped, and a distance can buy at most the reference's own ratio between its two
    modes. "Near" is drawn from the reference's edges alone (edge_floor). Where the record's round trips are no
    evidence (not `believed`: evidence.round_trip_finding), every sample is judged as one near. (reference samples,
    measured samples, words), or None where the measured record has no edges or the reference no stratum."""
    floor = edge_floor(records)
    if not floor or not (edges(measured) or not believed) or not pooled:
        return None
    strata: dict[str, list[float]] = {}
    for r in records:
        for value, where in zip(samples(r), sample_distances(r, floor), strict=False):
            if where:
                strata.setdefault(where, []).append(value)
    medians = {where: statistics.median(v) for where, v in strata.items() if len(v) >= MIN_SAMPLES}
    if not medians:
        return None
    middle = statistics.median(pooled)

    def scaled(record, moved=None, sides=None):
        sides = sides if sides is not None else sample_distances(record, floor)
        return [
            v * middle / medians[where] if where in medians else v
            for v, where in zip(samples(record), (NEAREST.get(w, w) or moved for w in sides), strict=False)
        ]

    ours = sample_distances(measured, floor) if believed else [None] * len(samples(measured))
    reference = [v for r in records for v in (scaled(r) if edges(r) else samples(r))]
    counts = Counter(where or "moved" for where in ours)
    told = ", ".join(f"{counts[w]} {w}" for w in ("near", "nearer", "apart", "moved") if counts[w])
    told += " (judged as near)" if (counts["moved"] or counts["nearer"]) and "near" in medians else ""
    told = told if believed else f"none believed: {told}"
    lacking = [w for w in ("nearer", "near", "apart") if counts[w] and (w in NEAREST or w not in medians)]
    return (
        reference,
        scaled(measured, "near", ours),
        (
            f"each sample judged against the reference's at its cores' distance ({told}; the reference has "
            f"{' and '.join(sorted(medians))})"
            + (
                f"; the reference has no samples with its cores {CLOSE.get(lacking[0], lacking[0])}: those "
                + ("are judged as near" if lacking[0] == "nearer" else "are judged as they are")
                + "; run the cell again"
                if lacking
                else ""
            )
        ),
    )


def at_distance(
    runs: Runs, cell_id: str, measured: Judged, pooled: list[float] | None
) -> tuple[list[float] | None, list[float] | None, str | None]:
    """(the reference samples `measured` is judged against, its own samples, words). Where both sides measured the
    cores' distance at every window edge, sample by sample (by_sample). Else, where the record's cores were near (or
    apart) both before and after its work, only the samples of the reference's runs of the cell that ran at that
    same distance, if there are at least MIN_SAMPLES of them; else every pooled sample (`pooled`), and the words say
    the reference has none at that distance. Like is compared with like: never a wider tolerance, the same ×1.5 at
    either distance (docs/verify.md, "What moves")."""
    measured = sound(measured)
    if measured is None or measured.status != "ok":
        return pooled, None, None
    records = comparable_runs(runs, cell_id)
    sampled = by_sample(records, measured, pooled)
    if sampled:
        return sampled
    if not edges(measured) and any(edges(r) for r in records):  # a record without what its runner measures
        return (
            pooled,
            None,
            (
                "no round trips at its window edges, which the reference's runs of this cell have: "
                "judged against every pooled sample"
            ),
        )
    floor = floor_of(records)  # the reference's alone: a record's own round trips set no line it is judged by
    where = NEAREST.get(distance(measured, floor) or "", distance(measured, floor))
    if where is None:
        return pooled, None, None
    same = [v for r in records if distance(r, floor) == where for v in samples(r)]
    if len(same) >= MIN_SAMPLES:
        return same, None, f"judged against the reference's {len(same)} samples with its cores {where} too"
    return pooled, None, f"the reference has no samples with its cores {CLOSE.get(where, where)}: run the cell again"


@dataclass(frozen=True)
class Evidence:
    """What verify knows of one cell beyond its two records (`evidence`); each default is the records' own."""

    pooled: list | None = None  # the reference's samples of the cell over its honest runs, as judged (at_distance)
    between: float | None = None  # the reference's between-run factor (named when the cell is off, never a tolerance)
    time: float | None = None  # the median steady state of the reference's runs, for a cell without samples
    where: str | None = None  # which of the reference's samples `pooled` is (at_distance), named in an off row
    own: list | None = None  # the measured samples as judged (at_distance: sample by sample where both can)
    finding: str | None = None  # why the record's round trips are no evidence (evidence.round_trip_finding)


def evidence(
    runs: Runs, cell_id: str, measured: Judged, pooled: Mapping[str, list[float]], between: Mapping[str, float]
) -> Evidence:
    """The Evidence `measured` (a record of `cell_id`) is judged with: the reference's `runs`, their `pooled`
    samples and `between`-run factors by cell id (pooled_samples, between_runs)."""
    record = sound(measured)
    ok = record is not None and record.status == "ok"
    finding = checks.round_trip_finding(record, comparable_runs(runs, cell_id)) if record and ok else None
    sampled = (
        by_sample(comparable_runs(runs, cell_id), record, pooled.get(cell_id), False) if record and finding else None
    )
    if finding:  # no excuse from its cores' distance: as near, where the reference has samples near; else pooled
        against, own, where = sampled or (pooled.get(cell_id), None, None)
    else:
        against, own, where = at_distance(runs, cell_id, measured, pooled.get(cell_id))
    return Evidence(against, between.get(cell_id), reference_time(runs, cell_id), where, own, finding)


def judge(
    expected: RecordLike | None,
    measured: Judged,
    factor: float,
    tolerance: float,
    margin: float,
    known: Evidence = Evidence(),
) -> CellVerdict:
    """The CellVerdict of one cell: `measured` against `expected` (the reference's record), with the explained overall
    `factor` divided out, within `tolerance` (time) and `margin` (quality), on the `known` Evidence."""
    by_status = judge_status(expected, measured)
    if by_status:
        return CellVerdict((by_status[0],), by_status[1])
    # judge_status passed them: both are ok records, each with a positive, finite steady state
    assert expected is not None and measured is not None and not isinstance(measured, Refused)
    pooled = known.pooled if known.pooled else samples(expected)
    e_time = statistics.median(pooled) if pooled else (known.time or steady(expected))
    m_time = steady(measured)
    assert m_time is not None
    m_samples = known.own if known.own else samples(measured)
    ratio: float | None
    if len(pooled) >= MIN_SAMPLES and len(m_samples) >= MIN_SAMPLES:
        ratio = stats.ratio_estimate(m_samples, pooled)
    else:
        ratio = m_time / e_time if e_time else None
    if known.own and ratio:  # judged like with like at the cores' distance: the row shows the reference's figure
        e_time = m_time / ratio  # at that distance, so its ratio follows from its columns (not the pooled median)
    normalised = ratio / factor if ratio else None
    p = stats.rank_test(pooled, m_samples, factor, normalised) if normalised else None
    found: list[tuple[Outcome, str | None]] = []
    notes = []
    if known.finding:
        notes.append(f"its round trips are no evidence of its cores' distance: {known.finding}")
    if normalised is not None and (normalised > tolerance or normalised < 1 / tolerance):
        faster = normalised < 1
        if p is not None and p >= ALPHA:
            notes.append(f"×{normalised:.2f} but within its noise (p={p:.2g})")
        else:
            test = (
                f", p={p:.2g}"
                if p is not None
                else (
                    ", the reference has one value: no rank test"
                    if len(pooled) < 2
                    else f", fewer than {MIN_SAMPLES} samples on a side: no rank test"
                )
            )
            bimodal = (
                f"; the reference's own runs differ by ×{known.between:.2f} here: bimodal"
                if known.between and known.between > tolerance
                else ""
            )
            cores = placement_words(expected, measured, known.where)
            falling = stats.still_falling(samples(measured))
            settling = (
                (
                    f"; its samples still fell while timed (Kendall τ {falling[0]:.2f}, p={falling[1]:.2g}): not "
                    "yet steady, run the cell again"
                )
                if falling
                else ""
            )
            found.append(
                (
                    Outcome.FASTER,
                    f"faster than possible: this cell's clock? (×{normalised:.2f}{test}){bimodal}{settling}{cores}",
                )
                if faster
                else (Outcome.SLOWER, f"slower (×{normalised:.2f}{test}){bimodal}{settling}{cores}")
            )
    e_wait, m_wait = waited(expected), waited(measured)
    if e_wait and m_wait:
        wait_ratio = m_wait / e_wait / factor
        if wait_ratio > WAITED_TOLERANCE or wait_ratio < 1 / WAITED_TOLERANCE:
            notes.append(f"time as waited ×{wait_ratio:.2f} (compile, caches, first step)")
            found.append((Outcome.WAITED, None))
    quality = params.QUALITY_METRIC.get(of(expected).cell.task)
    e_q, m_q = (of(expected).metrics.get(quality), of(measured).metrics.get(quality)) if quality else (None, None)
    if e_q is not None and (m_q is None or abs(m_q - e_q) > margin):
        found.append((Outcome.QUALITY, f"{quality} {'missing' if m_q is None else f'{m_q:.3f}'}, expected {e_q:.3f}"))
    outcomes: list[Outcome] = [o for o, _ in found if o != Outcome.WAITED] or [Outcome.OK]
    outcomes += [o for o, _ in found if o == Outcome.WAITED]
    words = "; ".join([w for _, w in found if w] + notes) or "ok"
    return CellVerdict(tuple(outcomes), words, e_time, m_time, ratio, normalised, tolerance, p, m_q)


def overall_factor(reference: Run, measured: JudgedRun, ids: Iterable[str]) -> tuple[float, int]:
    """The median of the steady-state ratios of the comparable ok cells and how many cells it rests on; 1.0 with
    fewer than MIN_OVERALL_CELLS (a subset is then judged by its raw ratios)."""
    ratios = []
    for cell_id in ids:
        expected, got = reference.get(cell_id), measured.get(cell_id)
        if judge_status(expected, got) is None:
            # both are ok records with a positive, finite steady state (judge_status)
            assert expected is not None and got is not None and not isinstance(got, Refused)
            e_time, m_time = steady(expected), steady(got)
            assert e_time and m_time
            ratios.append(m_time / e_time)
    return (statistics.median(ratios) if len(ratios) >= MIN_OVERALL_CELLS else 1.0), len(ratios)


def explained_factor(reference: Run, measured: JudgedRun, ids: Iterable[str]) -> tuple[float, dict[str, float], int]:
    """The part of the run's speed its own calibration explains: the geometric mean of the median reference ÷ run
    GEMM rate and the median reference ÷ run host-copy bandwidth over the comparable cells that recorded them (a
    slower machine has a lower rate: a factor above 1). Returns (factor, {"gemm": …, "bandwidth": …} medians, cells);
    (1.0, {}, 0) where no cell pair recorded a calibration."""
    parts: dict[str, list[float]] = {"gemm": [], "bandwidth": []}
    for cell_id in ids:
        expected, got = reference.get(cell_id), measured.get(cell_id)
        if judge_status(expected, got) is not None:
            continue
        assert expected is not None and got is not None and not isinstance(got, Refused)  # both ok (judge_status)
        for key, e, m in zip(("gemm", "bandwidth"), calibration(expected), calibration(got), strict=False):
            if e and m and e > 0 and m > 0 and math.isfinite(e) and math.isfinite(m):
                parts[key].append(e / m)
    medians = {key: statistics.median(v) for key, v in parts.items() if v}
    if not medians:
        return 1.0, {}, 0
    return math.exp(statistics.mean(math.log(v) for v in medians.values())), medians, max(map(len, parts.values()))


def within(calibrated: float, raw: float) -> float:
    """What the cells are judged with, divided out of each: the calibration's factor `calibrated`, but where it says
    the machine is slower, no more slowness than the cells show overall (`raw`): a run as fast as the reference whose
    calibration says ×1.24 slower would otherwise have every cell judged ×1.24 faster, and a cell ×1.8 slower pass
    at ×1.45; and less its own noise (×CALIBRATION_NOISE, which explains nothing): a calibration lowered ×1.3 with
    every cell would otherwise excuse a cell ×2.0 slower (judged ×1.50). Where it says faster, all of it: a faster
    machine's cells must be faster, which only tightens the check on slower cells. The whole run's own check
    (unexplained = raw ÷ calibrated, ×OVERALL_TOLERANCE) uses the calibration as measured."""
    return min(calibrated / CALIBRATION_NOISE, max(raw, 1.0)) if calibrated > 1 else calibrated


def comparable(expected: RecordLike | None, measured: Judged) -> bool:
    """True where both records are ok and of the same kind (data, parameters, machine class, unit)."""
    record = sound(measured)
    return (
        expected is not None
        and record is not None
        and of(expected).status == record.status == "ok"
        and why_incomparable(expected, record) is None
    )


def compare(
    reference: Run,
    measured: JudgedRun,
    plan: Collection[str] | None,
    tolerance: float = TIME_TOLERANCE,
    margin: float = QUALITY_MARGIN,
    runs: Runs | None = None,
    partial: bool = False,
) -> tuple[list[list[Any]], Tally, int, dict[str, Any]]:
    """Judge every reference cell and every cell the run has; with `partial` (--partial), of the reference's cells
    only those the run planned (`plan`, its plan.json's ids; without one, those it has records of): a run cannot
    leave a cell out of its own plan to leave it unjudged unless the person verifying asks for that by name;
    `runs`: the reference's honest runs (reference_runs; default: `reference` alone), whose samples are pooled.
    Returns (table rows, Counter of outcomes, number of reference cells outside the plan, overall: {"raw",
    "explained", "unexplained", "calibration", "basis", "off", and the reference's pooled samples and between-run
    factors, which `confirm` judges with})."""
    runs = runs or [reference]
    pooled, between = pooled_samples(runs), between_runs(runs)
    wanted = None if not partial else set(plan if plan is not None else measured)
    expected_ids = [i for i in reference if wanted is None or i in wanted]
    ids = expected_ids + sorted(set(measured) - set(expected_ids))
    raw, basis = overall_factor(reference, measured, ids)
    explained, parts, _ = explained_factor(reference, measured, ids)
    noise = 1 / CALIBRATION_NOISE <= explained <= CALIBRATION_NOISE
    calibrated = explained if basis >= MIN_OVERALL_CELLS and not noise else 1.0
    factor = within(calibrated, raw)
    rows: list[list[Any]] = []
    counts = Tally()
    off: dict[str, list[str]] = {"slower": [], "faster": [], "bimodal": [], "unconfirmed": []}
    for cell_id in ids:
        expected, got = reference.get(cell_id), measured.get(cell_id)
        verdict = judge(expected, got, factor, tolerance, margin, evidence(runs, cell_id, got, pooled, between))
        counts.update(verdict.outcomes)
        counts["compared"] += Outcome.NO_REFERENCE not in verdict.outcomes
        for outcome in set(verdict.outcomes) & {Outcome.SLOWER, Outcome.FASTER}:
            off[outcome].append(cell_id)
            if between.get(cell_id, 1.0) > tolerance:
                off["bimodal"].append(cell_id)
        rows.append([cell_id, *verdict.row, verdict.words])
    counts["overall basis"] = basis
    counts["comparable"] = sum(1 for i in ids if comparable(reference.get(i), measured.get(i)))
    overall = {
        "raw": raw,
        "explained": factor,
        "unexplained": raw / calibrated,
        "calibration": parts,
        "basis": basis,
        "calibrated": calibrated,
        "off": off,
        "pooled": pooled,
        "between": between,
    }
    return rows, counts, len(reference) - len(expected_ids), overall


def confirm(
    rows: list[list[Any]],
    counts: Tally,
    overall: dict[str, Any],
    reference: Run,
    second: JudgedRun,
    tolerance: float = TIME_TOLERANCE,
    margin: float = QUALITY_MARGIN,
    runs: Runs | None = None,
    first: JudgedRun | None = None,
) -> list[str]:
    """Judge again, on `second` (a second run's records: {cell id: record}), every cell `compare` found slower or
    faster, with the first run's explained factor. A time verdict stands unless the second run of the cell is
    comparable and within (no time outcome), and a re-run of the first (`first`: the judged run's records;
    evidence.not_a_rerun, against them and the reference's `runs`): then it is "unconfirmed", named in its row and
    the verdict line, and no longer a failure. A regression of the install
    reproduces; a transient of the machine (another tenant on the host's cores) mostly does not. Updates `rows`,
    `counts` and `overall["off"]` in place; returns the unconfirmed cells' ids."""
    runs, pooled, between = runs or [reference], overall["pooled"], overall["between"]
    by_id = {row[0]: row for row in rows}
    for outcome in ("slower", "faster"):
        for cell_id in list(overall["off"][outcome]):
            theirs = [r[cell_id] for r in runs if cell_id in r]
            unfit = checks.not_a_rerun(sound(first.get(cell_id)) if first else None, sound(second.get(cell_id)), theirs)
            if unfit:
                by_id[cell_id][-1] += f"; the second run is no re-run of this one ({unfit}): no confirmation"
                continue
            rerun = second.get(cell_id)
            known = evidence(runs, cell_id, rerun, pooled, between)
            again = judge(reference.get(cell_id), rerun, overall["explained"], tolerance, margin, known)
            ratio = f"×{again.ratio:.2f}" if again.ratio else "no time"
            if {Outcome.SLOWER, Outcome.FASTER} & set(again.outcomes) or judge_status(
                reference.get(cell_id), second.get(cell_id)
            ):
                by_id[cell_id][-1] += f"; a second run: {ratio} ({', '.join(map(str, again.outcomes))})"
                continue
            by_id[cell_id][-1] += (
                f"; not confirmed: {ratio} in a second run (a transient of the machine, not the install)"
            )
            overall["off"][outcome].remove(cell_id)
            if cell_id in overall["off"]["bimodal"]:
                overall["off"]["bimodal"].remove(cell_id)
            counts[outcome] -= 1
            counts["unconfirmed"] += 1
            overall["off"]["unconfirmed"].append(cell_id)
    return overall["off"]["unconfirmed"]


def plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def speed_words(factor: float) -> str:
    return (
        "as fast as"
        if abs(math.log(factor)) < math.log(1.05)
        else (f"{factor:.2f}× slower than" if factor > 1 else f"{1 / factor:.2f}× faster than")
    )


def overall_line(overall: Mapping[str, Any], same_class: bool = True) -> tuple[str, bool]:
    """The run's speed relative to the reference in words, what its calibration explains of it, and whether the
    unexplained rest is itself off (beyond ×OVERALL_TOLERANCE either way on the same machine class)."""
    basis = overall["basis"]
    if basis == 0:
        return "overall: nothing comparable", False
    if basis < MIN_OVERALL_CELLS:
        return (
            f"overall: not estimated from {plural(basis, 'cell')} (at least {MIN_OVERALL_CELLS}); cells are judged "
            "by their raw ratios"
        ), False
    raw, explained, rest = overall["raw"], overall["explained"], overall["unexplained"]
    parts = overall["calibration"]
    line = f"overall: this run is {speed_words(raw)} the reference (median over {plural(basis, 'cell')}); "
    if parts and overall.get("calibrated", explained) == 1.0:
        line += (
            f"its own calibration is within ×{CALIBRATION_NOISE:g} of the reference's ("
            + ", ".join(f"{key} ×{value:.2f}" for key, value in sorted(parts.items()))
            + "): nothing divided out; unexplained ×"
            + f"{rest:.2f}"
        )
    elif parts:
        calibrated = overall.get("calibrated", explained)
        says = ", ".join(
            f"{key} ×{value:.2f} slower" if value >= 1 else f"{key} ×{1 / value:.2f} faster"
            for key, value in sorted(parts.items())
        )
        line += (
            f"its own calibration explains ×{explained:.2f} ({says}), divided out"
            if calibrated <= 1
            else f"its own calibration explains ×{calibrated:.2f} ({says}), ×{explained:.2f} divided out (its own "
            f"×{CALIBRATION_NOISE:g} noise explains nothing)"
            if explained >= calibrated / CALIBRATION_NOISE * (1 - 1e-9)
            else f"its own calibration says ×{calibrated:.2f} ({says}) but the cells show ×{raw:.2f}: cells "
            f"judged with ×{explained:.2f} divided out (a calibration excuses no more slowness than the "
            "cells show)"
        )
        line += f"; unexplained ×{rest:.2f}"
    else:
        line += f"no calibration in the run's records: nothing explained, unexplained ×{rest:.2f}"
    off = same_class and (rest > OVERALL_TOLERANCE or rest < 1 / OVERALL_TOLERANCE)
    if off and rest < 1:
        line += (
            f" — beyond ×{OVERALL_TOLERANCE:g}: the install is faster than this machine's own measured rate "
            "(a clock that stops early, a missing barrier, work that did not run)"
        )
    elif off:
        line += (
            f" — beyond ×{OVERALL_TOLERANCE:g}: the install is slower than this machine's own measured rate "
            "(another load, threads, a debug build, a slower library than the reference's)"
        )
    return line, off


def one_line(
    counts: Mapping[str, int],
    outside: int,
    tolerance: float,
    margin: float,
    overall_off: bool = False,
    off: Mapping[str, list[str]] | None = None,
) -> str:
    """The verdict a person can act on: what is off and how much, or that all is as expected; then what was not
    compared and why."""
    n = counts["compared"]
    off = off or {}
    named = lambda ids: (": " + ", ".join(ids[:6]) + (", …" if len(ids) > 6 else "")) if ids else ""
    notes = []
    if counts["no reference"]:
        notes.append(f"{plural(counts['no reference'], 'cell')} not compared (no reference record)")
    if outside:
        notes.append(f"{plural(outside, 'reference cell')} not in this run's plan, not judged (--partial)")
    if counts["unconfirmed"]:
        notes.append(
            f"{plural(counts['unconfirmed'], 'cell')} off in this run and within in a second run of it: not "
            f"confirmed, a transient of the machine (see each row){named(off.get('unconfirmed'))}"
        )
    if counts["waited"]:
        notes.append(
            f"{plural(counts['waited'], 'cell')} with a time as waited beyond ×{WAITED_TOLERANCE:g} "
            "(compile, caches: a note, not a failure)"
        )
    if n == 0 or (counts["comparable"] == 0 and counts["incomparable"]):
        return (
            "INCOMPARABLE: nothing compared"
            + (
                f"; {plural(counts['incomparable'], 'cell')} incomparable (see each row)"
                if counts["incomparable"]
                else ""
            )
            + "".join(f"; {x}" for x in notes)
        )
    problems = []
    if overall_off:
        problems.append("the whole run is off this machine's own measured rate (see the overall line)")
    if counts["failed"]:
        problems.append(f"{counts['failed']} of {plural(n, 'cell')} failed or timed out (see each log under logs/)")
    if counts["missing"]:
        problems.append(f"{counts['missing']} missing (no record)")
    if counts["refused"]:
        problems.append(f"{counts['refused']} refused as unsound records (see each row)")
    if counts["incomparable"]:
        problems.append(
            f"{counts['incomparable']} the reference has but cannot be compared (another class, task "
            "parameters or timing unit: see each row)"
        )
    if counts["samples missing"]:
        problems.append(f"{counts['samples missing']} with fewer samples than the reference cell")
    if counts["unexpected skip"]:
        problems.append(f"{counts['unexpected skip']} skipped where the reference ran")
    if counts["no time"]:
        problems.append(f"{counts['no time']} ok but without a time (a runner that broke the record contract)")
    if counts["slower"]:
        problems.append(
            f"{counts['slower']} of {plural(n, 'cell')} slower than the reference beyond ×{tolerance:g} "
            f"(only what the calibration explains divided out){named(off.get('slower'))}"
        )
    if counts["faster"]:
        problems.append(
            f"{counts['faster']} of {plural(n, 'cell')} faster than possible, beyond ×{tolerance:g}: check "
            f"these cells' clocks{named(off.get('faster'))}"
        )
    if counts["quality"]:
        problems.append(
            f"{counts['quality']} of {plural(n, 'cell')} with accuracy/AUC off the reference by more than ±{margin:g}"
        )
    if off.get("bimodal"):
        problems.append(
            f"{len(off['bimodal'])} of them in cells whose reference runs already differ beyond "
            f"×{tolerance:g}{named(off['bimodal'])}: bimodal (on a shared VM, the machine's own "
            "transients: docs/verify.md); a second run tells a regression from them (--confirm-run)"
        )
    if problems:
        return "FAIL: " + "; ".join(problems + notes)
    return (
        f"OK: {plural(n, 'cell')} as expected — steady state within ×{tolerance:g} of the reference once what "
        f"this machine's calibration explains is divided out (or within its noise), accuracy/AUC within "
        f"±{margin:g}" + "".join(f"; {x}" for x in notes)
    )


# ---------------------------------------------------------------- which reference


def classes_of(folder: Path) -> Counter[str]:
    """The machine classes of a reference's ok records."""
    found: Counter[str] = Counter()
    for path in sorted(Path(folder).glob("cells/*.json")):
        try:
            record = records.load(path)
        except RecordError:
            continue
        if record.status == "ok":
            found[machine_class(record)] += 1
    return found


def fitting_references(wanted_classes: Collection[str], exclude: Path | None = None) -> list[Path]:
    """The reference folders holding records of any of `wanted_classes`, best first."""
    scored = []
    for folder in sorted(REFERENCES.iterdir()) if REFERENCES.is_dir() else []:
        if folder.is_dir() and folder != exclude:
            hits = sum(n for c, n in classes_of(folder).items() if c in wanted_classes)
            if hits:
                scored.append((hits, folder))
    return [folder for _, folder in sorted(scored, key=lambda x: -x[0])]


def this_machine() -> tuple[str, dict[str, Any]]:
    """This machine's class for a CPU cell (what the demo profile runs), and its facts."""
    facts = sysinfo.cpu_facts()
    return sysinfo.machine_class(facts, "cpu"), facts


def how_to_make_one(machine: str, legacy: Path | None = None) -> str:
    """What to do without a reference of `machine`; `legacy`: a format-1 reference folder of the same machine."""
    older = (
        (
            f"{legacy} is of this machine but was made before machine classes named the CPU generation "
            f"(family/model/stepping): it cannot vouch for this one, so "
        )
        if legacy
        else ""
    )
    return (
        f"{older}make one on this machine with `make reference` (the `reference` profile; it writes "
        f"results/reference/{sysinfo.slug(machine)}), or pass --reference"
    )


def legacy_reference(facts: Iterable[Facts]) -> Path | None:
    """A reference folder of the format-1 class these facts reduce to, or None (shared.sysinfo); `facts`: [(a
    record's system facts, its device, its GPUs)] of ok records."""
    legacy = {sysinfo.legacy_class(system, device, gpus) for system, device, gpus in facts}
    return next(iter(fitting_references({c for c in legacy if sysinfo.class_format(c) == 1})), None)


def why_refused(record: Record, cell_id: str, run_id: str | None) -> str | None:
    """Why a record that passed records.read is still not this run's record of `cell_id`, or None: its cell is
    another than its file name says (a record renamed or swapped to stand in for a cell), it comes from another run
    than the one the run's plan names (a record copied in), or a published figure does not follow from its samples
    (records.inconsistencies: the warm-up split as the rule makes it, min/median/max, throughput, FLOP/s)."""
    try:
        holds = Cell(**record.data["cell"]).id  # as written: a cell block naming no cell is refused here
    except TypeError as e:
        return f"its cell block names no cell ({e})"
    if holds != cell_id:
        return f"holds cell {holds}, not the {cell_id} its file name says"
    if run_id is not None and record.run_id != run_id:
        return f"a record of run {record.run_id}, not of this run ({run_id}): copied in from another run"
    wrong = records.inconsistencies(record.data)
    return f"inconsistent: {'; '.join(wrong)[:600]}" if wrong else None


def read_run(folder: Path) -> dict[str, Record | Refused]:
    """A run folder's records by cell id; a record that fails the checks (scripts/results/records.py, why_refused)
    stands in as a Refused with the reason and fails its cell. VerifyError for a folder that is not a run."""
    if not (folder / "cells").is_dir():
        raise VerifyError(f"{folder} is not a run folder (no cells/); pass one of results/PROFILE-DATE-TIME")
    found: dict[str, Record | Refused] = {}
    for path in sorted(Path(folder).glob("cells/*.json")):
        try:
            found[path.stem] = records.load(path)
        except RecordError as e:
            found[path.stem] = Refused(str(e).replace(f"{path}: ", "", 1))
    # the run's id: its plan's, else (a plan without one) the one most of its records carry
    common = Counter(r.run_id for r in found.values() if isinstance(r, Record)).most_common(1)
    run_id = planned_run(folder) or (common[0][0] if common else None)
    for cell_id, record in found.items():
        why = why_refused(record, cell_id, run_id) if isinstance(record, Record) else None
        if why:
            found[cell_id] = Refused(why)
    return found


def ok_classes(records: JudgedRun) -> set[str]:
    """The machine classes of the ok records among `records` ({cell id: record})."""
    return {r.machine_class for r in map(sound, records.values()) if r and r.status == "ok"}


def ok_facts(records: JudgedRun) -> list[Facts]:
    """[(system facts, device, GPUs)] of the ok records among `records` ({cell id: record}), for legacy_reference."""
    return [(r.system, r.cell.device, r.cell.gpus) for r in map(sound, records.values()) if r and r.status == "ok"]


def run_classes(records: JudgedRun) -> set[str]:
    """The machine classes a run's reference is chosen by: those of its ok records; where none ran ok (a broken
    install: every cell failed, refused or missing), those its other records' facts give, else this machine's. A run
    that is all failures is judged, and fails; it is never 'incomparable'."""
    found = ok_classes(records)
    if not found:
        found = {r.machine_class for r in map(sound, records.values()) if r and r.has_facts}
    return found or {this_machine()[0]}


def latest_run(profile: str) -> Path:
    runs = runs_of(RESULTS, profile)
    if not runs:
        raise VerifyError(f"no run of profile {profile!r} under {RESULTS} to compare")
    return runs[-1]


# The table's columns with their units: the times are the median post-warm-up sample (seconds per training step, or
# per ResNet-50 pass); where a cell was judged at its cores' distance, the reference's is its figure at that distance.
HEADERS = [
    "cell",
    "reference (s/step or pass)",
    "measured (s/step or pass)",
    "ratio (×)",
    "÷ explained (×)",
    "tolerance (×)",
    "rank test p",
    "quality (acc./AUC)",
    "verdict",
]


def class_mismatch(reference: JudgedRun, measured: JudgedRun) -> str | None:
    """Why a reference named on the command line cannot judge a run: none of its ok records is of a class the run's
    are (a CPU run against the H200's), or they were calibrated otherwise (another GEMM size or precision:
    shared/calibration.py's `outdated` differs, so the calibrated judgement would compare unlike figures). None where
    it can."""
    ours, theirs = run_classes(measured), ok_classes(reference)
    if theirs and not ours & theirs and not set(measured) & set(reference):  # shared cells: compare names each one
        return f"the reference holds {', '.join(sorted(theirs))}; the run is {', '.join(sorted(ours))}"
    if theirs and not ours & theirs:
        return None
    differ = set()
    for cell_id, judged in measured.items():
        mine, base = sound(judged), sound(reference.get(cell_id))
        if mine and base and mine.status == base.status == "ok":
            a = outdated(base.facts("calibration"), base.cell.device, base.cell.precision)
            b = outdated(mine.facts("calibration"), mine.cell.device, mine.cell.precision)
            if a != b:
                differ.update(a or b)
    if differ:
        return (
            f"the reference and the run were calibrated differently ({'; '.join(sorted(differ))}): their calibrated "
            "figures do not compare; make the reference again on this machine class (make reference, or make "
            "gpu-check then ./rosetta scripts.results.reference --from RUN)"
        )
    return None


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m scripts.results.verify", description=__doc__.split("\n")[0])
    ap.add_argument("--reference", type=Path, help="a reference run folder (default: the one of this machine class)")
    ap.add_argument("--run", type=Path, help="compare this run folder instead of running the profile")
    ap.add_argument("--profile", default="demo", help="the profile to run when no --run is given")
    ap.add_argument(
        "--confirm-run",
        type=Path,
        metavar="RUN",
        help="a second run folder to confirm time verdicts with (default, where verify runs the profile "
        "itself: it runs the cells it finds slower or faster once more)",
    )
    ap.add_argument(
        "--no-confirm",
        action="store_true",
        help="judge the run alone: no second run of the cells found slower or faster",
    )
    ap.add_argument(
        "--partial",
        action="store_true",
        help="judge only the reference cells the run planned (a run of part of the matrix); without it "
        "a reference cell the run has no record of is missing, and fails",
    )
    ap.add_argument(
        "--time-tolerance",
        type=float,
        default=TIME_TOLERANCE,
        metavar="RATIO",
        help=f"a cell's ratio beyond which it is off; at most (and by default) {TIME_TOLERANCE}",
    )
    ap.add_argument(
        "--quality-margin",
        type=float,
        default=QUALITY_MARGIN,
        metavar="DELTA",
        help=f"largest accepted accuracy/AUC difference; at most (and by default) {QUALITY_MARGIN}",
    )
    args = ap.parse_args(argv)
    if not 1 < args.time_tolerance <= TIME_TOLERANCE or not 0 <= args.quality_margin <= QUALITY_MARGIN:
        ap.error(
            f"--time-tolerance must be above 1 and at most {TIME_TOLERANCE}, --quality-margin 0 to "
            f"{QUALITY_MARGIN}: either may tighten the check, never loosen it"
        )
    try:
        measured = None
        if args.reference is None:
            mine: list[Facts]  # whose facts name a legacy reference: this machine's, or the run's ok records'
            if args.run is None:
                machine, facts = this_machine()
                wanted, mine = {machine}, [(facts, "cpu", 1)]
            else:
                measured = read_run(args.run)
                wanted, mine = run_classes(measured), ok_facts(measured)
            fitting = fitting_references(wanted)
            if not fitting:
                print(
                    f"no reference under {REFERENCES} holds records of {', '.join(sorted(wanted)) or 'this run'}; "
                    f"{how_to_make_one(next(iter(sorted(wanted)), 'this machine'), legacy_reference(mine))}",
                    file=sys.stderr,
                )
                return INCOMPARABLE
            args.reference = fitting[0]
        runs = reference_runs(args.reference)
        reference = runs[0]
        if not reference:
            available = ", ".join(p.name for p in REFERENCES.iterdir()) if REFERENCES.exists() else "none"
            raise VerifyError(f"no reference records under {args.reference}/cells; available: {available}")
        ran_profile = args.run is None
        if ran_profile:
            if start_run(["--profile", args.profile]) == 2:
                return 2  # the run could not start; it said why
            args.run = latest_run(args.profile)
        measured = measured if measured is not None else read_run(args.run)
        mismatch = class_mismatch(reference, measured)
        if mismatch:
            print(f"INCOMPARABLE: {args.run} cannot be judged against {args.reference}: {mismatch}")
            return INCOMPARABLE
        rows, counts, outside, overall = compare(
            reference, measured, planned_ids(args.run), args.time_tolerance, args.quality_margin, runs, args.partial
        )
        off = overall["off"]["slower"] + overall["off"]["faster"]
        if off and not args.no_confirm and (args.confirm_run or ran_profile):
            if args.confirm_run is None:
                print(
                    f"{plural(len(off), 'cell')} off the reference's time: running {'it' if len(off) == 1 else 'them'}"
                    f" once more to confirm ({', '.join(off)})"
                )
                if start_run(["--profile", args.profile, *(x for cell_id in off for x in ("--only", cell_id))]) == 2:
                    return 2
                args.confirm_run = latest_run(args.profile)
            confirm(
                rows,
                counts,
                overall,
                reference,
                read_run(args.confirm_run),
                args.time_tolerance,
                args.quality_margin,
                runs,
                measured,
            )
    except VerifyError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(
        f"reference {args.reference} ({plural(len(runs), 'run')}) vs {args.run}"
        + (f" (cells found off judged again in {args.confirm_run})" if args.confirm_run else "")
    )
    print(
        tabulate(
            rows,
            headers=HEADERS,
            floatfmt=".3g",
            missingval="—",
        )
    )
    line, overall_off = overall_line(overall)
    print(line)
    verdict = one_line(counts, outside, args.time_tolerance, args.quality_margin, overall_off, overall["off"])
    print(verdict)
    if verdict.startswith("INCOMPARABLE"):
        wanted = ok_classes(measured)
        fitting = fitting_references(wanted, exclude=args.reference)
        print(
            "a reference that fits: " + ", ".join(map(str, fitting))
            if fitting
            else how_to_make_one(next(iter(sorted(wanted)), "this machine"), legacy_reference(ok_facts(measured)))
        )
        return INCOMPARABLE
    return 0 if verdict.startswith("OK") else 1


if __name__ == "__main__":
    sys.exit(main())
