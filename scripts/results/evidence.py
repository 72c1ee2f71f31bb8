"""What verify may believe of a record beyond its samples: where its cores were (shared/placement.py's round trips,
around its work and at every window edge) and whether a second run is one (docs/verify.md, "Evidence verify checks").

A record's round trips excuse its samples (each is judged against the reference's at its cores' distance), so a
record's author who wants an OK could write them: every edge "apart", one edge of 100 ns to lower the "near" line.
Here they are checked first. A round trip outside what the probe can read (placement.FLOOR_NS to CEILING_NS), window
edges that every one say "apart" while the probe before and after the work says "near", or edges without that probe
to check them against, are a finding: the cell is then judged as if its cores had been near (its samples as they are
against the reference's near ones, where it has some; else against every pooled sample), and its row says why.
"Near" and "apart" are drawn from the reference's records alone, never from the record judged.

A second run (`--confirm-run`) clears a time verdict, so it must be one: made after the run judged, by the same code,
under a run id of its own (neither the judged run's nor the reference's), with samples that are not a copy of the
judged run's or the reference's, nor one of them scaled.
"""

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from scripts.results import records
from scripts.results.records import Record
from shared.placement import CEILING_NS, FLOOR_NS

APART = 1.4  # a round trip beyond this × the cell's lowest is its cores apart (shared/placement.py)
SCALED_COPY = 1e-9  # samples whose ratios to another record's sorted samples all agree within this are a copy

RecordLike = Record | Mapping[str, Any]


def of(record: RecordLike) -> Record:
    return Record.of(record)


def number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def round_trips(record: RecordLike | None) -> list[float]:
    """The round trips between the cell's first two cores just before and after its work (ns; shared/placement.py)."""
    where = of(record).facts("placement") if record is not None else {}
    return [v for v in (where.get("before_ns"), where.get("after_ns")) if isinstance(v, (int, float))]


def floor_of(records: Iterable[RecordLike]) -> float | None:
    """The lowest round trip the records of one cell measured (one environment, one interpreter: shared/placement.py
    compares round trips only within one), or None."""
    trips = [t for r in records for t in round_trips(r) if t > 0 and math.isfinite(t)]
    return min(trips) if trips else None


def side(trip: float, floor: float) -> str:
    """Where one round trip puts the cores, relative to `floor` (the reference's lowest): "apart" beyond ×APART of
    it, "nearer" below ÷APART of it (nearer than the reference ever saw them: a reference of runs all apart, whose
    floor is their apart), else "near"."""
    return "apart" if trip > APART * floor else "nearer" if trip * APART < floor else "near"


def distance(record: RecordLike, floor: float | None) -> str | None:
    """Where both round trips around the record's work put its cores (`side`, relative to `floor`); None where they
    disagree (the host moved the cores during the cell) or were not measured."""
    trips = round_trips(record)
    if len(trips) < 2 or not floor:
        return None
    where = {side(t, floor) for t in trips}
    return where.pop() if len(where) == 1 else None


def edges(record: RecordLike | None) -> list[float | None]:
    """The round trips measured at the edges of the record's samples, outside the clock (timing.round_trips_ns:
    one per edge of the windows or passes its timing block lists, shared/timing.py): len(samples) + 1 values, or []
    where they were not measured or do not fit."""
    if record is None:
        return []
    timing = of(record).timing
    trips, count = timing.round_trips_ns, len(timing.samples)
    if not count or len(trips) != count + len(timing.warmup_windows) + 1:
        return []
    return [t if number(t) and math.isfinite(t) and t > 0 else None for t in trips[-(count + 1) :]]


def edge_floor(records: Iterable[RecordLike]) -> float | None:
    """The lowest round trip measured at the window edges of the records of one cell (edges), or None: floor_of's
    twin for the edges, which the probe between windows measures its own way (shared/placement.py)."""
    return min((t for r in records for t in edges(r) if t), default=None)


