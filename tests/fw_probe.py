"""Run inside a framework's environment by the equivalence test: load canonical weights, write logits.

    python tests/fw_probe.py FRAMEWORK TASK IN.npz OUT.npz
IN.npz holds the canonical weights (their names) and the input batch `x`; OUT.npz gets `logits` and `parameters`.
"""
import importlib
import os
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from runners import prepare_environment  # noqa: E402


def main(framework, task, inputs, output):
    os.environ.setdefault("ROSETTA_DEVICE", "cpu")  # a CPU probe, also for backends that pick it at import
    package = prepare_environment(framework)
    family = importlib.import_module(f"runners.{package}")
    module = importlib.import_module(f"runners.{package}.{task}")
    data = dict(np.load(inputs))
    x = data.pop("x")
    model = module.build_model()
    module.load_canonical(model, data)
    logits = module.predict_logits(model, x)
    np.savez(output, logits=np.asarray(logits, np.float32), parameters=family.count_parameters(model))


if __name__ == "__main__":
    main(*sys.argv[1:])
