"""Make the reference records `verify` compares with, on this machine: the `reference` profile, then its records
copied to results/reference/MACHINE-CLASS/ with a README that says what and where.

    python -m scripts.reference                    # run the profile, then copy (make reference)
    python -m scripts.reference --from results/reference-20261204-120000   # copy a finished run only

A reference holds one machine class (shared.sysinfo.machine_class): the records of a run whose ok cells span several
classes are refused, as are runs with failed cells (a reference must be a healthy install) unless --allow-failed.
"""
import argparse
import shutil
import sys
import textwrap
from collections import Counter
from datetime import datetime, timezone
from pathlib import Path

from scripts import report, run, verify
from shared import sysinfo

PROFILE = "reference"


def describe(records, run_dir, classes):
    ok = [r for r in records if r["status"] == "ok"]
    first = ok[0]["system"] if ok else {}
    statuses = Counter(r["status"] for r in records)
    seconds = sum(r["metrics"].get("train_seconds") or 0 for r in ok) + \
        sum(sum((r.get("timing") or {}).get("values") or []) for r in ok if r["cell"]["task"] == "resnet50")
    return textwrap.fill(" ".join([
        f"Reference records of the `{PROFILE}` profile ({len(records)} cells: "
        + ", ".join(f"{n} {s}" for s, n in sorted(statuses.items())) + ") for the machine class",
        f"`{next(iter(classes))}`: {first.get('cpu')} ({', '.join(first.get('cpu_flags') or []) or 'no AVX2'}), "
        f"{first.get('cpu_usable')} usable of {first.get('cpu_count')} logical CPUs, {first.get('memory_gib')} GiB, "
        f"{first.get('os')}.",
        f"Made with `make reference` from run {run_dir.name} on {datetime.now(timezone.utc):%Y-%m-%d} (each record "
        f"names its commit in `git_commit`); {seconds / 60:.1f} minutes of timed work.",
        "Every training cell holds its post-warm-up windows and every ResNet-50 cell at least five passes: "
        "`python -m scripts.verify` picks this folder for runs of the same machine class and judges cells against "
        "these samples (README: \"Verify\"). results.md is the run's merged table."]), width=118, break_on_hyphens=False) + "\n"


def copy(run_dir, allow_failed=False):
    """Copy a finished run into results/reference/CLASS; returns the folder. ValueError when it cannot be one."""
    cells = sorted((run_dir / "cells").glob("*.json"))
    records = [verify.records.read(p) for p in cells]
    if not records:
        raise ValueError(f"{run_dir} holds no records")
    classes = Counter(verify.machine_class(r) for r in records if r["status"] == "ok")
    if len(classes) != 1:
        raise ValueError(f"{run_dir}: a reference holds one machine class; its ok records span "
                         f"{', '.join(classes) or 'none'}")
    broken = [r["cell"] for r in records if r["status"] in ("failed", "timeout")]
    if broken and not allow_failed:
        raise ValueError(f"{run_dir}: {len(broken)} cells failed or timed out; a reference must come from a healthy "
                         "install (fix them, or pass --allow-failed to keep them as failed cells)")
    target = verify.REFERENCES / sysinfo.slug(next(iter(classes)))
    if target.exists():
        shutil.rmtree(target)
    (target / "cells").mkdir(parents=True)
    for path in cells:
        shutil.copyfile(path, target / "cells" / path.name)
    shutil.copyfile(run_dir / "plan.json", target / "plan.json")
    report.write_report(target, out=target / ".report")
    shutil.move(str(target / ".report" / "results.md"), target / "results.md")
    shutil.rmtree(target / ".report")
    (target / "README.md").write_text(describe(records, run_dir, classes))
    return target


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m scripts.reference", description=__doc__.split("\n")[0])
    ap.add_argument("--from", dest="source", type=Path, help="copy this finished run instead of running the profile")
    ap.add_argument("--allow-failed", action="store_true", help="keep failed cells in the reference")
    args = ap.parse_args(argv)
    if args.source is None:
        if run.main(["--profile", PROFILE]) == 2:
            return 2
        args.source = run.runs_of(run.RESULTS, PROFILE)[-1]
    try:
        target = copy(args.source, args.allow_failed)
    except (ValueError, verify.RecordError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    print(f"reference written to {target}; commit it with its README")
    return 0


if __name__ == "__main__":
    sys.exit(main())
