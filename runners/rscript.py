"""The bridge to the R runners (r-keras, r-mxnet): run one task's R script with `Rscript` and read back its result.

The R scripts (runners/r_keras/*.R, runners/r_mxnet/*.R) are the code a reader compares; they drive the Python
frameworks through `reticulate`, in this very interpreter's environment (RETICULATE_PYTHON = sys.executable), so R
and Python runners share one install, one data loader, one batch order and one timing vocabulary. The contract stays
Python's: `python -m runners r-keras cnn …`; shared/runner.py writes the record as for every runner.

    Rscript --vanilla runners/r_keras/cnn.R CONFIG.json RESULT.json
CONFIG.json holds the cell (RunConfig's fields) and its hyperparameters (`params`); RESULT.json gets either
{metrics, timing, switches} or {error: {message, skip}} (runners/rscript.R writes it). An R error becomes an RError
whose message is R's own; a Skip raised by a Python helper the script calls stays a Skip.
"""

import json
import os
import subprocess
import sys
import tempfile
from collections import deque
from functools import cache
from pathlib import Path

import numpy as np

from shared.record import Skip
from shared.runner import no_tuned_path

ROOT = Path(__file__).resolve().parents[1]
OUTPUT_TAIL_LINES = 30
INSTALL_HINT = (
    "install R and reticulate (Debian: `apt-get install r-base-core r-cran-reticulate r-cran-jsonlite`) "
    "or run the cell in its image"
)


class RError(RuntimeError):
    """An R script failed; the message is R's error message (plus its output's tail where R died without one).
    A host without R at all skips the cell with what to install, as a host without a legacy Python does; R that is
    there but cannot load reticulate is a broken install and fails it."""


def r_environment(extra=None):
    """The environment R runs in: reticulate drives this interpreter, which imports `shared` and `runners` from ROOT."""
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)
    return {
        **os.environ,
        "RETICULATE_PYTHON": sys.executable,
        "PYTHONPATH": path,
        "ROSETTA_ROOT": str(ROOT),
        "PYTHONUNBUFFERED": "1",
        **(extra or {}),
    }


def rscript(args, extra_env=None):
    """Run `Rscript --vanilla ARGS…`, streaming its output (stdout and stderr) to ours; returns (exit code, tail)."""
    try:
        proc = subprocess.Popen(
            ["Rscript", "--vanilla", *map(str, args)],
            cwd=ROOT,
            env=r_environment(extra_env),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            bufsize=1,
        )
    except FileNotFoundError:
        raise Skip(f"R is not installed on this host (no Rscript on PATH): {INSTALL_HINT}") from None
    tail = deque(maxlen=OUTPUT_TAIL_LINES)
    with proc.stdout:
        for line in proc.stdout:
            sys.stdout.write(line)
            tail.append(line.rstrip("\n"))
    sys.stdout.flush()
    return proc.wait(), "\n".join(tail)


def read_result(path, code, tail, script):
    """The R script's result, or its error as an exception (Skip stays Skip: the cell is `skipped`, not `failed`)."""
    try:
        result = json.loads(Path(path).read_text())
    except (OSError, ValueError):
        raise RError(f"{script.name} ended (exit code {code}) without a result; R's output ends:\n{tail}") from None
    error = result.get("error")
    if error:
        raise (Skip if error.get("skip") else RError)(error["message"])
    return result


def config_of(cfg):
    """The cell as the R scripts read it (read_config)."""
    return {
        "framework": cfg.framework,
        "task": cfg.task,
        "data": str(Path(cfg.data).resolve()),
        "out": str(cfg.out),
        "precision": cfg.precision,
        "gpus": cfg.gpus,
        "device": cfg.device,
        "scale": cfg.scale,
        "variant": cfg.variant,
        "run_id": cfg.run_id,
        "repeats": cfg.repeats,
        "switches": cfg.switches,
        "params": cfg.params,
    }


def run_script(script, cfg):
    """A task module's `main(cfg)`: run `script` on the cell `cfg`; returns {metrics, timing, switches}."""
    no_tuned_path(cfg)
    script = Path(script)
    with tempfile.TemporaryDirectory(prefix="rosetta-r-") as tmp:
        config_path, result_path = Path(tmp, "config.json"), Path(tmp, "result.json")
        config_path.write_text(json.dumps(config_of(cfg)))
        code, tail = rscript([script, config_path, result_path])
        return read_result(result_path, code, tail, script)


