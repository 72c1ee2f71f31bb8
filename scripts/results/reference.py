"""Make the reference records `verify` compares with, on this machine: the `reference` profile, then its records copied
to results/reference/MACHINE-CLASS/ with a README that says what and where.

    python -m scripts.results.reference                    # run the profile, then copy (make reference)
    python -m scripts.results.reference --from results/reference-20261204-120000   # copy a finished run only
    python -m scripts.results.reference --add              # run it again and keep it beside the first (runs/RUN_ID/)
    python -m scripts.results.reference --framework paddle # a new system's cells into the reference (then --add it)

A system added to the matrix joins an existing reference with `--framework ID` (repeat it for several): the reference
profile runs for those frameworks alone, their cells replace theirs in cells/ and plan.json, and the README names the
run and the day; `--add --framework ID` keeps further runs of them under runs/RUN_ID/, as for the whole profile. The
other systems keep the samples they had: a reference extends on the same machine class only.

One run shows a cell's noise within a run (its samples); a healthy install also moves between runs (a CNTK GRU at half
speed in one run of two), which only further runs show: `--add` keeps them under runs/RUN_ID/ and verify pools each
cell's samples over them (scripts/results/verify.py); a cell whose runs differ by more than verify's ×1.5 tolerance is
bimodal, a defect to remove at its cause, never a reason for a wider tolerance.

A reference holds one machine class (shared.sysinfo.machine_class): the records of a run whose ok cells span several
classes are refused, as are runs with failed cells (a reference must be a healthy install) unless --allow-failed.
"""

import argparse
import os
import shutil
import statistics
import sys
import textwrap
from collections import Counter
from collections.abc import Collection, Mapping, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from tabulate import tabulate

from scripts.paths import RESULTS, safe_id
from scripts.plan import planfile as plans
from scripts.results import report, stats, verify
from scripts.results.records import Record
from scripts.results.runs import runs_of, start_run
from shared import sysinfo
from shared.timing import MIN_SAMPLES

PROFILE = "reference"


def generation(system: Mapping[str, Any]) -> str:
    """The CPU generation as the kernel reported it, for the README ('' for a record made before these facts)."""
    if system.get("cpu_family") is None:
        return ""
    return (
        f"{system.get('cpu_vendor') or '?'} family {system['cpu_family']} model {system.get('cpu_model_number')} "
        f"stepping {system.get('cpu_stepping')}; "
    )


def describe(records: list[Record], run_dir: Path, classes: Counter) -> str:
    """The reference's README: what machine, which profile, how much timed work."""
    ok = [r for r in records if r.status == "ok"]
    first = ok[0].system if ok else {}
    statuses = Counter(r.status for r in records)
    profile = plans.planned_profile(run_dir) or PROFILE
    seconds = sum(r.metrics.get("train_seconds") or 0 for r in ok) + sum(
        sum(r.timing.values) for r in ok if r.cell.task == "resnet50"
    )
    machine_class = next(iter(classes))
    gpu = (
        f"{', '.join(first.get('gpus') or [])} (driver {first.get('driver')}) on "
        if machine_class.startswith("gpu:")
        else ""
    )
    how = "`make gpu-check`" if profile == "gpu-check" else "`make reference`"
    return (
        textwrap.fill(
            " ".join(
                [
                    f"Reference records of the `{profile}` profile ({len(records)} cells: "
                    + ", ".join(f"{n} {s}" for s, n in sorted(statuses.items()))
                    + ") for the machine class",
                    f"`{machine_class}`: {gpu}{first.get('cpu')} ({generation(first)}"
                    f"{', '.join(first.get('cpu_flags') or []) or 'no AVX2'}), "
                    f"{first.get('cpu_usable')} usable of {first.get('cpu_count')} logical CPUs, "
                    f"{first.get('memory_gib')} GiB, "
                    f"{first.get('os')}.",
                    f"Made with {how} from run {run_dir.name} on {datetime.now(UTC):%Y-%m-%d} (each record "
                    f"names its commit in `git_commit`); {seconds / 60:.1f} minutes of timed work.",
                    "Every training cell holds its post-warm-up windows and every ResNet-50 cell at least five passes: "
                    "`python -m scripts.results.verify` picks this folder for runs of the same machine class and "
                    "judges cells against "
                    'these samples (README: "Verify"). results.md is the run\'s merged table.',
                ]
            ),
            width=118,
            break_on_hyphens=False,
        )
        + "\n"
    )