def sample_distances(record: RecordLike, floor: float | None) -> list[str | None]:
    """Where the cores were while each sample of the record was timed: where the round trips at both its edges say
    the same (`side`, relative to `floor`, edge_floor of the reference's records), else None; [] where the record
    measured no edges."""
    if not floor:
        return []
    where = [None if t is None else side(t, floor) for t in edges(record)]
    return [a if a == b else None for a, b in zip(where, where[1:], strict=False)]


def ns(value: float) -> str:
    return f"{value:.0f} ns" if abs(value) < 1e9 else "beyond 10⁹ ns"


def round_trip_finding(record: RecordLike, reference: Sequence[RecordLike]) -> str | None:
    """Why the record's round trips are no evidence of where its cores were, or None: one outside what the probe can
    read (placement.FLOOR_NS to CEILING_NS); window edges without the probe before and after its work; every edge
    "apart" while that probe says "near" at both ends, "near" and "apart" relative to the lowest round trips of the
    `reference`'s records of the cell (never the record's own)."""
    measured = of(record)
    written = [t for t in measured.timing.round_trips_ns if number(t)] + round_trips(measured)
    outside = [t for t in written if not (FLOOR_NS <= t <= CEILING_NS and math.isfinite(t))]
    if outside:
        return (
            f"a round trip of {ns(outside[0])}, outside what the probe can read ({FLOOR_NS:g}–{CEILING_NS:g} ns, "
            "shared/placement.py)"
        )
    sides = edges(measured)
    if not sides:
        return None
    probe = round_trips(measured)
    if len(probe) < 2:
        return "round trips at its window edges without the probe before and after its work to check them against"
    edge_line, probe_line = edge_floor(reference), floor_of(reference)
    if not edge_line or not probe_line:
        return None
    if all(t and t > APART * edge_line for t in sides) and all(t <= APART * probe_line for t in probe):
        return (
            f"every window edge says its cores were apart ({ns(min(t for t in sides if t))} or more) while the "
            f"probe before and after its work says near ({'→'.join(ns(t) for t in probe)})"
        )
    return None


def not_a_rerun(
    first: RecordLike | None, second: RecordLike | None, reference: Iterable[RecordLike] = ()
) -> str | None:
    """Why `second` cannot confirm or clear `first` (two records of one cell), or None: a second run is one made
    after the first ended, by the same code, under a run id of its own (not the first's, not one of the `reference`
    records'), with samples of its own (none equal to one of the first's or the reference's, and not all of one of
    theirs × one factor). An earlier run, the reference's own records, a run of another commit (an older, faster
    install) or a copy with its dates rewritten would clear a regression it never saw."""
    if first is None or second is None:
        return None
    first, second = of(first), of(second)
    if records.moment(second.started_at, "started_at") < records.moment(first.finished_at, "finished_at"):
        return f"it started {second.started_at}, before the run judged ended ({first.finished_at})"
    commits = first.git_commit, second.git_commit
    if None not in commits and commits[0] != commits[1]:
        return f"it ran commit {commits[1]}, the run judged {commits[0]}"
    others = [("the run judged", first)] + [("the reference", of(r)) for r in reference]
    for whose, other in others:
        if second.run_id is not None and second.run_id == other.run_id:
            return f"its run id {second.run_id} is {whose}'s"
    mine = sorted(second.timing.samples)
    for whose, other in others:
        theirs = sorted(other.timing.samples)
        if set(mine) & set(theirs):
            return f"a sample of {min(set(mine) & set(theirs)):.6g} s equals one of {whose}'s: a copy"
        if mine and len(mine) == len(theirs) and all(t > 0 for t in theirs):
            ratios = [m / t for m, t in zip(mine, theirs, strict=True)]
            if max(ratios) - min(ratios) <= SCALED_COPY * max(ratios):
                return f"its samples are {whose}'s ×{ratios[0]:.3g}: a copy"
    return None
