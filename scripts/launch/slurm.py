"""Run a plan on a Slurm cluster as job arrays, one array task per cell, and a merge job after them.

    python -m scripts.plan --profile full --out plan.json
    python -m scripts.launch.slurm plan.json --parallel 8                        # local venvs on the nodes
    python -m scripts.launch.slurm plan.json --runtime pyxis --image-prefix registry.example.org#   # images via enroot
    python -m scripts.launch.slurm plan.json --runtime apptainer --image-prefix /shared/sif   # images as .sif files

Slurm does the scheduling: an array's `--gres=gpu:N` gives each task its own GPUs (CUDA_VISIBLE_DEVICES), `%K` caps how
many run at once, and the merge job (`--dependency=afterany`) runs when every task has ended, failed ones too. Cells are
grouped by GPU count (one array per count, since an array has one resource request); the array index is the cell's index
in the plan file, which `scripts.cell` looks up from SLURM_ARRAY_TASK_ID. Every cell holds its GPUs alone, so a CPU
profile (the smoke test) also takes one GPU slot per cell, which keeps parallel cells apart.

Each task writes its record under RUN/slurm/JOB_TASK/ (so a resubmitted cell never overwrites the attempt before it);
the merge job gathers them into RUN/cells/ with `scripts.results.merge` and writes the report. The checkout, the run
folder and the data root must be on a file system every node sees.
"""

import argparse
import math
import os
import re
import shlex
import subprocess
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path

from scripts.launch.prepare import check_data, local_environments
from scripts.paths import DATA, RESULTS, ROOT
from scripts.plan import planfile as plans
from scripts.plan.matrix import MatrixError, load
from shared import datasets

RUNTIMES = ("local", "pyxis", "apptainer")
SLACK_MINUTES = 10  # a task's Slurm time limit over the plan's cell timeout: the host records the timeout itself


class SlurmError(Exception):
    """A plan this cluster cannot take, or a Slurm that cannot be reached; says what to change. Nothing submitted."""


def slurm(*argv: str) -> str:
    try:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    except FileNotFoundError:
        raise SlurmError(f"`{argv[0]}` not found: run this on a Slurm login node (slurm-client installed)") from None
    if out.returncode:
        raise SlurmError(f"`{' '.join(argv)}` failed: {out.stderr.strip() or out.stdout.strip()}")
    return out.stdout


def node_gpus(sinfo_gres: str) -> int:
    """The most GPUs one node offers, from `sinfo -h -o %G` lines such as 'gpu:2', 'gpu:h100:8(S:0-1)', '(null)'."""
    counts = [int(m) for line in sinfo_gres.splitlines() for m in re.findall(r"gpu(?::[\w.-]+)?:(\d+)", line)]
    return max(counts, default=0)


def array_spec(indices: Sequence[int], parallel: int) -> str:
    """'0-3,7,9-10%K': the indices as ranges, at most `parallel` tasks at once."""
    runs, start = [], None
    for i, index in enumerate(indices):
        start = index if start is None else start
        if i + 1 == len(indices) or indices[i + 1] != index + 1:
            runs.append(f"{start}-{index}" if index > start else str(start))
            start = None
    return ",".join(runs) + f"%{parallel}"


def check_cluster(plan_file: plans.PlanFile, max_array_size: int, gpus_per_node: int) -> None:
    """Refuse, before submitting anything, what this cluster cannot run."""
    if gpus_per_node == 0:
        raise SlurmError(
            "this Slurm offers no GPUs (`sinfo -o %G` lists no gpu gres): every cell takes its GPUs "
            "through --gres=gpu:N; submit to a partition with GPU nodes (--partition), or configure "
            "GresTypes=gpu and the nodes' Gres"
        )
    wanted = max(c.cell.gpus for c in plan_file.cells)
    if wanted > gpus_per_node:
        big = [c.id for c in plan_file.cells if c.cell.gpus > gpus_per_node]
        raise SlurmError(
            f"{len(big)} cell(s) need {wanted} GPUs on one node, the largest node here has "
            f"{gpus_per_node} (e.g. {big[0]}): drop those GPU counts from the profile's `gpus`"
        )
    if len(plan_file.cells) > max_array_size:
        raise SlurmError(
            f"the plan has {len(plan_file.cells)} cells, the cluster's MaxArraySize is {max_array_size} "
            f"(array indices are the plan's cell indices): split the profile, or raise MaxArraySize"
        )


