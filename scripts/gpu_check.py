"""`make gpu-check`: what a bare GPU machine can tell in minutes, with nothing but its own Python.

    python3 -m scripts.gpu_check                      # in the Python that has PyTorch and JAX for CUDA: every part
    python3 -m scripts.gpu_check --part 1             # one device call: the first part (a new run folder) …
    python3 -m scripts.gpu_check --part 2             # … the next call: the second part, into the newest run folder
    python3 -m scripts.gpu_check --dry-run            # the cells, in order and in parts, their time on paper

No Docker, no network, no environment built: the cells run in the system executor (scripts/run.py --python), so each
record names its interpreter and its framework's own versions. The plan (the `gpu-check` profile: PyTorch's and JAX's
cnn, gru, resnet50, each idiomatic and tuned, Keras 3's amp CNN, Chainer's CNN) is cut, in its order, into at most
MAX_PARTS parts of PART_MINUTES each on paper, so that a GPU session of about 15 minutes, its start included, holds them
as one or two calls. Each part, within its budget:
  1. the synthetic twins at full size (CIFAR-10 50,000 + 10,000, IMDB 25,000 + 25,000) under DATA-ROOT/synthetic;
  2. the barrier self-test of each framework of the part (shared/barrier_check.py) -> RUN/barriers.json;
  3. its cells, each default cell beside its tuned sibling, fp32 first, then amp, bf16, tf32; each is followed by its
     calibration and efficiency, and its clock edges by the barrier audit (shared/timing.py). A cell is not started
     when less than MIN_CELL_SECONDS of the budget is left, and a started one is stopped at the budget's end
     (recorded `timeout`);
  4. the report over every record of the run folder, and RUN/gpu-check.json: the GPU, and per part each step's
     seconds, the barrier tests and the cells not started.
Keras 3 is not in that Python: `make gpu-wheels` downloads it and its two small dependencies where there is a network
(.wheelhouse/gpu-check, docker/gpu-check/requirements.txt with their hashes), and Chainer 7.8.1's source
(docker/gpu-check/sources.txt); the folder travels with the checkout, and gpu-check installs them offline under
DATA-ROOT/site before anything else (pip --require-hashes; Chainer's pure-Python packages unpacked from its checked
archive). Without them, their cells are recorded `failed`, saying how. Chainer then has to run a convolution on the GPU
in that Python (its NumPy, its CuPy): where it cannot, its cells are `skipped` with the error. The run folder becomes
this GPU's reference with `python -m scripts.results.reference --from RUN` (results/reference/CLASS), which `python -m
scripts.results.verify` then uses for runs of the same machine class.
"""

import argparse
import json
import os
import subprocess
import sys
import tarfile
import time
from collections import Counter
from collections.abc import Collection, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import Any

from scripts.launch.executors import LocalExecutor, RunSettings, visible_gpus
from scripts.paths import DATA, REFERENCES, RESULTS, ROOT
from scripts.plan import planfile as plans
from scripts.plan.matrix import SYSTEM, Cell, Matrix, Plan, load
from scripts.results import records, report
from scripts.run import RunError, check_interpreter, describe, make_executor, run_cell, run_dir_for
from shared import datasets, flops, params, timing
from shared.record import write_atomic

PROFILE = "gpu-check"
PART_MINUTES = 6  # one part on paper: a device call of at most 8 minutes with the data and the tests …
MAX_PARTS = 2  # … and two of them, the machine's start (1-2 minutes) beside, in a GPU session's 15
MIN_CELL_SECONDS = 20  # a cell needs at least this long to start, run and write its record
PRECISION_ORDER = ("fp32", "amp", "bf16", "tf32")  # most informative first, should the budget end early

WHEELS = ROOT / ".wheelhouse" / "gpu-check"  # make gpu-wheels puts Keras 3's wheels here …
WHEEL_REQUIREMENTS = ROOT / "docker" / "gpu-check" / "requirements.txt"  # … pinned and hashed here
SOURCES = ROOT / "docker" / "gpu-check" / "sources.txt"  # pure-Python source archives (Chainer), pinned and hashed
UNRECORDED_SECONDS = 2  # a cell's interpreter start and imports before its record's clock starts
FIXED_SECONDS = 15  # the data (10 s on an H200 machine's 16 cores) beside the barrier tests (10 s)