def checked(run_dir: Path, allow_failed: bool) -> tuple[list[Path], list[Record], Counter]:
    """(record files, records, machine classes) of a run fit to be a reference. ValueError when it is not."""
    cells = sorted((run_dir / "cells").glob("*.json"))
    try:
        records = [verify.records.load(p) for p in cells]
    except verify.records.RecordError as e:
        raise ValueError(f"{e}; a reference is made only from sound records (run the profile again)") from e
    if not records:
        raise ValueError(f"{run_dir} holds no records")
    classes = Counter(r.machine_class for r in records if r.status == "ok")
    if len(classes) != 1:
        raise ValueError(
            f"{run_dir}: a reference holds one machine class; its ok records span {', '.join(classes) or 'none'}"
        )
    broken = [r.cell for r in records if r.status in ("failed", "timeout")]
    if broken and not allow_failed:
        raise ValueError(
            f"{run_dir}: {len(broken)} cells failed or timed out; a reference must come from a healthy "
            "install (fix them, or pass --allow-failed to keep them as failed cells)"
        )
    return cells, records, classes


def target_for(klass: str) -> Path:
    """results/reference/SLUG for a machine class: refused (ValueError) unless the slug is a non-empty name of the
    safe alphabet that stays a direct child of results/reference (a class of punctuation alone, "?:-.", would name
    results/reference itself, which copy() would then remove whole)."""
    name = sysinfo.slug(klass)
    if not safe_id(name):
        raise ValueError(
            f"machine class {klass!r} gives no usable folder name ({name!r}): its records do not say "
            "what machine ran them; run the reference on a machine whose CPU or GPU they can name"
        )
    target = verify.records.confined(verify.REFERENCES, name)
    if target.parent != verify.REFERENCES.resolve():
        raise ValueError(f"machine class {klass!r} would not name a folder of its own under {verify.REFERENCES}")
    return target


RUNS_MARK = "Further runs, for the noise between runs:"
STEADY_GOAL = 1.25  # a cell's between-run factor this reference aims to stay within (docs/verify.md)


def between_runs_line(target: Path) -> str:
    """The README's paragraph on the reference's further runs and how far its cells move between them."""
    runs = verify.reference_runs(target)
    factors = verify.between_runs(runs)
    if len(runs) < 2 or not factors:
        return ""
    widest = sorted(factors.items(), key=lambda kv: -kv[1])[:3]
    return (
        textwrap.fill(
            f"{RUNS_MARK} runs/{', runs/'.join(p.name for p in sorted((target / 'runs').glob('*')))} ({len(runs)} runs "
            f"in all). Between them a cell's steady state moved by ×{statistics.median(factors.values()):.2f} at the "
            "median and at most by "
            + ", ".join(f"×{f:.2f} ({cell_id})" for cell_id, f in widest)
            + "; verify pools their samples (a cell beyond ×1.5 between runs is bimodal: a defect, not a tolerance).",
            width=118,
            break_on_hyphens=False,
        )
        + "\n\n"
        + between_runs_table(factors, runs)
    )


