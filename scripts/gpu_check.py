"""`make gpu-check`: what a bare GPU machine can tell in minutes, with nothing but its own Python.

    python3 -m scripts.gpu_check                      # in the Python that has PyTorch and JAX for CUDA
    python3 -m scripts.gpu_check --python /opt/py/bin/python3 --budget-minutes 8
    python3 -m scripts.gpu_check --dry-run            # the cells, in order, and their time on paper (no GPU needed)

No Docker, no network, no environment built: the cells run in the system executor (scripts/run.py --python), so
each record names its interpreter and its framework's own versions. Within the budget, in this order:
  1. the synthetic twins at full size (CIFAR-10 50,000 + 10,000, IMDB 25,000 + 25,000) under DATA-ROOT/synthetic;
  2. the barrier self-test of each framework of the plan (shared/barrier_check.py) -> RUN/barriers.json;
  3. the cells of the `gpu-check` profile (PyTorch and JAX: cnn, gru, resnet50 × fp32, tf32, amp, bf16, one GPU,
     full scale), fp32 first, then amp, bf16, tf32; each is followed by its calibration and efficiency, and its
     clock edges by the barrier audit (shared/timing.py). A cell is not started when less than MIN_CELL_SECONDS of
     the budget is left, and a started one is stopped at the budget's end (recorded `timeout`);
  4. the report, and RUN/gpu-check.json: the GPU, each step's seconds, the barrier tests, the cells not started.
Keras 3 is not in that Python: `make gpu-wheels` downloads it and its two small dependencies where there is a network
(.wheelhouse/gpu-check, docker/gpu-check/requirements.txt with their hashes), the folder travels with the checkout,
and gpu-check installs them offline under DATA-ROOT/site before anything else (pip --require-hashes); the Keras cells
run with that folder on their import path. Without the wheels, the Keras cells are recorded `failed`, saying how.
The run folder becomes this GPU's reference with `python -m scripts.reference --from RUN` (results/reference/CLASS),
which `python -m scripts.verify` then uses for runs of the same machine class.
"""
import argparse
import json
import os
import subprocess
import sys
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from datetime import datetime
from pathlib import Path

from scripts import plan as plans
from scripts import records, report
from scripts.compose import visible_gpus
from scripts.executors import RunSettings
from scripts.matrix import ROOT, SYSTEM, load
from scripts.run import RESULTS, check_interpreter, describe, make_executor, run_cell
from shared import datasets, flops, params, timing
from shared.record import write_atomic

PROFILE = "gpu-check"
BUDGET_MINUTES = 9       # of a GPU session's 15 minutes: the machine's start, this, and a little to spare
MIN_CELL_SECONDS = 20               # a cell needs at least this long to start, run and write its record
PRECISION_ORDER = ("fp32", "amp", "bf16", "tf32")   # most informative first, should the budget end early

REFERENCES = ROOT / "results" / "reference"
WHEELS = ROOT / ".wheelhouse" / "gpu-check"           # make gpu-wheels puts Keras 3's wheels here …
WHEEL_REQUIREMENTS = ROOT / "docker" / "gpu-check" / "requirements.txt"   # … pinned and hashed here
UNRECORDED_SECONDS = 2              # a cell's interpreter start and imports before its record's clock starts
FIXED_SECONDS = 15                  # the data (10 s on an H200 machine's 16 cores) beside the barrier tests (10 s)

# The budget on paper: a cell's wall time in a GPU reference of this profile (results/reference/gpu-*, measured),
# else a model fitted to the H200 run of 2026-12-04: its start (interpreter, framework, CUDA context, data, compile,
# evaluation, calibration) plus its steps, each at least the step's launch latency or its FLOPs at the precision's
# sustained rate.
START_SECONDS = {"pytorch": 9.0, "jax": 17.0, "keras-jax": 22.0, "keras-torch": 15.0}   # Keras: its import on top
STEP_SECONDS = {("pytorch", "cnn"): 1.9e-3, ("pytorch", "gru"): 2.5e-3, ("jax", "cnn"): 1.8e-3, ("jax", "gru"): 5e-3,
                ("keras-jax", "cnn"): 2.5e-3, ("keras-torch", "cnn"): 4e-3}   # Keras: fit's per-step hooks on top, a
#                                                                                guess until a GPU reference holds them
SUSTAINED_FLOPS = {"fp32": 25e12, "tf32": 120e12, "amp": 200e12, "bf16": 200e12}


def rank(cell):
    return PRECISION_ORDER.index(cell.precision), cell.framework, cell.task


def ordered(cells):
    return sorted(cells, key=rank)