# The budget on paper: a cell's wall time in a GPU reference of this profile (results/reference/gpu-*, measured),
# else a model fitted to the H200 run of 2026-12-04: its start (interpreter, framework, CUDA context, data, compile,
# evaluation, calibration) plus its steps, each at least the step's launch latency or its FLOPs at the precision's
# sustained rate.
START_SECONDS = {
    "pytorch": 9.0,
    "jax": 17.0,
    "keras-jax": 22.0,
    "keras-torch": 15.0,  # Keras: its import on top
    "chainer": 15.0,
}
STEP_SECONDS = {
    ("pytorch", "cnn"): 1.9e-3,
    ("pytorch", "gru"): 2.5e-3,
    ("jax", "cnn"): 1.8e-3,
    ("jax", "gru"): 5e-3,
    ("keras-jax", "cnn"): 2.5e-3,
    ("keras-torch", "cnn"): 4e-3,  # Keras: fit's per-step hooks on top
    ("chainer", "cnn"): 4e-3,
}  # Keras' and Chainer's: guesses until a GPU reference holds them
# The tuned path (docs/tuned.md), guesses until a GPU reference holds them: its compilation on top of the start
# (torch.compile with CUDA graphs; XLA's multi-step program), and a step at what the path is built to reach (one graph
# replay per step; one dispatch per five steps).
TUNED_START_SECONDS = {"pytorch": 45.0, "jax": 10.0}
TUNED_STEP_SECONDS = {
    ("pytorch", "cnn"): 0.5e-3,
    ("pytorch", "gru"): 1.5e-3,
    ("jax", "cnn"): 0.6e-3,
    ("jax", "gru"): 2.5e-3,
}
SUSTAINED_FLOPS = {"fp32": 25e12, "tf32": 120e12, "amp": 200e12, "bf16": 200e12}


def rank(cell: Cell) -> tuple[int, str, str, bool]:
    """Precision first (PRECISION_ORDER), then a task's cells together, each default beside its tuned sibling."""
    return PRECISION_ORDER.index(cell.precision), cell.task, cell.framework, cell.tuning != "default"


def ordered(cells: Iterable[Cell]) -> list[Cell]:
    return sorted(cells, key=rank)


def estimate_seconds(cell: Cell, repeats: int) -> float:
    """The cell's time on paper (see START_SECONDS): start + max(steps × latency, FLOPs / sustained rate)."""
    p = params.task_params(cell.task, cell.scale)
    if cell.task == "resnet50":  # passes: a warm-up until two agree (about three), then the timed ones
        samples = p["batches"] * p["batch_size"] * (3 + max(repeats, timing.MIN_SAMPLES))
        steps = 0
    else:
        train = datasets.FULL_SIZE[p["dataset"]]["train"]
        steps = train // p["batch_size"] * p["epochs"]
        samples = steps * p["batch_size"]
    work = flops.per_sample(cell.task, p) * samples / SUSTAINED_FLOPS[cell.precision]
    tuned = cell.tuning != "default"
    latency = steps * (
        (TUNED_STEP_SECONDS if tuned else STEP_SECONDS).get((cell.framework, cell.task))
        or STEP_SECONDS.get((cell.framework, cell.task), 0.0)
    )
    start = START_SECONDS.get(cell.framework, 20.0) + (TUNED_START_SECONDS.get(cell.framework, 30.0) if tuned else 0)
    return start + max(work, latency)


def parts(cells: Iterable[Cell], estimates: Mapping[str, float], budget_s: float) -> list[list[Cell]]:
    """The cells, in their order, cut into parts of at most `budget_s` on paper each (with FIXED_SECONDS for the data
    and the barrier tests): a list of lists of cells. A cell longer than a part alone is a part of its own."""
    cut: list[list[Cell]] = [[]]
    seconds: float = FIXED_SECONDS
    for cell in cells:
        if cut[-1] and seconds + estimates[cell.id] > budget_s:
            cut.append([])
            seconds = FIXED_SECONDS
        cut[-1].append(cell)
        seconds += estimates[cell.id]
    return cut


def measured_seconds(references: str | Path | None = None) -> dict[str, float]:
    """{cell id: seconds} of every ok cell of the system executor in the GPU references: its record's wall time and
    UNRECORDED_SECONDS (the slowest where several references have it)."""
    found: dict[str, float] = {}
    for path in sorted(Path(references or REFERENCES).glob("gpu-*/cells/*.json")):
        try:
            record = records.load(path)
        except records.RecordError:
            continue
        if record.status == "ok" and record.cell.variant == SYSTEM:
            wall = (records.moment(record.finished_at, "") - records.moment(record.started_at, "")).total_seconds()
            found[path.stem] = max(wall + UNRECORDED_SECONDS, found.get(path.stem, 0.0))
    return found


