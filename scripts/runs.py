"""Which run folders a command means: `latest` (the newest run folder under results/) or the folders named.

    python -m scripts.runs latest               # prints results/demo-20261205-101500 (the newest, any profile)
    python -m scripts.runs results/demo-… …     # prints them back, each checked to be a run folder

The Makefile's RUN= means this everywhere (`make report|verify|submit|site RUN=…`); with nothing to work on it says
so in one line and exits 1.
"""
import sys
from pathlib import Path

from scripts.matrix import ROOT

RESULTS = ROOT / "results"


class NoRun(Exception):
    """Nothing to work on; the message says what to run first."""


def run_folders(results=RESULTS):
    """Every run folder under `results` (a folder with a plan.json or records), newest first."""
    found = [p for p in Path(results).glob("*-*") if p.is_dir() and not p.is_symlink()
             and ((p / "plan.json").is_file() or any((p / "cells").glob("*.json")))]
    return sorted(found, key=lambda p: (p.stat().st_mtime, p.name), reverse=True)


def resolve(names, results=RESULTS):
    if not names or names == ["latest"]:
        runs = run_folders(results)
        if not runs:
            raise NoRun(f"no run folder under {results}: run `make demo` first (or name one with RUN=results/…)")
        return [runs[0]]
    folders = [Path(name) for name in names]
    for folder in folders:
        if not folder.is_dir():
            raise NoRun(f"{folder} is not a folder: name a run folder (RUN=results/PROFILE-DATE-TIME) or RUN=latest")
    return folders


def main(argv=None):
    try:
        print(" ".join(str(p) for p in resolve(list(sys.argv[1:] if argv is None else argv))))
    except NoRun as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
