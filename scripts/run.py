"""Run a profile of the matrix: validate, prepare, launch every cell, record every outcome, resume, report.

    python -m scripts.run --profile demo                 # a new run under results/demo-YYYYmmdd-HHMMSS/
    python -m scripts.run --profile demo --resume latest # finish the last run: ok/skipped cells are not redone

A run folder holds plan.json, cells/CELL_ID.json (one record per cell: the merge key), logs/CELL_ID.log, and the
report (results.jsonl, results.csv, results.md, results.png). A cell that crashes or times out is recorded and the
run goes on; records are only ever written whole (temp file + rename), so a killed run leaves nothing truncated.
"""

import argparse
import os
import platform
import statistics
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import Any

try:
    from tqdm import tqdm
except ImportError:  # a bare GPU machine's Python (make gpu-check) may lack it: progress lines only, no bar
    tqdm = None

from scripts.launch import preflight, syspackages
from scripts.launch.compose import ComposeExecutor
from scripts.launch.executors import ExecutorError, LocalExecutor, RunSettings, SlurmContainerExecutor, visible_gpus
from scripts.launch.prepare import check_data, local_environments
from scripts.launch.venvs import EnvError
from scripts.paths import DATA, RESULTS, ROOT
from scripts.plan import planfile as plans
from scripts.plan.matrix import Cell, Matrix, MatrixError, Plan, load
from scripts.results import records, report
from scripts.results.runs import runs_of
from shared import datasets, params
from shared.record import RecordError, make_record, write_record
from shared.runner import tail
from shared.sysinfo import cpu_facts, machine_class, placement

Executor = LocalExecutor | ComposeExecutor | SlurmContainerExecutor  # what launches a cell (executors.py)
FINISHED = ("ok", "skipped")  # a resumed run redoes failed and timed-out cells, never these


class RunError(Exception):
    """A run that cannot start (bad matrix, missing data, unknown run to resume); says what to do."""


def run_dir_for(results: Path, profile: str, resume: str | None) -> Path:
    if resume is None:
        return results / f"{profile}-{datetime.now().strftime('%Y%m%d-%H%M%S')}"
    if resume == "latest":
        runs = runs_of(results, profile)
        if not runs:
            raise RunError(f"no earlier run of profile {profile!r} under {results} to resume")
        return runs[-1]
    path = results / resume
    if not (path / "plan.json").exists():
        raise RunError(f"{path} is not a run folder (no plan.json); pass a folder name under {results} or 'latest'")
    return path