def install_wheels(
    python: str | Path, site: str | Path, wheels: str | Path = WHEELS, requirements: Path = WHEEL_REQUIREMENTS
) -> str | None:
    """Install the wheels `requirements` names from the folder `wheels` into `site` with `python`'s pip, offline and
    each checked against its hash; None where that worked, else why not (in words a person can act on)."""
    if not any(Path(wheels).glob("*.whl")):
        return (
            f"no wheels in {wheels}: run `make gpu-wheels` on a machine with a network and bring the folder "
            "with the checkout (the device tool: carry .wheelhouse/gpu-check)"
        )
    proc = subprocess.run(
        [
            str(python),
            "-m",
            "pip",
            "install",
            "--quiet",
            "--no-index",
            "--no-deps",
            "--require-hashes",
            "--find-links",
            str(wheels),
            "--target",
            str(site),
            "--upgrade",
            "-r",
            str(requirements),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=300,
    )
    if proc.returncode != 0:
        return f"pip could not install {requirements.name} from {wheels}: " + " ".join(proc.stdout.split())[-400:]
    return None


def pinned_sources(sources: str | Path = SOURCES) -> list[tuple[str, str, str]]:
    """[(name, version, sha256)] from a file of `name==version --hash=sha256:HEX` lines (# comments, \\ joins)."""
    text = Path(sources).read_text().replace("\\\n", " ")
    pins = []
    for line in text.splitlines():
        words = line.split("#", 1)[0].split()
        if words:
            name, version = words[0].split("==")
            pins.append((name, version, next(w.split(":", 1)[1] for w in words if w.startswith("--hash=sha256:"))))
    return pins


def install_sources(site: str | Path, wheels: str | Path = WHEELS, sources: str | Path = SOURCES) -> str | None:
    """Unpack the pure-Python packages of each source archive `sources` pins (name-version.tar.gz in `wheels`) into
    `site`, each archive checked against its hash first: no build, no network (Chainer's setup.py only packages).
    Only the archive's top-level folders with an __init__.py are unpacked, as plain files (tarfile's data filter);
    None where that worked, else why not."""
    for name, version, digest in pinned_sources(sources):
        archive = Path(wheels) / f"{name}-{version}.tar.gz"
        if not archive.exists():
            return (
                f"no {archive.name} in {wheels}: run `make gpu-wheels` on a machine with a network and bring the "
                "folder with the checkout (the device tool: carry .wheelhouse/gpu-check)"
            )
        found = datasets.file_digest(archive, "sha256")
        if found != digest:
            return f"{archive.name} has SHA-256 {found}, not the {digest} {Path(sources).name} pins: refused"
        with tarfile.open(archive) as tar:
            names = tar.getnames()
            top = f"{name}-{version}/"
            packages = {
                n[len(top) :].split("/")[0]
                for n in names
                if n.startswith(top) and n.count("/") == 2 and n.endswith("/__init__.py")
            }
            members = [
                m for m in tar.getmembers() if m.name.startswith(top) and m.name[len(top) :].split("/")[0] in packages
            ]
            for member in members:
                member.name = member.name[len(top) :]
            try:
                tar.extractall(site, members=members, filter="data")
            except tarfile.FilterError as e:
                return f"{archive.name}: {e} (not a plain file of its packages): refused"
    return None


# A convolution on the GPU in the GPU machine's Python: Chainer 7.8.1 (2020) with that Python's NumPy and CuPy.
CHAINER_PROBE = """
import json, numpy, cupy, chainer
from chainer.backends import cuda
cuda.check_cuda_available()
x, w = cuda.to_gpu(numpy.ones((2, 3, 8, 8), numpy.float32)), cuda.to_gpu(numpy.ones((4, 3, 3, 3), numpy.float32))
assert float(chainer.functions.convolution_2d(x, w).array.sum()) == 2 * 4 * 6 * 6 * 27
print(json.dumps({"chainer": chainer.__version__, "numpy": numpy.__version__, "cupy": cupy.__version__,
                  "cudnn": bool(cuda.cudnn_enabled)}))
"""


def chainer_probe(python: str | Path, site: str | Path) -> str | None:
    """None where Chainer runs CHAINER_PROBE in `python` with `site` on its path, else why it cannot (its error)."""
    try:
        proc = subprocess.run(
            [str(python), "-c", CHAINER_PROBE],
            capture_output=True,
            text=True,
            timeout=180,
            env={**os.environ, "PYTHONPATH": os.pathsep.join([str(site), str(ROOT)])},
        )
    except subprocess.TimeoutExpired:
        return "Chainer cannot run in this Python: its probe (a convolution on the GPU) took over 180 s"
    if proc.returncode == 0:
        print(f"Chainer on the GPU: {proc.stdout.strip()}", flush=True)
        return None
    error = (proc.stderr.strip().splitlines() or ["no output"])[-1]
    return f"Chainer cannot run in this Python ({python}): a convolution on the GPU fails with {error[-400:]}"


def barrier_tests(
    python: str | Path, frameworks: Collection[str], run_dir: Path, site: Sequence[str | Path] = ()
) -> list[dict[str, Any]]:
    """Each framework's barrier self-test in `python` (a process each, as the cells run); their results, also
    written to RUN/barriers.json (beside an earlier part's tests of other frameworks)."""
    results = []
    for framework in frameworks:
        try:
            proc = subprocess.run(
                [str(python), "-m", "runners", "--barrier-check", framework, "gpu"],
                cwd=ROOT,
                capture_output=True,
                text=True,
                timeout=180,
                env={**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), *map(str, site)])},
            )
            lines = proc.stdout.strip().splitlines()
            result: dict[str, Any] = (
                json.loads(lines[-1])
                if lines
                else {"framework": framework, "status": "failed", "reason": proc.stderr.strip()[-500:] or "no output"}
            )
        except (subprocess.TimeoutExpired, ValueError) as e:
            result = {"framework": framework, "status": "failed", "reason": f"{type(e).__name__}: {e}"[:500]}
        print(
            f"barrier {framework}: {result['status']}"
            + (
                f" — barrier {result['barrier_seconds']:.3f} s, a device synchronize after it "
                f"{result['after_seconds'] * 1e3:.2f} ms, instead of it {result['control_seconds']:.3f} s"
                if result.get("barrier_seconds") is not None
                else f" — {result.get('reason')}"
            ),
            flush=True,
        )
        results.append(result)
    path = run_dir / "barriers.json"  # a later part's tests join the earlier parts'
    earlier = [r for r in json.loads(path.read_text()) if r.get("framework") not in frameworks] if path.exists() else []
    write_atomic(path, json.dumps(earlier + results, indent=1) + "\n")
    return results