@cache
def r_versions():
    """(R version, reticulate version), asked of the Rscript on PATH."""
    expr = 'cat(paste(getRversion()), paste(utils::packageVersion("reticulate")))'
    try:
        proc = subprocess.run(["Rscript", "--vanilla", "-e", expr], capture_output=True, text=True, timeout=120)
    except FileNotFoundError:
        raise Skip(f"R is not installed on this host (no Rscript on PATH): {INSTALL_HINT}") from None
    if proc.returncode != 0:
        raise RError(f"R cannot load reticulate ({proc.stderr.strip()[-500:]}): {INSTALL_HINT}")
    r, reticulate = proc.stdout.split()
    return r, reticulate


def r_info(framework_version):
    """The system block's R part: "R 4.2.2 / reticulate 1.28 / FRAMEWORK VERSION" and the two runtime versions."""
    r, reticulate = r_versions()
    return {
        "framework_version": f"R {r} / reticulate {reticulate} / {framework_version}",
        "r_version": r,
        "reticulate_version": reticulate,
    }


class RModel:
    """The equivalence interface (tests/fw_probe.py: build_model, load_canonical, predict_logits, count_parameters)
    for a task whose model lives in R: the weights are kept here and `predict_logits` runs
    `Rscript runners/rscript.R probe SCRIPT IN.npz OUT.npz`, which builds the model in R, loads them and writes the
    logits and the parameter count."""

    def __init__(self, script):
        self.script, self.weights, self.parameters = Path(script), {}, None

    def load_canonical(self, weights):
        self.weights = {name: np.asarray(a) for name, a in weights.items()}

    def predict_logits(self, x):
        with tempfile.TemporaryDirectory(prefix="rosetta-r-probe-") as tmp:
            inputs, output = Path(tmp, "in.npz"), Path(tmp, "out.npz")
            np.savez(inputs, x=np.asarray(x), **self.weights)
            code, tail = rscript([ROOT / "runners" / "rscript.R", "probe", self.script, inputs, output])
            if code != 0 or not output.exists():
                raise RError(f"the R probe of {self.script.name} failed (exit code {code}):\n{tail}")
            out = np.load(output)
            self.parameters = int(out["parameters"])
            return out["logits"]


def save_steps(output, result):
    """Write what an R script's train_steps returned, (losses, weights after each step), as tests/fw_probe.py
    writes it (called from R by rscript.R's train_probe)."""
    losses, after = result
    np.savez(
        output,
        loss=np.asarray([float(v) for v in losses]),
        **{
            f"{s}:{name}": np.asarray(w, np.float32)
            for s, weights in enumerate(after, start=1)
            for name, w in weights.items()
        },
    )


def train_steps_in_r(script, cfg, weights, x, y, steps):
    """The training-equivalence entry (tests/fw_probe.py) of a task whose model lives in R: the script's own
    train_steps, run by `Rscript runners/rscript.R train_probe …`; (each step's loss, weights after each)."""
    with tempfile.TemporaryDirectory(prefix="rosetta-r-train-") as tmp:
        config, inputs, output = Path(tmp, "config.json"), Path(tmp, "in.npz"), Path(tmp, "out.npz")
        config.write_text(json.dumps(config_of(cfg)))
        np.savez(inputs, x=np.asarray(x), y=np.asarray(y), **weights)
        code, tail = rscript([ROOT / "runners" / "rscript.R", "train_probe", script, config, inputs, output, steps])
        if code != 0 or not output.exists():
            raise RError(f"the R training probe of {Path(script).name} failed (exit code {code}):\n{tail}")
        out = dict(np.load(output))
    losses = list(out.pop("loss"))
    after = [
        {name.split(":", 1)[1]: w for name, w in out.items() if name.startswith(f"{s}:")} for s in range(1, steps + 1)
    ]
    return losses, after


def task(module_file):
    """What a task module next to its R script (runners/r_keras/cnn.py beside cnn.R) exposes: `main(cfg)` for the
    runner contract, build_model / load_canonical / predict_logits for the equivalence test (tests/fw_probe.py; the
    model is built in R when predict_logits runs) and train_steps for the training-equivalence test."""
    script = Path(module_file).with_suffix(".R")
    return (
        lambda cfg: run_script(script, cfg),
        lambda cfg=None: RModel(script),
        lambda model, weights: model.load_canonical(weights),
        lambda model, x: model.predict_logits(x),
        lambda cfg, weights, x, y, steps: train_steps_in_r(script, cfg, weights, x, y, steps),
    )


def count_parameters(model):
    """Trainable parameters of an RModel, as the R side counted them (after predict_logits)."""
    if model.parameters is None:
        raise ValueError("the R model has not run yet: call predict_logits first (the R probe counts as it runs)")
    return model.parameters