# An extra #SBATCH option: --NAME or --NAME=VALUE, the value without spaces, quotes, newlines, $ or backquotes (a
# newline would start a shell command in the batch script; a space, a second option).
SBATCH_OPTION = re.compile(r"--[a-z][a-z0-9-]*(=[A-Za-z0-9_.,:@%/+=-]+)?")
SAFE_PATH = re.compile(r"[A-Za-z0-9_./+@%,:=-]+")


def check_sbatch(extra: Iterable[str], run_dir: str | Path) -> None:
    """SlurmError unless every extra option is one plain #SBATCH option and the run folder a plain path."""
    for option in extra:
        if not SBATCH_OPTION.fullmatch(option):
            raise SlurmError(
                f"--sbatch {option!r}: give one #SBATCH option as --NAME or --NAME=VALUE (letters, "
                "digits and ._,:@%/+=- only; no spaces, quotes, newlines or $), e.g. --partition=gpu"
            )
    if not SAFE_PATH.fullmatch(str(run_dir)):
        raise SlurmError(
            f"run folder {str(run_dir)!r}: its path goes into #SBATCH lines; use letters, digits and "
            "._/+@%,:=- only (no spaces, newlines or quotes)"
        )


def task_script(
    plan_path: str | Path, run_dir: str | Path, runtime: str, image_prefix: str, data_root: str | Path
) -> str:
    """The body every array task runs: one cell of the plan, picked by SLURM_ARRAY_TASK_ID, its record in a folder of
    its own (RUN/slurm/JOB_TASK)."""
    cmd = [sys.executable, "-m", "scripts.cell", str(plan_path), "--runtime", runtime, "--data-root", str(data_root)]
    cmd += ["--image-prefix", image_prefix] if image_prefix else []
    task_dir = shlex.quote(f"{run_dir}/slurm") + '/"${SLURM_ARRAY_JOB_ID}_${SLURM_ARRAY_TASK_ID}"'
    return f"cd {shlex.quote(str(ROOT))}\nexec {shlex.join(cmd)} --run-dir {task_dir}\n"


def sbatch_file(path: Path, options: Iterable[str], body: str) -> Path:
    """Write a batch script readable and runnable by its owner only (0700): it runs with the owner's rights."""
    lines = ["#!/bin/bash"] + [f"#SBATCH {o}" for o in options] + ["set -euo pipefail", body]
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.exists():
        path.unlink()
    with os.fdopen(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o700), "w") as f:
        f.write("\n".join(lines))
    return path


def submit(
    plan_file: plans.PlanFile,
    plan_path: str | Path,
    run_dir: str | Path,
    *,
    parallel: int,
    runtime: str,
    image_prefix: str,
    data_root: str | Path,
    extra: Sequence[str],
    dry_run: bool = False,
) -> tuple[list[str], str]:
    """Write the array scripts and the merge script under RUN/slurm/ and submit them; returns (array ids, merge id).
    The plan's ids are checked first: each becomes part of an #SBATCH line; so are the extra options and the run
    folder, which become #SBATCH lines and shell words too."""
    plans.check_ids(plan_file)
    # resolved first, then checked: what goes into the #SBATCH lines is the resolved path, and a link named plainly
    # may point at a folder whose name holds a newline (a new shell line when the script runs)
    plan_path, run_dir = Path(plan_path).resolve(), Path(run_dir).resolve()
    check_sbatch(extra, run_dir)
    minutes = math.ceil(plan_file.plan.timeout_s / 60) + SLACK_MINUTES
    groups: dict[int, list[int]] = {}
    for index, planned in enumerate(plan_file.cells):
        groups.setdefault(planned.cell.gpus, []).append(index)
    jobs = []
    for gpus, indices in sorted(groups.items()):
        script = sbatch_file(
            run_dir / "slurm" / f"cells-{gpus}gpu.sbatch",
            [
                f"--job-name=rosetta-{plan_file.run_id}-{gpus}gpu",
                f"--array={array_spec(indices, parallel)}",
                f"--gres=gpu:{gpus}",
                f"--time={minutes}",
                "--ntasks=1",
                f"--output={run_dir}/slurm/%A_%a.out",
                *extra,
            ],
            task_script(plan_path, run_dir, runtime, image_prefix, data_root),
        )
        jobs.append("DRY" if dry_run else slurm("sbatch", "--parsable", str(script)).strip().split(";")[0])
    merge = sbatch_file(
        run_dir / "slurm" / "merge.sbatch",
        [
            f"--job-name=rosetta-{plan_file.run_id}-merge",
            f"--dependency=afterany:{':'.join(jobs)}",
            "--time=30",
            "--ntasks=1",
            f"--output={run_dir}/slurm/merge.out",
            *extra,
        ],
        f"cd {shlex.quote(str(ROOT))}\nexec {shlex.quote(sys.executable)} -m scripts.results.merge "
        f"{shlex.quote(str(run_dir))} "
        f"{shlex.quote(str(run_dir / 'slurm'))} --plan {shlex.quote(str(plan_path))}\n",
    )
    merge_id = "DRY" if dry_run else slurm("sbatch", "--parsable", str(merge)).strip().split(";")[0]
    return jobs, merge_id


