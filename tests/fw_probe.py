"""Run inside a framework's environment by the framework tier (tests/probe.py): every job of one framework, in order.

    python tests/fw_probe.py FRAMEWORK PLAN.json
PLAN.json lists the jobs, each with its files:
- forward: IN.npz holds the canonical weights (their names) and the input batch `x`; OUT.npz gets `logits` and
  `parameters`.
- train: IN.npz holds the canonical start, the batch `x` and its labels `y`. The runner's own
  `train_steps(cfg, weights, x, y, steps)` builds the model, optimizer and step as its `main` does (the cell: CPU,
  fp32, full-scale hyperparameters, the job's tuning; the cnn with its `dropout` switch off, so the step is
  deterministic). OUT.npz gets `loss` (each step's) and, for each step s (1-based), the canonical arrays as `s:name`.
- run: the cell through `python -m runners`' own main with the job's `argv`; the runner writes its record to OUT and
  OUT.rc gets main's exit code.
A job that raises writes its traceback to OUT.error and the probe goes on with the next.
"""

import importlib
import json
import os
import sys
import time
import traceback
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from runners import prepare_environment
from shared import threads
from shared.runner import RunConfig


def forward(framework, package, job):
    family = importlib.import_module(f"runners.{package}")
    module = importlib.import_module(f"runners.{package}.{job['task']}")
    data = dict(np.load(job["in"]))
    x = data.pop("x")
    model = module.build_model()
    module.load_canonical(model, data)
    logits = module.predict_logits(model, x)
    with open(job["out"], "wb") as f:  # np.savez would append .npz to a name without it
        np.savez(f, logits=np.asarray(logits, np.float32), parameters=family.count_parameters(model))


def train(framework, package, job):
    task = job["task"]
    module = importlib.import_module(f"runners.{package}.{task}")
    data = dict(np.load(job["in"]))
    x, y = data.pop("x"), data.pop("y")
    cfg = RunConfig(
        framework=framework,
        task=task,
        data=Path("."),
        out=Path(job["out"]),
        device="cpu",
        scale="full",
        switches={"dropout": False} if task == "cnn" else {},
        tuning=job["tuning"],
    )
    losses, after = module.train_steps(cfg, data, x, y, int(job["steps"]))
    arrays = {
        f"{s}:{name}": np.asarray(w, np.float32)
        for s, weights in enumerate(after, start=1)
        if weights is not None
        for name, w in weights.items()
    }  # None: a step inside a tuned cell's chunk
    with open(job["out"], "wb") as f:  # np.savez would append .npz to a name without it
        np.savez(f, loss=np.asarray(losses, np.float64), **arrays)


def run(framework, package, job):
    from runners.__main__ import main

    code = main(job["argv"])
    Path(job["out"] + ".rc").write_text(str(code))


def main(framework, plan):
    os.environ.setdefault("ROSETTA_DEVICE", "cpu")  # a CPU probe, also for backends that pick it at import
    threads.apply()  # the thread rule a runner process applies before any import
    package = prepare_environment(framework)
    for job in json.loads(Path(plan).read_text()):
        print(f"--- {framework} {job['name']}", flush=True)
        start = time.perf_counter()
        try:
            {"forward": forward, "train": train, "run": run}[job["kind"]](framework, package, job)
        except BaseException:  # the job fails, its test says why; the probe goes on with the next job
            Path(job["out"] + ".error").write_text(traceback.format_exc())
        print(f"--- {framework} {job['name']}: {time.perf_counter() - start:.1f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