def audit_line(record: Mapping[str, Any]) -> str:
    """The cell's barrier audit in a few words (timing.barrier_audit), or '' without one."""
    audit = (record.get("timing") or {}).get("barrier_audit")
    if not audit:
        return ""
    return (
        f"; barrier audit: {audit['checks']} edges, a device synchronize after the barrier ≤ "
        f"{audit['max_after_seconds'] * 1e3:.2f} ms{', LEAKS ' + str(audit['leaks']) if audit['leaks'] else ''}"
    )


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m scripts.gpu_check", description=__doc__.split("\n")[0])
    ap.add_argument("--python", default=sys.executable, help="the interpreter with the frameworks (default: this one)")
    ap.add_argument("--results", type=Path, default=RESULTS, help="where the run folder is made (default: results/)")
    ap.add_argument(
        "--data-root",
        type=Path,
        default=DATA / "gpu-check",
        help="where the full-size synthetic twins are made (its synthetic/ folder)",
    )
    ap.add_argument(
        "--part",
        type=int,
        choices=range(1, MAX_PARTS + 1),
        help="run this part only (default: every part, one after the other); part 1 makes a new run "
        "folder, a later part continues the newest (or --resume's)",
    )
    ap.add_argument(
        "--resume",
        metavar="RUN",
        help="the run folder (under --results) a later part continues, or "
        "'latest' (the default for parts after the first)",
    )
    ap.add_argument(
        "--budget-minutes",
        type=float,
        default=PART_MINUTES,
        help=f"a part's time: no cell of it starts once this much is spent (default {PART_MINUTES:g})",
    )
    ap.add_argument(
        "--dry-run", action="store_true", help="list the cells in order and in parts, with their time on paper"
    )
    args = ap.parse_args(argv)
    matrix = load()
    run_id = f"{PROFILE}-{datetime.now().strftime('%Y%m%d-%H%M%S')}"
    plan_file = plans.make(matrix, PROFILE, run_id, executor="system")
    planned = tuple(sorted(plan_file.cells, key=lambda p: rank(p.cell)))  # the plan in the order it runs
    plan_file = replace(plan_file, cells=planned, plan=replace(plan_file.plan, cells=tuple(p.cell for p in planned)))
    cells = plan_file.plan.cells
    measured = measured_seconds()
    estimates = {c.id: measured.get(c.id) or estimate_seconds(c, plan_file.plan.repeats) for c in cells}
    cut = parts(cells, estimates, args.budget_minutes * 60)
    if args.dry_run:
        for number, part in enumerate(cut, 1):
            print(
                f"part {number}: {FIXED_SECONDS + sum(estimates[c.id] for c in part):.0f} s on paper "
                f"(`--part {number}`)"
            )
            for cell in part:
                print(f"  {cell.id:<46} {estimates[cell.id]:5.0f} s {'measured' if cell.id in measured else 'model'}")
        paper = sum(estimates.values()) + FIXED_SECONDS * len(cut)
        print(
            f"{len(cells)} cells in {len(cut)} part{'s' * (len(cut) > 1)} of at most {args.budget_minutes:g} minutes "
            f"(at most {MAX_PARTS}), {paper / 60:.1f} minutes on paper with the data and the barrier tests, on one "
            f"H100/H200; {sum(c.id in measured for c in cells)} cells measured in a GPU reference, the others from "
            "the model"
        )
        return 0 if len(cut) <= MAX_PARTS else 1
    if args.part and args.part > len(cut):
        print(
            f"error: the plan has {len(cut)} part{'s' * (len(cut) > 1)} at {args.budget_minutes:g} minutes each, "
            f"not {args.part}",
            file=sys.stderr,
        )
        return 2
    try:
        python = check_interpreter(args.python)
        if args.part and args.part > 1 or args.resume:
            run_dir = run_dir_for(args.results, PROFILE, args.resume or "latest")
            if [c.id for c in plans.read(run_dir / "plan.json").plan.cells] != [c.id for c in cells]:
                raise RunError(
                    f"{run_dir} was planned with other cells than this checkout's gpu-check profile: "
                    "start again with --part 1"
                )
        else:
            run_dir = args.results / run_id
    except Exception as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if not visible_gpus():
        print(
            "error: no GPU visible (`nvidia-smi` lists none): make gpu-check runs on a GPU machine; "
            "`--dry-run` shows what it would do",
            file=sys.stderr,
        )
        return 2
    records.OWN_RECORDS_ONLY = True  # this process reads only what its own cells write (see records.py)
    if not (run_dir / "plan.json").exists():
        plans.write(run_dir / "plan.json", plan_file)
    summary_path = run_dir / "gpu-check.json"
    summary: dict[str, Any] = (
        json.loads(summary_path.read_text())
        if summary_path.exists()
        else {"run_id": run_dir.name, "interpreter": str(python), "gpus": visible_gpus(), "parts": {}}
    )
    broken = False
    for number in [args.part] if args.part else range(1, len(cut) + 1):
        outcome = run_part(number, cut[number - 1], args, python, plan_file.plan, matrix, run_dir, estimates)
        summary["parts"][str(number)] = outcome
        broken |= bool(outcome["broken"] or outcome["not_started"])
    outputs = report.write_report(run_dir)
    print(outputs["markdown"].read_text())
    found = {p.stem: records.load(p).status for p in sorted((run_dir / "cells").glob("*.json"))}
    summary.update(
        statuses=found,
        not_run=[c.id for c in cells if c.id not in found],
        records_schema_checked=records.VALIDATOR is not None,
        leak_threshold={"seconds": timing.LEAK_SECONDS, "share": timing.LEAK_SHARE},
    )
    write_atomic(summary_path, json.dumps(summary, indent=1) + "\n")
    counts = ", ".join(f"{n} {status}" for status, n in sorted(Counter(found.values()).items()))
    print(
        f"gpu-check: {len(found)} of {len(cells)} cells recorded in {run_dir.name} ({counts})"
        + (f"; not run yet: {len(summary['not_run'])} (the next part: `--part N`)" if summary["not_run"] else "")
    )
    print(f"run folder: {run_dir}; as this GPU's reference: python -m scripts.results.reference --from {run_dir}")
    return 1 if broken else 0