def job_state(job_id: str | int) -> str:
    """COMPLETED, FAILED, PENDING, … from `scontrol show job` (sacct needs an accounting database)."""
    found = re.search(r"JobState=(\w+)", slurm("scontrol", "show", "job", str(job_id)))
    return found.group(1) if found else "UNKNOWN"


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m scripts.launch.slurm", description=__doc__.split("\n")[0])
    ap.add_argument("plan", type=Path, help="the plan file (python -m scripts.plan)")
    ap.add_argument("--run-dir", type=Path, help="the run folder on a shared file system (default: results/RUN_ID)")
    ap.add_argument("--parallel", type=int, default=4, help="array tasks running at once (%%K), per GPU count")
    ap.add_argument(
        "--runtime",
        choices=RUNTIMES,
        default="local",
        help="local: the framework venvs (built here first); pyxis/apptainer: the images",
    )
    ap.add_argument("--image-prefix", default="", help="pyxis: registry prefix; apptainer: folder of .sif files")
    ap.add_argument("--data-root", type=Path, default=DATA, help="folder holding synthetic/ and real/")
    ap.add_argument(
        "--sbatch",
        action="append",
        default=[],
        metavar="OPTION",
        help="an extra #SBATCH option for every job, e.g. --sbatch=--partition=gpu (repeatable)",
    )
    ap.add_argument("--dry-run", action="store_true", help="write the scripts, submit nothing")
    args = ap.parse_args(argv)
    try:
        plan_file = plans.check_against(plans.read(args.plan), load(), str(args.plan))
        run_dir = (args.run_dir or RESULTS / plan_file.run_id).resolve()
        check_sbatch(args.sbatch, run_dir)  # before anything is made there
        if args.parallel < 1:
            raise SlurmError(f"--parallel {args.parallel}: run at least one task at a time")
        if not args.dry_run:
            config = slurm("scontrol", "show", "config")
            found = re.search(r"MaxArraySize\s*=\s*(\d+)", config)
            assert found, "`scontrol show config` names MaxArraySize"
            max_array = int(found.group(1)) - 1  # indices < MaxArraySize
            partition = [o.split("=", 1)[1] for o in args.sbatch if o.startswith("--partition=")]
            check_cluster(
                plan_file,
                max_array + 1,
                node_gpus(slurm("sinfo", "-h", "-o", "%G", *(["-p", partition[0]] if partition else []))),
            )
        if args.runtime == "local":  # build the venvs once here, not concurrently in every task
            _, unavailable = local_environments(plan_file.plan, load())
            for fid, (status, reason) in unavailable.items():
                print(f"{fid}: no environment, its cells will be recorded {status}: {reason}", file=sys.stderr)
        check_data(plan_file.plan, args.data_root)  # synthetic data made once here, real data checked, before any task
        run_dir.mkdir(parents=True, exist_ok=True)
        plans.write(run_dir / "plan.json", plan_file)
        jobs, merge_id = submit(
            plan_file,
            run_dir / "plan.json",
            run_dir,
            parallel=args.parallel,
            runtime=args.runtime,
            image_prefix=args.image_prefix,
            data_root=Path(args.data_root).resolve(),
            extra=args.sbatch,
            dry_run=args.dry_run,
        )
    except (plans.PlanError, SlurmError, MatrixError, datasets.DataError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    what = "written (dry run)" if args.dry_run else f"submitted: arrays {', '.join(jobs)}, merge {merge_id}"
    print(
        f"{run_dir}/slurm: {len(plan_file.cells)} cells {what}\n"
        f"watch: squeue --name=rosetta-{plan_file.run_id}-merge   report: {run_dir}/results.md"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
