"""Run inside a framework's environment by the training-equivalence test: train a runner's model a few steps.

    python tests/fw_train_probe.py FRAMEWORK TASK IN.npz OUT.npz STEPS [TUNING]
IN.npz holds the canonical start (canonical names), the batch `x` and its labels `y`. The runner's own
`train_steps(cfg, weights, x, y, steps)` builds the model, optimizer and step as its `main` does (the cell: CPU, fp32,
full-scale hyperparameters, TUNING default or tuned; the cnn with its `dropout` switch off, so the step is
deterministic). OUT.npz gets `loss`
(each step's) and, for each step s (1-based), the canonical arrays as `s:name`.
"""
import importlib
import os
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from runners import prepare_environment  # noqa: E402
from shared.runner import RunConfig  # noqa: E402


def main(framework, task, inputs, output, steps, tuning="default"):
    os.environ.setdefault("ROSETTA_DEVICE", "cpu")
    package = prepare_environment(framework)
    module = importlib.import_module(f"runners.{package}.{task}")
    data = dict(np.load(inputs))
    x, y = data.pop("x"), data.pop("y")
    cfg = RunConfig(framework=framework, task=task, data=Path("."), out=Path(output), device="cpu", scale="full",
                    switches={"dropout": False} if task == "cnn" else {}, tuning=tuning)
    losses, after = module.train_steps(cfg, data, x, y, int(steps))
    arrays = {f"{s}:{name}": np.asarray(w, np.float32) for s, weights in enumerate(after, start=1)
              if weights is not None for name, w in weights.items()}   # None: a step inside a tuned cell's chunk
    np.savez(output, loss=np.asarray(losses, np.float64), **arrays)


if __name__ == "__main__":
    main(*sys.argv[1:])