def between_runs_table(factors: Mapping[str, float], runs: Sequence[Mapping[str, Any]] | None = None) -> str:
    """Every cell's between-run factor (its slowest run's steady state over its fastest's), widest first, with the
    cells beyond STEADY_GOAL counted and marked; with `runs`, also how far apart the cores were in each run and the
    widest factor among runs at one same distance, which verify judges a run's cell against (verify.at_distance).
    A run that measured the distance at its window edges gives its samples' split ("6n3a": 6 near, 3 apart, "1m":
    moved during one); an older one the distance around the whole cell (near, apart, "moved", "?" not measured)."""
    above = [f for f in factors.values() if f > STEADY_GOAL]
    rows, falling, sampled = [], 0, 0
    for cell_id, f in sorted(factors.items(), key=lambda kv: (-kv[1], kv[0])):
        row = [cell_id, f"×{f:.2f}", "above the goal" if f > STEADY_GOAL else ""]
        if runs:
            same = verify.at_one_distance(runs, cell_id)
            records = verify.comparable_runs(runs, cell_id)
            floor = verify.edge_floor(records)
            samples = [verify.samples(r) for r in records]
            fell = [i for i, values in enumerate(samples, 1) if stats.still_falling(values)]
            falling += len(fell)
            sampled += sum(len(values) >= MIN_SAMPLES for values in samples)
            row[2:2] = [
                " ".join(
                    split(r, floor) or where or ("moved" if verify.round_trips(r) else "?")
                    for r, (where, _) in zip(records, verify.run_distances(runs, cell_id), strict=False)
                ),
                f"×{same:.2f}" if same else "",
                ", ".join(map(str, fell)),
            ]
        rows.append(row)
    headers = (
        ["cell", "between runs"]
        + (["cores per run", "at one distance", "still falling in run"] if runs else [])
        + [f"beyond ×{STEADY_GOAL}"]
    )
    legend = (
        textwrap.fill(
            "Cores per run: each run's samples by the cores' distance at their two edges (\"6n3a\": 6 near, 3 apart, "
            '"1m": the cores moved during 1), or, for a runner that measures no window edges, the distance around the '
            "whole cell (near, apart, moved during it). At one distance: the widest factor between runs compared near "
            "with near and apart with apart, as verify judges a cell. Still falling in run: the runs (1 the "
            "reference's "
            f"first) whose samples still fell while timed (a one-sided Kendall test, p < {stats.FALLING_ALPHA:g}: not "
            f"yet steady), {falling} of the {sampled} cell-runs with {MIN_SAMPLES} or more samples.",
            width=118,
            break_on_hyphens=False,
        )
        + "\n\n"
        if runs
        else ""
    )
    return (
        f"Each cell's factor between runs ({len(factors) - len(above)} of {len(factors)} within the goal of "
        f"×{STEADY_GOAL}):\n\n"
        + legend
        + tabulate(rows, headers=headers, tablefmt="github", disable_numparse=True)
        + "\n"
    )


def split(record: Record, floor: float | None) -> str:
    """ "6n3a1m": how many of the record's samples ran with the cores near, apart, or moving (verify.sample_distances),
    or "" where it measured no window edges."""
    counts = Counter(where or "moved" for where in verify.sample_distances(record, floor))
    return "".join(f"{counts[w]}{w[0]}" for w in ("near", "apart", "moved") if counts[w])


def add(run_dir: Path, allow_failed: bool = False) -> Path:
    """Keep a further run of an existing reference's machine class under its runs/RUN_ID/; returns the folder."""
    cells, records, classes = checked(run_dir, allow_failed)
    target = target_for(next(iter(classes)))
    if not (target / "cells").is_dir():
        raise ValueError(f"no reference of {next(iter(classes))} to add to; make one first (make reference)")
    if {r.run_id for r in records} & {r.run_id for r in verify.records_by_id(target).values()}:
        raise ValueError(f"{run_dir} is the reference's own first run")
    extra = verify.records.confined(target, "runs", sysinfo.safe_name(run_dir.name))
    if extra.exists():
        shutil.rmtree(extra)
    extra.mkdir(parents=True)
    for path in cells:
        copy_plain(path, extra / path.name)
    readme = target / "README.md"
    kept = readme.read_text().split(RUNS_MARK)[0].rstrip("\n") if readme.exists() else ""
    readme.write_text(kept + "\n" + between_runs_line(target))
    return target


EXTENDED_MARK = "Cells added since:"


def extend(run_dir: Path, frameworks: Collection[str], allow_failed: bool = False) -> Path:
    """Fold the cells of `frameworks` from `run_dir` into the existing reference of its machine class: their records
    replace theirs in cells/, their planned cells theirs in plan.json, and the README names the run; returns the
    folder. ValueError where there is no reference of that class, or the run holds a cell of another framework (it
    would replace a system's samples that nobody asked to replace) or none of one asked for."""
    cells, records, classes = checked(run_dir, allow_failed)
    klass = next(iter(classes))
    target = target_for(klass)
    if not (target / "cells").is_dir():
        raise ValueError(f"no reference of {klass} to extend; make one first (make reference)")
    held = {r.cell.framework for r in records}
    if held - set(frameworks) or set(frameworks) - held:
        raise ValueError(
            f"{run_dir} holds cells of {', '.join(sorted(held))}, not of exactly {', '.join(sorted(frameworks))}: "
            "extend a reference from a run of the new frameworks alone (--framework ID)"
        )
    theirs = {r.run_id for r in verify.records_by_id(target).values()}
    if {r.run_id for r in records} & theirs:
        raise ValueError(f"{run_dir} is already in the reference")
    plan, extra = plans.read(target / "plan.json"), plans.read(run_dir / "plan.json")
    if (extra.plan.profile, extra.plan.repeats) != (plan.plan.profile, plan.plan.repeats):
        raise ValueError(f"{run_dir} ran profile {extra.plan.profile} with other settings than the reference's")
    for path in (target / "cells").glob("*.json"):
        if verify.records.load(path).cell.framework in held:
            path.unlink()
    for path in cells:
        copy_plain(path, target / "cells" / path.name)
    kept = tuple(c for c in plan.cells if c.cell.framework not in held) + extra.cells
    plans.write(
        target / "plan.json", replace(plan, cells=kept, plan=replace(plan.plan, cells=tuple(c.cell for c in kept)))
    )
    write_tables(target)
    readme = (target / "README.md").read_text().split(RUNS_MARK)[0].rstrip("\n")
    head, _, added = readme.partition(EXTENDED_MARK)
    lines = [line for line in added.strip().splitlines() if not any(f"`{f}`" in line for f in held)]
    lines.append(
        f"- {', '.join(f'`{f}`' for f in sorted(held))}: {len(records)} cells from run {run_dir.name} on "
        f"{datetime.now(UTC):%Y-%m-%d} (same machine class; the other systems keep their samples)"
    )
    readme = head.rstrip("\n") + f"\n\n{EXTENDED_MARK}\n" + "\n".join(lines) + "\n"
    (target / "README.md").write_text(readme + "\n" + between_runs_line(target))
    return target