def run_cell(
    executor: Executor,
    cell: Cell,
    run: RunSettings,
    run_dir: Path,
    devices: Sequence[str] = (),
    unfit: str | None = None,
    broken: str | None = None,
) -> dict[str, Any]:
    """Launch one cell, wait at most the timeout, and make sure exactly one record of it exists afterwards. Where the
    runner wrote none (crash, kill, timeout, too few GPUs) the host writes it, with the log tail saying what happened.
    `unfit` is the pre-flight's reason why the cell's image cannot run on this host's GPUs (recorded `skipped`),
    `broken` why its environment could not be built (recorded `failed`, so `--resume` retries it): not launched."""
    out, log = run_dir / "cells" / f"{cell.id}.json", run_dir / "logs" / f"{cell.id}.log"
    launched, started_at = time.time(), datetime.now().astimezone().isoformat(timespec="seconds")

    def host_record(status, reason):
        log_tail = tail(log.read_text(errors="replace")) if log.exists() else ""
        where = placement()
        system = {**where, "gpu_ids": ",".join(devices) or where["gpu_ids"]}  # where it ran, not what it ran on
        record = make_record(
            vars(cell),
            status,
            run_id=run.run_id,
            reason=reason,
            log_tail=log_tail,
            started_at=started_at,
            system=system,
        )
        write_record(out, record)
        return record

    if unfit:
        return host_record("skipped", unfit)
    if broken:
        return host_record("failed", broken)
    if executor.gpu_ids and cell.gpus > len(executor.gpu_ids):
        return host_record("skipped", f"needs {cell.gpus} GPUs, this host has {len(executor.gpu_ids)}")
    proc = executor.launch(cell, out, log, run, devices)
    try:
        code = proc.wait(timeout=run.timeout_s)
    except subprocess.TimeoutExpired:
        executor.stop(proc)
        executor.collect(out)  # (a record written in the last moment is superseded by the host's)
        return host_record("timeout", f"killed after the cell timeout of {run.timeout_s:.0f} s")
    executor.collect(out)
    if not (out.exists() and out.stat().st_mtime >= launched - 1):
        return host_record("failed", f"the runner exited with code {code} without writing a record (crash or kill)")
    try:
        record = records.load(out)
    except RecordError as e:
        return host_record("failed", f"the runner's record is unusable: {e}")
    claimed = Cell(**record.data["cell"]).id
    if claimed != cell.id or record.run_id != run.run_id:
        # one cell per slot: the record written for this cell must be this cell's, of this run
        why = (
            f"the record written in the slot of cell {cell.id} (run {run.run_id}) is of cell {claimed} (run "
            f"{record.run_id}): one cell per slot"
        )
        records.quarantine(run_dir, out, why)
        return host_record("failed", why)
    expected = getattr(executor, "expected_code_hash", lambda _: None)(cell)
    held = record.system.get("code_hash")
    if expected and held != expected:
        # every image-based executor: a record never claims code its image does not hold
        return host_record(
            "failed",
            f"the cell ran in an image holding code {held or 'of no known hash'}, not this "
            f"checkout's {expected}: rebuild it (make images, or apptainer build from the "
            "rebuilt image) or run from the checkout it was built from",
        )
    return dict(record.data)  # as the runner wrote it: the host writes it to cells/ unchanged


def finished(run_dir: Path, cell: Cell) -> bool:
    path = run_dir / "cells" / f"{cell.id}.json"
    try:
        return path.exists() and records.load(path).status in FINISHED
    except RecordError:
        return False  # unreadable: run the cell again


def status_of(path: Path) -> str:
    try:
        return records.load(path).status
    except RecordError:
        return "failed"  # quarantined by the report: not a result


def describe(record: Mapping[str, Any]) -> str:
    """One cell's line after its time: the table's number first (the steady state of a training cell, seconds per
    1,000 images of an extraction), then the time as a user waited for it, then the quality."""
    m = record["metrics"]
    if record["status"] != "ok":
        return (record["reason"] or "").splitlines()[0][:120]
    task = record["cell"]["task"]
    unit, scale = ("min", 60.0) if task == "densenet121" else ("s", 1.0)
    steady, waited = m.get("steady_state_seconds"), m.get(params.TIME_METRIC[task])
    if task == "resnet50":
        text = f"{waited:.3g} s per 1,000 images" if isinstance(waited, (int, float)) else "no time"
    elif isinstance(steady, (int, float)):
        text = f"steady state {steady / scale:.3g} {unit}"
        if isinstance(waited, (int, float)):
            text += f" (waited {waited:.3g} {unit})"
    else:
        text = f"waited {waited:.3g} {unit}" if isinstance(waited, (int, float)) else "no time"
    quality = params.QUALITY_METRIC.get(task)
    if quality and isinstance(m.get(quality), (int, float)):
        text += f", {quality} {m[quality]:.3f}"
    return text


class GpuPool:
    """Free GPU ids; a cell takes `n` of them or waits, so no two running cells ever share a GPU."""

    def __init__(self, ids: Sequence[str]) -> None:
        self.free, self.size, self.lock = list(ids), len(ids), threading.Condition()

    @contextmanager
    def take(self, n: int) -> Iterator[tuple[str, ...]]:
        n = min(n, self.size)  # a cell asking for more than the host has is recorded as skipped by run_cell
        with self.lock:
            self.lock.wait_for(lambda: len(self.free) >= n)
            devices, self.free[:n] = tuple(self.free[:n]), []
        try:
            yield devices
        finally:
            with self.lock:
                self.free.extend(devices)
                self.lock.notify_all()


