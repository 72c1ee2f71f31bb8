"""The host side at scale: plan, merge, report and verify over N synthetic cells (default 10,000), seconds and peak
memory of each stage. A benchmark, not a test: run it before and after a change to the host side and compare.

    python -m bench.scale [--cells 10000] [--keep DIR]

The matrix is matrix.yaml with PyTorch's entry cloned under new ids until the profile expands to N cells (GPU
variants × tasks × precisions × GPU counts); each record is a sound ok record of its cell with seven samples.
"""

import argparse
import copy
import random
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path

import yaml

from scripts.plan import matrix as matrix_mod
from scripts.plan import planfile as plan
from scripts.results import merge, report, verify
from shared.params import params_hash
from shared.record import make_record, write_record

CELLS_PER_CLONE = 81  # PyTorch's 3 GPU variants × tasks × precisions × GPU counts, less what it does not support


def synthetic_matrix(folder, cells):
    doc = yaml.safe_load((matrix_mod.ROOT / "matrix.yaml").read_text())
    clones = -(-cells // CELLS_PER_CLONE)
    for k in range(clones):
        doc["frameworks"][f"pytorch-{k}"] = copy.deepcopy(doc["frameworks"]["pytorch"])
    doc["profiles"]["scale"] = {
        "executor": "local",
        "device": "gpu",
        "data": "synthetic",
        "scale": "full",
        "repeats": 5,
        "timeout_minutes": 10,
        "frameworks": [f"pytorch-{k}" for k in range(clones)],
        "variants": ["cu130", "cu130-cudnn928", "cu128"],
        "tasks": ["cnn", "gru", "resnet50", "densenet121"],
        "precisions": ["fp32", "tf32", "amp", "bf16"],
        "gpus": [1, 2, 4, 8],
    }
    path = folder / "matrix.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def synthetic_record(cell, run_id, rng, slower=1.0):
    values = [rng.uniform(0.9, 1.1) * slower for _ in range(7)]
    median = sorted(values)[3]
    metrics = (
        {
            "train_seconds": median * 100 + 5,
            "steady_state_seconds": median * 100,
            "accuracy": 0.7,
            "epoch_seconds": [median * 100 + 5],
        }
        if cell.task != "resnet50"
        else {"seconds_per_1000_images": median * 10}
    )
    if cell.task == "densenet121":
        metrics.update(train_minutes=metrics["train_seconds"] / 60, auc=0.7)
        del metrics["accuracy"]
    system = {
        "host": "bench",
        "cpu": "bench CPU",
        "cpu_count": 16,
        "gpus": ["NVIDIA H200"] * cell.gpus,
        "gpu_facts": [{"name": "NVIDIA H200", "memory_mib": 144384}] * cell.gpus,
        "machine_class": f"gpu:nvidia-h200:141g:x{cell.gpus}",
        "params_hash": params_hash(cell.task),
    }
    timing = {
        "unit": "seconds per step",
        "values": values,
        "median": median,
        "min": min(values),
        "max": max(values),
        "q1": median,
        "q3": median,
        "spread": 0.05,
        "unstable": False,
        "warmup": 3.0,
    }
    return make_record(vars(cell), "ok", run_id=run_id, metrics=metrics, timing=timing, system=system)


class Stage:
    """`with Stage(name):` prints the seconds and the process's peak resident memory after the stage."""

    def __init__(self, name):
        self.name = name

    def __enter__(self):
        self.start = time.perf_counter()

    def __exit__(self, *exc):
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(f"{self.name:<34} {time.perf_counter() - self.start:8.2f} s   peak RSS {peak:7.0f} MiB", flush=True)


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m bench.scale", description=__doc__.split("\n")[0])
    ap.add_argument("--cells", type=int, default=10_000, help="cells in the synthetic plan (default 10,000)")
    ap.add_argument("--keep", type=Path, help="work in this folder and keep it (default: a temporary one)")
    args = ap.parse_args(argv)
    work = args.keep or Path(tempfile.mkdtemp(prefix="rosetta-scale-"))
    work.mkdir(parents=True, exist_ok=True)
    rng = random.Random(0)
    try:
        path = synthetic_matrix(work, args.cells)
        with Stage("load + validate matrix.yaml"):
            matrix = matrix_mod.load(path)
        with Stage("expand + plan (ids checked)"):
            planned = plan.make(matrix, "scale", run_id="scale-bench")
        print(f"  {len(planned.cells)} cells")
        with Stage("write plan.json"):
            plan.write(work / "sources" / "plan.json", planned)
        with Stage("write the records (the hosts' part)"):
            for c in planned.cells:
                write_record(work / "sources" / "cells" / f"{c.id}.json", synthetic_record(c.cell, "scale-bench", rng))
        with Stage("merge (schema, plan, confinement)"):
            counts = merge.merge(work / "run", [work / "sources"])
        print(f"  {counts}")
        with Stage("report (tables, CSV, JSONL, plot)"):
            report.write_report(work / "run")
        reference = {p.stem: verify.records.read(p) for p in (work / "run" / "cells").glob("*.json")}
        measured = {
            i: synthetic_record(
                verify.records.read(work / "run" / "cells" / f"{i}.json") and matrix_mod.Cell(**r["cell"]),
                "scale-bench",
                rng,
                slower=2.0 if n % 1000 == 0 else 1.0,
            )
            for n, (i, r) in enumerate(sorted(reference.items()))
        }
        with Stage("verify (compare, rank tests)"):
            rows, outcome, _, overall = verify.compare(reference, measured, list(measured))
        print(
            f"  overall ×{overall['raw']:.3f}; slower: {outcome['slower']}, faster: {outcome['faster']}, "
            f"ok: {outcome['ok']}"
        )
    finally:
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
