"""Which run folders a command means (`latest`, the newest under results/, or the folders named), and a new run.

A new run is started as its own process for the commands of the results wing that need one (verify, reference).

    python -m scripts.results.runs latest               # prints results/demo-20261205-101500 (the newest, any profile)
    python -m scripts.results.runs results/demo-… …     # prints them back, each checked to be a run folder

The Makefile's RUN= means this everywhere (`make report|verify|submit|site RUN=…`); with nothing to work on it says
so in one line and exits 1.
"""

import re
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from scripts.paths import RESULTS, ROOT


class NoRun(Exception):
    """Nothing to work on; the message says what to run first."""


def run_folders(results: str | Path = RESULTS) -> list[Path]:
    """Every run folder under `results` (a folder with a plan.json or records), newest first."""
    found = [
        p
        for p in Path(results).glob("*-*")
        if p.is_dir() and not p.is_symlink() and ((p / "plan.json").is_file() or any((p / "cells").glob("*.json")))
    ]
    return sorted(found, key=lambda p: (p.stat().st_mtime, p.name), reverse=True)


def resolve(names: Sequence[str | Path] | None, results: str | Path = RESULTS) -> list[Path]:
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


def runs_of(results: str | Path, profile: str) -> list[Path]:
    """The run folders of `profile`, oldest first: PROFILE-YYYYmmdd-HHMMSS with a plan. The date must follow the
    name, so that `demo` never picks up a `demo-full` run."""
    return sorted(
        p
        for p in Path(results).glob(f"{profile}-*")
        if re.fullmatch(rf"{re.escape(profile)}-\d{{8}}-\d{{6}}", p.name) and (p / "plan.json").exists()
    )


def start_run(args: Sequence[str]) -> int:
    """`python -m scripts.run ARGS` in a process of its own, exactly as a user would type it, in the checkout: its exit
    code (2: the run could not start, and said why). verify and reference start their runs this way, so that the
    results wing drives a run without importing the command that makes it (docs/style.md, "The host side in wings")."""
    return subprocess.run([sys.executable, "-m", "scripts.run", *args], cwd=ROOT).returncode


def main(argv: Sequence[str] | None = None) -> int:
    try:
        print(" ".join(str(p) for p in resolve(list(sys.argv[1:] if argv is None else argv))))
    except NoRun as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