def expected_seconds(plan: Plan, references: Path = RESULTS / "reference") -> dict[str, float]:
    """{cell id: seconds} that the reference of this host's machine class took for the cells of a CPU `plan` (start
    to finish, as each record's dates say), for the progress bar's estimate; {} where no reference is of this class
    (a GPU plan, another CPU) or its records do not read."""
    if any(c.device != "cpu" for c in plan.cells):
        return {}
    here = machine_class(cpu_facts(), "cpu")
    for folder in sorted(references.glob("*/cells")):
        found: dict[str, float] = {}
        for path in folder.glob("*.json"):
            try:
                record = records.load(path)
            except RecordError:
                continue
            if record.machine_class != here:
                break
            start, end = records.started(record.data)
            found[record.cell.id] = (end - start).total_seconds()
        if found:
            return found
    return {}


def execute(
    plan: Plan,
    executor: Executor,
    run_dir: Path,
    run: RunSettings,
    unfit: Mapping[str, str] | None = None,
    broken: Mapping[str, str] | None = None,
) -> None:
    """Run every unfinished cell of `plan`: one at a time on the CPU (parallel cells would distort each other's
    timings); on GPUs, as many at once as there are free GPU sets, largest sets first. `unfit`: {cell id: reason}
    from the pre-flight, cells recorded `skipped` without taking a GPU; `broken`: {cell id: reason}, cells whose
    environment could not be built, recorded `failed`."""
    unfit, broken = unfit or {}, broken or {}
    todo = [c for c in plan.cells if not finished(run_dir, c)]
    done = len(plan.cells) - len(todo)
    if done:
        print(f"resuming {run_dir.name}: {done} of {len(plan.cells)} cells already finished")
    pool = GpuPool(executor.gpu_ids)
    # The bar counts the reference's seconds where this machine class has one, so its estimate weighs a slow cell as
    # the reference did, scaled by how this run has kept pace so far; else it counts cells.
    reference = expected_seconds(plan)
    typical = statistics.median(reference.values()) if reference else 1.0
    weight = {c.id: reference.get(c.id, typical) if reference else 1.0 for c in todo}
    bar = (
        tqdm(
            total=round(sum(weight.values()), 1),
            desc=f"{done}/{len(plan.cells)} cells",
            dynamic_ncols=True,
            file=sys.stdout,
            disable=not todo,
            bar_format="{desc}: {percentage:3.0f}%|{bar}| {elapsed}, about {remaining} left",
        )
        if tqdm
        else None
    )
    progress, finished_cells = threading.Lock(), []
    not_run = set(unfit) | set(broken)  # once, not per cell: plans of 10,000 cells

    def one(cell):
        started = time.time()
        with pool.take(cell.gpus if executor.gpu_ids and cell.id not in not_run else 0) as devices:
            record = run_cell(executor, cell, run, run_dir, devices, unfit.get(cell.id), broken.get(cell.id))
        with progress:
            finished_cells.append(cell.id)
            on = f" on GPU {','.join(devices)}" if devices else ""
            line = (
                f"[{done + len(finished_cells)}/{len(plan.cells)}] {cell.id}{on}: {record['status']} — "
                f"{describe(record)} · cell {time.time() - started:.0f} s"
            )
            if bar is not None:
                bar.set_description_str(f"{done + len(finished_cells)}/{len(plan.cells)} cells", refresh=False)
                bar.update(weight[cell.id])
                tqdm.write(line, file=sys.stdout)
            else:
                print(line, flush=True)
        return record

    if executor.gpu_ids:
        with ThreadPoolExecutor(max_workers=len(executor.gpu_ids)) as threads:
            list(threads.map(one, sorted(todo, key=lambda c: -c.gpus)))
    else:
        for cell in todo:
            one(cell)
    if bar is not None:
        bar.close()


def check_interpreter(python: str | Path) -> Path:
    """The interpreter the system executor runs cells in: an executable file, else a RunError saying so."""
    path = Path(python)
    if not (path.is_file() and os.access(path, os.X_OK)):
        raise RunError(
            f"--python {python}: no executable interpreter there; give the Python that has the "
            f"frameworks installed (e.g. --python $(which python3))"
        )
    return path