def estimate_seconds(cell, repeats):
    """The cell's time on paper (see START_SECONDS): start + max(steps × latency, FLOPs / sustained rate)."""
    p = params.task_params(cell.task, cell.scale)
    if cell.task == "resnet50":   # passes: a warm-up until two agree (about three), then the timed ones
        samples = p["batches"] * p["batch_size"] * (3 + max(repeats, timing.MIN_SAMPLES))
        steps = 0
    else:
        train = datasets.FULL_SIZE[p["dataset"]]["train"]
        steps = train // p["batch_size"] * p["epochs"]
        samples = steps * p["batch_size"]
    work = flops.per_sample(cell.task, p) * samples / SUSTAINED_FLOPS[cell.precision]
    latency = steps * STEP_SECONDS.get((cell.framework, cell.task), 0.0)
    return START_SECONDS.get(cell.framework, 20.0) + max(work, latency)


def measured_seconds(references=None):
    """{cell id: seconds} of every ok cell of the system executor in the GPU references: its record's wall time and
    UNRECORDED_SECONDS (the slowest where several references have it)."""
    found = {}
    for path in sorted(Path(references or REFERENCES).glob("gpu-*/cells/*.json")):
        try:
            record = records.read(path)
        except records.RecordError:
            continue
        if record["status"] == "ok" and record["cell"]["variant"] == SYSTEM:
            wall = (records.moment(record["finished_at"], "") - records.moment(record["started_at"], "")).total_seconds()
            found[path.stem] = max(wall + UNRECORDED_SECONDS, found.get(path.stem, 0.0))
    return found


def install_wheels(python, site, wheels=WHEELS, requirements=WHEEL_REQUIREMENTS):
    """Install the wheels `requirements` names from the folder `wheels` into `site` with `python`'s pip, offline and
    each checked against its hash; None where that worked, else why not (in words a person can act on)."""
    if not any(Path(wheels).glob("*.whl")):
        return (f"no wheels in {wheels}: run `make gpu-wheels` on a machine with a network and bring the folder "
                "with the checkout (the device tool: carry .wheelhouse/gpu-check)")
    proc = subprocess.run([str(python), "-m", "pip", "install", "--quiet", "--no-index", "--no-deps",
                           "--require-hashes", "--find-links", str(wheels), "--target", str(site), "--upgrade",
                           "-r", str(requirements)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          universal_newlines=True, timeout=300)
    if proc.returncode != 0:
        return f"pip could not install {requirements.name} from {wheels}: " + " ".join(proc.stdout.split())[-400:]
    return None


def barrier_tests(python, frameworks, run_dir, site=()):
    """Each framework's barrier self-test in `python` (a process each, as the cells run); their results, also
    written to RUN/barriers.json."""
    results = []
    for framework in frameworks:
        try:
            proc = subprocess.run([str(python), "-m", "runners", "--barrier-check", framework, "gpu"], cwd=ROOT,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True, timeout=180,
                                  env={**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), *map(str, site)])})
            lines = proc.stdout.strip().splitlines()
            result = json.loads(lines[-1]) if lines else {"framework": framework, "status": "failed",
                                                          "reason": proc.stderr.strip()[-500:] or "no output"}
        except (subprocess.TimeoutExpired, ValueError) as e:
            result = {"framework": framework, "status": "failed", "reason": f"{type(e).__name__}: {e}"[:500]}
        print(f"barrier {framework}: {result['status']}"
              + (f" — barrier {result['barrier_seconds']:.3f} s, a device synchronize after it "
                 f"{result['after_seconds'] * 1e3:.2f} ms, instead of it {result['control_seconds']:.3f} s"
                 if result.get("barrier_seconds") is not None else f" — {result.get('reason')}"), flush=True)
        results.append(result)
    write_atomic(run_dir / "barriers.json", json.dumps(results, indent=1) + "\n")
    return results