def run_part(
    number: int,
    cells: Sequence[Cell],
    args: argparse.Namespace,
    python: str | Path,
    plan: Plan,
    matrix: Matrix,
    run_dir: Path,
    estimates: Mapping[str, float],
) -> dict[str, Any]:
    """One part: its tools installed, the data and its frameworks' barrier tests, then its cells within
    args.budget_minutes. Returns the part's summary (seconds, cell seconds, barrier tests, statuses, not started,
    broken: a failed cell or barrier test)."""
    started = time.time()
    deadline = started + args.budget_minutes * 60
    seconds = {}
    site, no_keras, no_chainer, unfit_chainer = args.data_root / "site", None, None, None
    print(f"part {number}: {len(cells)} cells, {args.budget_minutes:g} minutes", flush=True)
    if any(c.framework.startswith("keras") for c in cells):
        step = time.time()
        no_keras = install_wheels(python, site)
        seconds["wheels"] = time.time() - step
        print(f"Keras 3: {'installed under ' + str(site) if no_keras is None else no_keras}", flush=True)
    if any(c.framework == "chainer" for c in cells):
        step = time.time()
        no_chainer = install_sources(site)
        unfit_chainer = None if no_chainer else chainer_probe(python, site)
        seconds["chainer"] = time.time() - step
        print(f"Chainer: {no_chainer or unfit_chainer or 'runs on the GPU'}", flush=True)
    cannot = {
        c.framework
        for c in cells
        if (no_keras and c.framework.startswith("keras"))
        or ((no_chainer or unfit_chainer) and c.framework == "chainer")
    }

    step = time.time()  # the data on the CPU while the barrier tests use the GPU
    with ThreadPoolExecutor(1) as thread:
        data = thread.submit(
            datasets.prepare, args.data_root / "synthetic", synthetic=True, datasets=("cifar10", "imdb"), full_size=True
        )
        barriers = barrier_tests(
            python, [f for f in dict.fromkeys(c.framework for c in cells) if f not in cannot], run_dir, (site,)
        )
        data.result()
    seconds["data_and_barrier_tests"] = time.time() - step

    step = time.time()
    system, _ = make_executor(plan, matrix, python=python)
    assert isinstance(system, LocalExecutor), "the plan is made with executor='system' (main)"
    executor = replace(system, site=(site,))
    statuses, not_started, cell_seconds = {}, [], {}
    for cell in cells:
        left = deadline - time.time()
        if left < MIN_CELL_SECONDS:
            not_started.append(cell.id)
            continue
        run = RunSettings(run_dir.name, plan.repeats, min(plan.timeout_s, left), args.data_root.resolve())
        began = time.time()
        not_installed = (
            no_keras if cell.framework.startswith("keras") else no_chainer if cell.framework == "chainer" else None
        )
        unfit = unfit_chainer if cell.framework == "chainer" else None
        record = run_cell(executor, cell, run, run_dir, executor.gpu_ids[:1], unfit=unfit, broken=not_installed)
        statuses[cell.id], cell_seconds[cell.id] = record["status"], round(time.time() - began, 1)
        print(
            f"[{len(statuses)}/{len(cells)}] {cell.id}: {record['status']} in {time.time() - began:.0f} s "
            f"(on paper {estimates[cell.id]:.0f}) — {describe(record)}{audit_line(record)}",
            flush=True,
        )
    seconds["cells"] = time.time() - step
    seconds["total"] = time.time() - started
    counts = ", ".join(f"{n} {status}" for status, n in sorted(Counter(statuses.values()).items()))
    print(
        f"part {number}: {len(statuses)} cells in {seconds['cells']:.0f} s ({counts}), data and barrier tests "
        f"{seconds['data_and_barrier_tests']:.0f} s, total {seconds['total']:.0f} s of a "
        f"{args.budget_minutes:g}-minute budget",
        flush=True,
    )
    if not_started:
        print(f"not started, the budget was spent (the check is incomplete): {', '.join(not_started)}")
    broken = [s for s in statuses.values() if s in ("failed", "timeout")] + [
        b for b in barriers if b["status"] == "failed"
    ]
    return {
        "budget_s": args.budget_minutes * 60,
        "seconds": seconds,
        "cell_seconds": cell_seconds,
        "barrier_tests": barriers,
        "statuses": statuses,
        "not_started": not_started,
        "broken": len(broken),
    }


if __name__ == "__main__":
    sys.exit(main())