def make_executor(
    plan: Plan, matrix: Matrix, refused: str | None = None, python: str | Path | None = None
) -> tuple[Executor, dict[str, tuple[str, str]]]:
    """The plan's executor and {framework: (status, reason)} for frameworks it cannot launch at all. The system
    executor runs every cell in `python` (default: this interpreter) as it is: no environment is built, nothing is
    installed, and each record names the interpreter (system.interpreter)."""
    if plan.executor == "system":
        gpus = visible_gpus() if any(c.device == "gpu" for c in plan.cells) else ()
        interpreter = check_interpreter(python or sys.executable)
        return LocalExecutor({c.framework: interpreter for c in plan.cells}, gpu_ids=gpus, name="system"), {}
    if plan.executor == "local":
        gpus = visible_gpus() if any(c.device == "gpu" for c in plan.cells) else ()
        pythons, unavailable = local_environments(plan, matrix, refused)
        return LocalExecutor(pythons, gpu_ids=gpus), unavailable
    return ComposeExecutor.for_plan(plan, matrix), {}


def plan_for(args: argparse.Namespace, matrix: Matrix) -> tuple[plans.PlanFile, Path]:
    """(plan file, run folder): a new run expands the profile once (main writes it to RUN/plan.json); a resumed run
    reads the plan it wrote (the matrix may have changed since); `--plan` runs a plan written by `python -m
    scripts.plan`."""
    if args.resume:
        run_dir = run_dir_for(args.results, args.profile, args.resume)
        try:
            return plans.read(run_dir / "plan.json"), run_dir
        except plans.PlanError as e:
            raise RunError(f"cannot resume {run_dir.name}: {e}") from e
    executor = "system" if args.python else None
    plan_file = (
        plans.read(args.plan)
        if args.plan
        else plans.make(matrix, args.profile, run_dir_for(args.results, args.profile, None).name, executor)
    )
    run_dir = args.results / plan_file.run_id
    if args.only or args.framework:
        cells = tuple(
            c
            for c in plan_file.cells
            if (not args.only or any(text in c.id for text in args.only))
            and (not args.framework or c.cell.framework in args.framework)
        )
        if not cells:
            asked = [f"--only {text!r}" for text in args.only or ()] + [
                f"--framework {f}" for f in args.framework or ()
            ]
            raise RunError(
                f"{' '.join(asked)} matches no cell of profile {plan_file.plan.profile}"
                f" (its frameworks: {', '.join(sorted({c.cell.framework for c in plan_file.cells}))})"
            )
        plan_file = replace(plan_file, cells=cells, plan=replace(plan_file.plan, cells=tuple(c.cell for c in cells)))
    return plan_file, run_dir