def audit_line(record):
    """The cell's barrier audit in a few words (timing.barrier_audit), or '' without one."""
    audit = (record.get("timing") or {}).get("barrier_audit")
    if not audit:
        return ""
    return (f"; barrier audit: {audit['checks']} edges, a device synchronize after the barrier ≤ "
            f"{audit['max_after_seconds'] * 1e3:.2f} ms{', LEAKS ' + str(audit['leaks']) if audit['leaks'] else ''}")


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m scripts.gpu_check", description=__doc__.split("\n")[0])
    ap.add_argument("--python", default=sys.executable, help="the interpreter with the frameworks (default: this one)")
    ap.add_argument("--results", type=Path, default=RESULTS, help="where the run folder is made (default: results/)")
    ap.add_argument("--data-root", type=Path, default=ROOT / "data" / "gpu-check",
                    help="where the full-size synthetic twins are made (its synthetic/ folder)")
    ap.add_argument("--budget-minutes", type=float, default=BUDGET_MINUTES,
                    help=f"no cell starts once this much time is spent (default {BUDGET_MINUTES:g})")
    ap.add_argument("--dry-run", action="store_true", help="list the cells in order with their time on paper")
    args = ap.parse_args(argv)
    started = time.time()
    deadline = started + args.budget_minutes * 60
    matrix = load()
    run_id = f"{PROFILE}-{datetime.now().strftime('%Y%m%d-%H%M%S')}"
    plan_file = plans.make(matrix, PROFILE, run_id, executor="system")
    planned = tuple(sorted(plan_file.cells, key=lambda p: rank(p.cell)))      # the plan in the order it runs
    plan_file = replace(plan_file, cells=planned, plan=replace(plan_file.plan, cells=tuple(p.cell for p in planned)))
    cells = plan_file.plan.cells
    measured = measured_seconds()
    estimates = {c.id: measured.get(c.id) or estimate_seconds(c, plan_file.plan.repeats) for c in cells}
    paper = sum(estimates.values()) + FIXED_SECONDS
    if args.dry_run:
        for cell in cells:
            print(f"  {cell.id:<40} {estimates[cell.id]:5.0f} s {'measured' if cell.id in measured else 'model'}")
        print(f"{len(cells)} cells, {paper / 60:.1f} minutes on paper with the data and the barrier tests (budget "
              f"{args.budget_minutes:g}) on one H100/H200; {sum(c.id in measured for c in cells)} cells measured "
              f"in a GPU reference, the others from the model")
        return 0 if paper <= args.budget_minutes * 60 else 1
    try:
        python = check_interpreter(args.python)
    except Exception as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if not visible_gpus():
        print("error: no GPU visible (`nvidia-smi` lists none): make gpu-check runs on a GPU machine; "
              "`--dry-run` shows what it would do", file=sys.stderr)
        return 2
    records.OWN_RECORDS_ONLY = True     # this process reads only what its own cells write (see records.py)
    run_dir = args.results / run_id
    plans.write(run_dir / "plan.json", plan_file)
    seconds = {}

    site, no_keras = args.data_root / "site", None
    if any(c.framework.startswith("keras") for c in cells):
        step = time.time()
        no_keras = install_wheels(python, site)
        seconds["wheels"] = time.time() - step
        print(f"Keras 3: {'installed under ' + str(site) if no_keras is None else no_keras}", flush=True)

    step = time.time()       # the data on the CPU while the barrier tests use the GPU
    with ThreadPoolExecutor(1) as thread:
        data = thread.submit(datasets.prepare, args.data_root / "synthetic", synthetic=True,
                             datasets=("cifar10", "imdb"), full_size=True)
        barriers = barrier_tests(python, dict.fromkeys(c.framework for c in cells
                                                       if not (no_keras and c.framework.startswith("keras"))),
                                 run_dir, (site,))
        seconds["barrier_tests"] = time.time() - step
        data.result()
    seconds["data_and_barrier_tests"] = time.time() - step

    step = time.time()
    executor, _ = make_executor(plan_file.plan, matrix, python=python)
    executor = replace(executor, site=(site,))
    statuses, not_started, cell_seconds = {}, [], {}
    for cell in cells:
        left = deadline - time.time()
        if left < MIN_CELL_SECONDS:
            not_started.append(cell.id)
            continue
        run = RunSettings(run_id, plan_file.plan.repeats, min(plan_file.plan.timeout_s, left),
                          args.data_root.resolve())
        began = time.time()
        broken = no_keras if no_keras and cell.framework.startswith("keras") else None
        record = run_cell(executor, cell, run, run_dir, executor.gpu_ids[:1], broken=broken)
        statuses[cell.id], cell_seconds[cell.id] = record["status"], round(time.time() - began, 1)
        print(f"[{len(statuses)}/{len(cells)}] {cell.id}: {record['status']} in {time.time() - began:.0f} s "
              f"(on paper {estimates[cell.id]:.0f}) — {describe(record)}{audit_line(record)}", flush=True)
    seconds["cells"] = time.time() - step

    outputs = report.write_report(run_dir)
    print(outputs["markdown"].read_text())
    seconds["total"] = time.time() - started
    summary = {"run_id": run_id, "interpreter": str(python), "gpus": visible_gpus(),
               "budget_s": args.budget_minutes * 60, "seconds": seconds, "cell_seconds": cell_seconds,
               "records_schema_checked": records.VALIDATOR is not None, "barrier_tests": barriers,
               "statuses": statuses, "not_started": not_started,
               "leak_threshold": {"seconds": timing.LEAK_SECONDS, "share": timing.LEAK_SHARE}}
    write_atomic(run_dir / "gpu-check.json", json.dumps(summary, indent=1) + "\n")
    counts = ", ".join(f"{n} {status}" for status, n in sorted(Counter(statuses.values()).items()))
    print(f"gpu-check: {len(statuses)} cells in {seconds['cells']:.0f} s ({counts}), data and barrier tests "
          f"{seconds['data_and_barrier_tests']:.0f} s, total {seconds['total']:.0f} s of a "
          f"{args.budget_minutes:g}-minute budget")
    if not_started:
        print(f"not started, the budget was spent (the check is incomplete): {', '.join(not_started)}")
    print(f"run folder: {run_dir}; as this GPU's reference: python -m scripts.reference --from {run_dir}")
    broken = [s for s in statuses.values() if s in ("failed", "timeout")] + \
        [b for b in barriers if b["status"] == "failed"]
    return 1 if broken or not_started else 0


if __name__ == "__main__":
    sys.exit(main())