def copy_plain(source: Path, target: Path) -> None:
    """Copy `source` as a plain file only (records.read_plain: never through a link, from a FIFO or a device, and at
    most 8 MiB), writing the bytes read; ValueError naming it otherwise: a link to a secret would put the secret's
    text under results/reference, which is committed."""
    try:
        data = verify.records.read_plain(source)
    except verify.RecordError as e:
        raise ValueError(f"{e}; a reference copies plain files only") from None
    verify.records.write_replacing(target, "", binary=data)


def copy(run_dir: Path, allow_failed: bool = False) -> Path:
    """Copy a finished run into results/reference/CLASS; returns the folder. ValueError when it cannot be one, a
    file of the run that is not a plain file included (copy_plain), checked before anything is removed."""
    cells, records, classes = checked(run_dir, allow_failed)
    target = target_for(next(iter(classes)))
    for name in ("plan.json", "barriers.json", "gpu-check.json"):
        why = (
            verify.records.not_plain(run_dir / name) if name == "plan.json" or os.path.lexists(run_dir / name) else None
        )
        if why:
            raise ValueError(f"{run_dir / name}: {why}; a reference copies plain files only")
    if target.exists():
        shutil.rmtree(target)
    (target / "cells").mkdir(parents=True)
    for path in cells:
        copy_plain(path, target / "cells" / path.name)
    copy_plain(run_dir / "plan.json", target / "plan.json")
    for name in ("barriers.json", "gpu-check.json"):  # make gpu-check's barrier self-tests and summary
        if os.path.lexists(run_dir / name):
            copy_plain(run_dir / name, target / name)
    write_tables(target)
    (target / "README.md").write_text(describe(records, run_dir, classes))
    return target


def write_tables(target: Path) -> None:
    """The reference's merged tables, CSV and plot (results.md, .csv, .png) beside its records."""
    report.write_report(target, out=target / ".report")
    for name in ("results.md", "results.csv", "results.png"):
        shutil.move(str(target / ".report" / name), target / name)
    shutil.rmtree(target / ".report")


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m scripts.results.reference", description=__doc__.split("\n")[0])
    ap.add_argument("--from", dest="source", type=Path, help="copy this finished run instead of running the profile")
    ap.add_argument("--allow-failed", action="store_true", help="keep failed cells in the reference")
    ap.add_argument(
        "--add",
        action="store_true",
        help="keep the run beside the reference's first (runs/RUN_ID/): how far cells move between runs",
    )
    ap.add_argument(
        "--framework",
        action="append",
        metavar="ID",
        help="a system new to the matrix: run (or take from --from) its cells alone and fold them into the reference "
        "(repeat it for several; with --add: a further run of them)",
    )
    args = ap.parse_args(argv)
    if args.source is None:
        if start_run(["--profile", PROFILE] + [f"--framework={f}" for f in args.framework or ()]) == 2:
            return 2
        args.source = runs_of(RESULTS, PROFILE)[-1]
    try:
        if args.framework and not args.add:
            target = extend(args.source, args.framework, args.allow_failed)
        else:
            target = (add if args.add else copy)(args.source, args.allow_failed)
    except (ValueError, verify.RecordError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    print(f"reference written to {target}; commit it with its README")
    return 0


if __name__ == "__main__":
    sys.exit(main())