def profile_list() -> str:
    """The profiles with their descriptions, for --help; a matrix that does not load says so instead."""
    try:
        return "; ".join(
            f"{name} ({profile.description})" if getattr(profile, "description", None) else name
            for name, profile in load().profiles.items()
        )
    except MatrixError as e:
        return f"(matrix.yaml does not load: {e})"


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m scripts.run",
        description=__doc__.split("\n")[0],
        epilog=f"profiles in matrix.yaml: {profile_list()}",
    )
    ap.add_argument("--profile", default="demo", help="the profile of matrix.yaml to run (default: demo; see below)")
    ap.add_argument("--plan", type=Path, help="run this plan file (python -m scripts.plan) instead of a profile")
    ap.add_argument(
        "--matrix",
        type=Path,
        default=ROOT / "matrix.yaml",
        help="the matrix file the profile comes from (default: the checkout's matrix.yaml)",
    )
    ap.add_argument("--resume", metavar="RUN|latest", help="continue a run folder instead of starting a new one")
    ap.add_argument(
        "--results",
        type=Path,
        default=RESULTS,
        help="where run folders are made (default: results/; the run is results/PROFILE-DATE-TIME)",
    )
    ap.add_argument("--data-root", type=Path, default=DATA, help="folder holding synthetic/ and real/")
    ap.add_argument(
        "--only",
        action="append",
        metavar="TEXT",
        help="run only cells whose id contains this text (repeat it: cells that contain any)",
    )
    ap.add_argument(
        "--framework",
        action="append",
        metavar="ID",
        help="run only this framework's cells (repeat it for several; make demo FRAMEWORK=ID)",
    )
    ap.add_argument(
        "--python",
        metavar="PATH",
        help="run every cell in this interpreter as it is (the system executor: no environment built, no "
        "image; the cells' variant is `system`), e.g. a GPU machine's own Python",
    )
    ap.add_argument(
        "--no-system-packages",
        action="store_true",
        help="install no Debian package (also NO_SYSTEM_PACKAGES=1): cells that need one are skipped",
    )
    args = ap.parse_args(argv)
    os.environ.setdefault("ROSETTA_HOST", platform.node())  # the records' host, also inside containers
    try:
        matrix = load(args.matrix)
        plan_file, run_dir = plan_for(args, matrix)
        plan = plan_file.plan
        check_data(plan, args.data_root)
        setup = time.time()
        executor, unavailable = make_executor(plan, matrix, syspackages.refusal(args.no_system_packages), args.python)
        setup = time.time() - setup
    except (
        MatrixError,
        RunError,
        EnvError,
        ExecutorError,
        datasets.DataError,
        plans.PlanError,
        syspackages.SystemPackageError,
    ) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if not args.resume:  # only once every check passed: a run folder exists only for a run that started
        plans.write(run_dir / "plan.json", plan_file)
    run = RunSettings(plan_file.run_id, plan.repeats, plan.timeout_s, args.data_root.resolve())
    print(
        f"run {run_dir} — profile {plan.profile}: {len(plan.cells)} cells via the {plan.executor} executor "
        f"(set-up: {setup:.0f} s for system packages and environments)"
    )
    gpus = preflight.host_gpus() if executor.gpu_ids else ()
    unfit = preflight.unfit_cells(plan, matrix, gpus)
    if unfit:
        print(
            f"pre-flight: {len(unfit)} cells have no kernels for this host's GPUs "
            f"({', '.join(sorted({g.name for g in gpus}))}); they are recorded as skipped"
        )
    for fid, (status, reason) in unavailable.items():
        print(f"{fid}: no environment, its cells are recorded {status}: {reason}", file=sys.stderr)
    unfit.update(
        {c.id: unavailable[c.framework][1] for c in plan.cells if unavailable.get(c.framework, ("",))[0] == "skipped"}
    )
    broken = {
        c.id: unavailable[c.framework][1] for c in plan.cells if unavailable.get(c.framework, ("",))[0] == "failed"
    }
    cells = time.time()
    execute(plan, executor, run_dir, run, unfit, broken)
    cells = time.time() - cells
    outputs = report.write_report(run_dir)
    print(outputs["markdown"].read_text())
    statuses = [status_of(run_dir / "cells" / f"{c.id}.json") for c in plan.cells]
    print(ending(statuses, run_dir, outputs, setup, cells))
    return 1 if any(s in ("failed", "timeout") for s in statuses) else 0


def ending(
    statuses: Sequence[str | None], run_dir: Path, outputs: Mapping[str, Path], setup: float, cells: float
) -> str:
    """The run's last lines: the count of each status (the verdict of the run at a glance), where its files are, how
    long it took, and the commands a user runs next."""
    counts = Counter(s or "missing" for s in statuses)
    line = " · ".join(f"{counts.pop(s, 0)} {s}" for s in ("ok", "skipped", "failed"))
    line += "".join(f" · {n} {s}" for s, n in sorted(counts.items()))
    return "\n".join(
        (
            f"{len(statuses)} cells: {line}",
            f"records: {run_dir / 'cells'}  table: {outputs['markdown']}",
            f"csv: {outputs['csv']}  plot: {outputs['plot']}",
            f"time: set-up {setup:.0f} s (system packages, environments), cells {cells:.0f} s",
            "next: make verify RUN=latest   # this run against this machine class's reference (seconds)",
            "      make site RUN=latest     # the runners side by side and this run's results, in site/",
        )
    )


if __name__ == "__main__":
    sys.exit(main())
