"""Reproduce a community submission here: re-run a few of its ok cells, drawn at random, on a machine of its class and
say which agree with it. The only check of a submission that does not trust the submitter (docs/security.md).

    python -m scripts.reproduce results/community/NAME --cells 3 [--seed S] [--data-root DIR]

A command on top of the wings (docs/style.md): it runs cells (scripts.run's executors) and judges them with verify's
comparison, each cell on its own. The submission is checked first (scripts/results/submission/); a rejected one is
not reproduced. Where runners/ and shared/ here are not the submission's, the commit's own are taken from git.
Exit 0: every re-run cell agrees; 1: some disagree; 2: it could not reproduce (and says why).
"""

import argparse
import json
import os
import random
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

from scripts.launch.executors import LocalExecutor, RunSettings
from scripts.paths import DATA
from scripts.plan import planfile as plans
from scripts.plan.matrix import load
from scripts.results import records, submission
from scripts.results.submission import SubmissionError
from scripts.results.verify import QUALITY_MARGIN, TIME_TOLERANCE, Outcome, judge
from scripts.run import Executor, execute, make_executor
from shared import sysinfo
from shared.record import RecordError


def local_class(record: records.Record) -> str:
    """This machine's class for the device of `record`'s cell."""
    cell = record.cell
    if cell.device == "cpu":
        return sysinfo.machine_class(sysinfo.cpu_facts(), "cpu")
    return sysinfo.machine_class({"gpu_facts": sysinfo.gpu_facts()}, "gpu", cell.gpus)


def reproduce(
    folder: str | Path,
    cells: int,
    executor: Executor | None = None,
    data_root: str | Path | None = None,
    out: str | Path | None = None,
    seed: int | None = None,
    repo: str | Path | None = None,
) -> tuple[int, list[tuple[str, bool, str]]]:
    """Re-run `cells` randomly chosen ok cells of the submission in `folder` on this machine and judge each against
    the submission's record with verify's comparison (no overall factor: each cell on its own). Returns
    (seed, [(cell id, agrees, words)]). SubmissionError where it cannot: a rejected submission, runner code that is
    not the submission's, no ok cell of this machine's class."""
    folder = Path(folder)
    found = submission.findings(folder, repo)
    if found:
        raise SubmissionError(
            f"{folder.name} is rejected by the checker ({len(found)} finding(s)): "
            "only an accepted submission is reproduced; run `check` for why"
        )
    manifest = json.loads((folder / submission.MANIFEST).read_text())
    here = submission.checkout_code_hash(repo)
    if here != manifest["code_hash"] and executor is not None:
        raise SubmissionError(
            f"runners/ and shared/ here (code hash {here}) are not the submission's "
            f"({manifest['code_hash']}, commit {manifest['git_commit'][:12]}): the executor given "
            "would run other code; commit or stash your changes, or check out that commit"
        )
    recs = {Path(rel).stem: r for rel, r in submission.check_records(folder)[0].items()}
    mine = sorted(i for i, r in recs.items() if r.status == "ok" and r.machine_class == local_class(r))
    if not mine:
        classes = ", ".join(manifest["machine"]["machine_classes"])
        raise SubmissionError(
            f"no ok cell of {folder.name} is of this machine's class "
            f"({local_class(next(iter(recs.values())))}); the submission's: {classes}. Reproduce it "
            "on a machine of that class"
        )
    if cells < 1:
        raise SubmissionError("--cells must be 1 or more")
    seed = seed if seed is not None else int.from_bytes(os.urandom(4), "big")
    chosen = sorted(random.Random(seed).sample(mine, min(cells, len(mine))))
    plan_file = plans.read(folder / submission.PLAN)
    picked = tuple(c for c in plan_file.cells if c.id in chosen)
    run_id = f"reproduce-{datetime.now(UTC).strftime('%Y%m%d-%H%M%S')}"
    plan_file = plans.PlanFile(replace(plan_file.plan, cells=tuple(c.cell for c in picked)), run_id, picked)
    out = Path(out or Path(tempfile.mkdtemp(prefix="rosetta-reproduce-")) / run_id)
    plans.write(out / submission.PLAN, plan_file)
    if executor is None:
        executor, _ = make_executor(plan_file.plan, load())
        if here != manifest["code_hash"] and isinstance(executor, LocalExecutor):  # the one with a `root`
            # the runners and shared/ of the submission's commit, from git, in the framework environments here
            code = submission.runner_code_at(manifest["git_commit"], manifest["code_hash"], out.parent / "code", repo)
            executor = replace(executor, root=code)
    execute(
        plan_file.plan,
        executor,
        out,
        RunSettings(run_id, plan_file.plan.repeats, plan_file.plan.timeout_s, Path(data_root or DATA).resolve()),
    )
    results = []
    for cell_id in chosen:
        try:
            measured = records.load(out / "cells" / f"{cell_id}.json")
        except RecordError as e:
            results.append((cell_id, False, f"no sound record here: {e}"))
            continue
        verdict = judge(recs[cell_id], measured, 1.0, TIME_TOLERANCE, QUALITY_MARGIN)
        ratio, limit = verdict.ratio, verdict.tolerance
        # verify's verdict, and no "within its noise" either: a re-run that differs beyond the cell's tolerance does
        # not reproduce it, however few samples the rank test had
        within = ratio is None or limit is None or 1 / limit <= ratio <= limit
        results.append((cell_id, verdict.outcomes[0] == Outcome.OK and within, verdict.words))
    return seed, results


def reproduce_main(folder: str | Path, cells: int, seed: int | None = None, data_root: str | Path | None = None) -> int:
    try:
        seed, results = reproduce(folder, cells, data_root=data_root, seed=seed)
    except SubmissionError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    for cell_id, agrees, words in results:
        print(f"{'AGREES   ' if agrees else 'DISAGREES'} {cell_id}: {words}")
    agree = sum(ok for _, ok, _ in results)
    print(
        f"{Path(folder).name}: {agree} of {len(results)} re-run cells agree with the submission (seed {seed}; "
        f"--seed {seed} re-draws the same cells)"
    )
    return 0 if agree == len(results) else 1


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m scripts.reproduce", description=__doc__.split("\n")[0])
    ap.add_argument("folder", type=Path, help="the submission folder")
    ap.add_argument("--cells", type=int, default=3, help="how many cells to re-run (default 3)")
    ap.add_argument("--seed", type=int, help="the draw's seed (printed by every run)")
    ap.add_argument("--data-root", type=Path, help="folder holding synthetic/ and real/ (default: data/)")
    args = ap.parse_args(argv)
    return reproduce_main(args.folder, args.cells, args.seed, args.data_root)


if __name__ == "__main__":
    sys.exit(main())
