"""Run one cell of a plan file: what a GitHub Actions job, a Slurm array task or a Kubernetes pod does.

    python -m scripts.cell plan.json --cell pytorch-cnn-cpu-fp32-1cpu     # by id (GitHub Actions)
    python -m scripts.cell plan.json                                      # by SLURM_ARRAY_TASK_ID (Slurm)
    python -m scripts.cell plan.json --index 3 --runtime pyxis            # in the cell's image, through pyxis

The cell runs exactly as in `scripts.run` (same executor, same timeout, the host writes the record when the runner could
not) and leaves RUN_DIR/cells/ID.json and RUN_DIR/logs/ID.log; `scripts.results.merge` gathers them from every host. The
record says which host ran it (ROSETTA_HOST, default this machine's name) and on which GPUs (the CUDA_VISIBLE_DEVICES
the scheduler gave the job). Exit status: 0 for ok or skipped, 1 for failed or timeout.
"""

import argparse
import os
import platform
import sys
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from scripts.launch import preflight
from scripts.launch.compose import ComposeExecutor, wanted_hashes
from scripts.launch.executors import ExecutorError, LocalExecutor, RunSettings, SlurmContainerExecutor, visible_gpus
from scripts.launch.prepare import check_data, local_environments
from scripts.paths import DATA, RESULTS, ROOT
from scripts.plan import planfile as plans
from scripts.plan.matrix import Cell, MatrixError, Plan, load
from scripts.run import Executor, RunError, describe, run_cell
from shared import datasets

INDEX_VARIABLES = ("SLURM_ARRAY_TASK_ID", "JOB_COMPLETION_INDEX")  # Slurm job arrays, Kubernetes Indexed Jobs
RUNTIMES = ("plan", "local", "compose", "pyxis", "apptainer")


def index_from_environment() -> int | None:
    for name in INDEX_VARIABLES:
        if os.environ.get(name, "").isdigit():
            return int(os.environ[name])
    return None


def devices_of(cell: Cell) -> tuple[str, ...]:
    """The GPUs this cell runs on: those the scheduler gave the job (CUDA_VISIBLE_DEVICES), else the first free ones
    nvidia-smi lists; () for a CPU cell, which still runs under whatever the scheduler set."""
    if cell.device != "gpu":
        return ()
    given = os.environ.get("CUDA_VISIBLE_DEVICES", "")
    return tuple(filter(None, given.split(","))) if given else visible_gpus()[: cell.gpus]


def one_cell(plan_file: plans.PlanFile, planned: plans.PlannedCell) -> Plan:
    """The plan cut down to `planned`: what this host checks (its image, its environment, its data)."""
    return replace(plan_file.plan, cells=(planned.cell,))


def executor_for(
    plan_file: plans.PlanFile, planned: plans.PlannedCell, runtime: str, matrix_path: str | Path, prefix: str
) -> tuple[Executor, tuple[str, str | None] | None]:
    """(executor, why it cannot run or None): the plan's own executor unless a runtime is named. Only this cell's
    image or environment is checked or built: a runner host need not hold the whole plan's."""
    runtime = plan_file.plan.executor if runtime == "plan" else runtime
    one = one_cell(plan_file, planned)
    if runtime in ("pyxis", "apptainer"):
        expected = wanted_hashes(one, load(matrix_path)).get(planned.image)
        if expected is None:  # run_cell checks the record's code hash only against one it is given
            raise ExecutorError(
                f"cell {planned.id}: no expected code hash for its image {planned.image!r} (matrix.yaml at "
                f"{matrix_path} builds no such image), so nothing would check the code it ran; write the plan "
                "again from this checkout with `python -m scripts.plan`, or pass the matrix it was made from (--matrix)"
            )
        return SlurmContainerExecutor(
            runtime, {planned.id: planned.image}, prefix, code_hashes={planned.id: expected}
        ), None
    if runtime == "compose":
        return ComposeExecutor.for_plan(one, load(matrix_path)), None
    pythons, unavailable = local_environments(one, load(matrix_path))
    status, reason = unavailable.get(planned.cell.framework, (None, None))
    return LocalExecutor(pythons), (status, reason) if status else None


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m scripts.cell", description=__doc__.split("\n")[0])
    ap.add_argument("plan", type=Path, help="the plan file (python -m scripts.plan)")
    pick = ap.add_mutually_exclusive_group()
    pick.add_argument(
        "--index", type=int, help=f"the cell's index in the plan (default: {' or '.join(INDEX_VARIABLES)})"
    )
    pick.add_argument("--cell", help="the cell's id")
    ap.add_argument("--run-dir", type=Path, help="where cells/ and logs/ go (default: results/RUN_ID)")
    ap.add_argument("--data-root", type=Path, default=DATA, help="folder holding synthetic/ and real/")
    ap.add_argument(
        "--runtime",
        choices=RUNTIMES,
        default="plan",
        help="how to start the runner: the plan's executor, or a Slurm site's container runtime",
    )
    ap.add_argument("--image-prefix", default="", help="pyxis: registry prefix of the images; apptainer: .sif folder")
    ap.add_argument(
        "--matrix",
        type=Path,
        default=ROOT / "matrix.yaml",
        help="the matrix the plan is checked against (its images' code hashes, the local environments)",
    )
    args = ap.parse_args(argv)
    os.environ.setdefault("ROSETTA_HOST", platform.node())  # the record's host, also inside a container
    try:
        plan_file = plans.check_against(plans.read(args.plan), load(args.matrix), str(args.plan))
        index = args.index if args.index is not None or args.cell else index_from_environment()
        planned = plan_file.find(index=index, cell_id=args.cell)
        run_dir = args.run_dir or RESULTS / plan_file.run_id
        executor, unavailable = executor_for(plan_file, planned, args.runtime, args.matrix, args.image_prefix)
    except (plans.PlanError, MatrixError, ExecutorError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    try:  # a host without the cell's data still leaves a record, so the merged report says why
        check_data(one_cell(plan_file, planned), args.data_root)
    except (RunError, datasets.DataError) as e:
        unavailable = unavailable or ("failed", str(e))
    cell, devices = planned.cell, devices_of(planned.cell)
    unfit = (
        preflight.reason(cell, planned.image, planned.gpu_archs, preflight.host_gpus(), planned.ptx, planned.cuda)
        if devices
        else None
    )
    if devices:
        os.environ["ROSETTA_GPU_IDS"] = ",".join(devices)
    run = RunSettings(plan_file.run_id, plan_file.plan.repeats, plan_file.plan.timeout_s, args.data_root.resolve())
    status, reason = unavailable or (None, None)
    record = run_cell(
        executor,
        cell,
        run,
        run_dir,
        devices,
        unfit=unfit or (reason if status == "skipped" else None),
        broken=reason if status == "failed" else None,
    )
    where = f" on GPU {','.join(devices)}" if devices else ""
    print(f"{cell.id}{where} ({os.environ['ROSETTA_HOST']}): {record['status']} — {describe(record)}")
    return 0 if record["status"] in ("ok", "skipped") else 1


if __name__ == "__main__":
    sys.exit(main())
