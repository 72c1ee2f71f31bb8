"""Julia + Knet runners (Julia 1.5, Knet 1.4): the Python half of the contract, which hands each cell to Julia.

The model, the training step and the evaluation a reader compares are Julia: `cnn.jl`, `gru.jl`, `resnet50.jl`,
written as Knet's own examples and the seed's Knet notebooks write them, each with the sections every runner has.
This package does what `shared/` does for the Python runners, so the data and the record are the same as theirs:
it loads the data through `shared.datasets` (the CIFAR-10 pickles and Keras' imdb.npz hold pickled objects, which
Julia would need a pickle reader for), the epoch orders through `shared.batching` and the canonical weights through
`shared.canonical`, writes them as .npy files with a `config.json` into a work folder, runs
`julia TASK.jl config.json`, and returns the {metrics, timing, switches} Julia wrote; `shared.runner` writes the record.
Julia reads `shared/params.json` itself and times its epochs with the vocabulary of `shared/timing.py` (common.jl).

Where Julia or Knet is missing, a cell ends `skipped` with the reason: Julia's package registry is unreachable on the
machines this project is developed and tested on, so Knet only exists in the julia-knet image built on a host that
reaches it. `ROSETTA_JULIA_CONTRACT_CHECK=1` runs `common.jl --contract-check` instead of the task (Knet not needed):
everything but training, for CI.
"""

import functools
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

from shared import batching, params
from shared.record import GpuMissing, Skip
from shared.runner import no_tuned_path

HERE = Path(__file__).resolve().parent
CONTRACT_CHECK = "ROSETTA_JULIA_CONTRACT_CHECK"
# The epoch times the contract check's Julia turns into metrics and timing, so a test can compare them with
# shared/timing.py's for the same numbers.
CONTRACT_TIMES = {
    "epoch_seconds": [2.0, 1.5, 1.25],
    "warmup": 0.75,
    "steps": 20,
    "windows": [0.09, 0.0625, 0.06, 0.07, 0.0655, 0.059, 0.064, 0.061],
}
PROBE = (
    'print(VERSION, " "); import Pkg; '
    'print(something(get(Dict(p.name => p.version for p in values(Pkg.dependencies())), "Knet", nothing), "-"))'
)

# What framework_info() returns; the Julia run adds what only a loaded Knet knows (CUDA, cuDNN, GPUs), and
# shared.runner reads the dict after the task has run.
INFO = {}


def julia():
    return os.environ.get("ROSETTA_JULIA") or shutil.which("julia")


@functools.lru_cache(maxsize=None)
def probe():
    """(julia_version, knet_version), None for what is missing. Asks Julia's package manager, without loading Knet
    (that takes half a minute and initializes CUDA)."""
    exe = julia()
    if not exe:
        return None, None
    out = subprocess.run([exe, "--startup-file=no", "-e", PROBE], capture_output=True, text=True, timeout=300)
    if out.returncode != 0:
        raise RuntimeError(f"{exe} does not run: {out.stderr.strip()[-2000:]} (Julia needs /proc mounted)")
    julia_version, knet_version = out.stdout.split()
    return julia_version, (None if knet_version == "-" else knet_version)


def framework_info():
    julia_version, knet_version = probe()
    INFO.clear()
    INFO.update(
        {
            "framework_version": knet_version,
            "julia_version": julia_version,
            "knet_version": knet_version,
            "cuda": None,
            "cudnn": None,
            "gpus": [],
        }
    )
    return INFO


def require_knet():
    """Skip, with the reason, where this environment cannot run Knet; the contract check needs Julia only."""
    julia_version, knet_version = probe()
    if julia_version is None:
        raise Skip(
            "julia is not installed on this host: julia-knet cells run in the julia-knet image "
            "(docker/julia-knet/Dockerfile), which installs Julia and, where the build host reaches Julia's "
            "package registry, Knet"
        )
    if knet_version is None and not os.environ.get(CONTRACT_CHECK):
        raise Skip(
            f"Knet is not installed in this Julia ({julia_version}): Julia's package registry was "
            "unreachable when this environment was built; build the julia-knet image on a host that "
            "reaches it"
        )


def check_precision(precision):
    """Knet 1.4 trains and infers in float32 only (common.jl says so again where it matters, for a direct run)."""
    if precision != "fp32":
        raise Skip(
            f"julia-knet runs fp32 only: Knet 1.4 has no {precision} path (no autocast or loss scaling; "
            "CUDA.jl 2 exposes no TF32 math mode)"
        )


def epoch_orders(n, batch_size, epochs):
    """The training batches of every epoch in the shared order, as an (epochs, steps·batch) int64 array of 0-based
    sample indices (Julia reads it as (steps·batch, epochs): one column per epoch)."""
    return np.stack(
        [
            np.concatenate(list(batching.train_batches(n, batch_size, epoch)))
            if n >= batch_size
            else np.zeros(0, np.int64)
            for epoch in range(epochs)
        ]
    ).astype(np.int64)


def write_config(work, cfg, **extra):
    config = {
        "task": cfg.task,
        "scale": cfg.scale,
        "precision": cfg.precision,
        "device": cfg.device,
        "gpus": cfg.gpus,
        "repeats": cfg.repeats,
        "switches": cfg.switches,
        "params": str(params.JSON_PATH),
        "result": str(work / "result.json"),
        **extra,
    }
    if os.environ.get(CONTRACT_CHECK):
        config["contract_check"] = CONTRACT_TIMES
    path = work / "config.json"
    path.write_text(json.dumps(config, indent=1))
    return path


def run_julia(cfg, arrays, **config):
    """Run the cell's Julia script on `arrays` (name -> NumPy array) and return what it wrote: {metrics, timing,
    switches}. Julia's own output goes to this process's; a Julia error fails the cell with its last lines."""
    no_tuned_path(cfg)
    with tempfile.TemporaryDirectory(prefix=f"julia-knet-{cfg.task}-") as work:
        work = Path(work)
        for name, array in arrays.items():
            np.save(work / f"{name}.npy", np.ascontiguousarray(array))
        config_path = write_config(work, cfg, **config)
        script = (
            [str(HERE / "common.jl"), "--contract-check"]
            if os.environ.get(CONTRACT_CHECK)
            else [str(HERE / f"{cfg.task}.jl")]
        )
        proc = subprocess.run(
            [julia(), "--startup-file=no", *script, str(config_path)], stderr=subprocess.PIPE, text=True
        )
        sys.stderr.write(proc.stderr)
        if proc.returncode != 0:
            raise RuntimeError(
                f"julia {Path(script[0]).name} exited with {proc.returncode}: "
                + "\n".join(proc.stderr.strip().splitlines()[-15:])
            )
        result = json.loads((work / "result.json").read_text())
    if "skipped" in result:
        raise Skip(result["skipped"])
    if "gpu_missing" in result:
        g = result["gpu_missing"]
        raise GpuMissing(g["asked"], g["visible"], g["seen_by"])
    INFO.update(result.get("system", {}))
    return {key: result[key] for key in ("metrics", "timing", "switches")}
