"""Executors launch one cell and can stop it; they share this small protocol and nothing deeper (STYLE.md rule 6).

    launch(cell, out, log, run, devices) -> Popen       start the cell on GPUs `devices` (empty on the CPU); the
                                                        runner writes its record to `out`
    stop(proc)                                          kill it and everything it started (timeouts)
    gpu_ids                                             the GPUs cells may be placed on (empty: one cell at a time)

The local executor runs `python -m runners …` in the framework's own virtual environment; the compose executor
(scripts/compose.py) runs the same command inside the framework's image.
"""
import os
import signal
import subprocess
from dataclasses import dataclass
from pathlib import Path

from scripts.matrix import ROOT


@dataclass(frozen=True)
class RunSettings:
    """What every cell of one run shares."""
    run_id: str
    repeats: int
    timeout_s: float
    data_root: Path            # holds synthetic/ and real/


def runner_args(cell, out, run, data_root):
    """The runner contract's arguments for `cell` (DESIGN.md, "Runner contract")."""
    return [cell.framework, cell.task, "--data", str(Path(data_root) / cell.data), "--out", str(out),
            "--precision", cell.precision, "--gpus", str(cell.gpus), "--device", cell.device, "--scale", cell.scale,
            "--variant", cell.variant, "--run-id", run.run_id, "--repeats", str(run.repeats)]


def popen(argv, log, env=None, cwd=ROOT):
    """Start `argv` in its own process group (so a timeout kills its children too), output into `log`."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "w") as f:
        return subprocess.Popen(argv, stdout=f, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=cwd,
                                env=env, start_new_session=True)


def kill_group(proc):
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()


@dataclass(frozen=True)
class LocalExecutor:
    """A subprocess per cell in the framework's virtual environment (`pythons`: framework id -> interpreter), with
    `root` (the checkout holding runners/ and shared/) as working directory and import path. A GPU cell sees only
    its own devices (CUDA_VISIBLE_DEVICES)."""
    pythons: dict
    root: Path = ROOT
    gpu_ids: tuple = ()

    def launch(self, cell, out, log, run, devices=()):
        env = {**os.environ, "PYTHONPATH": str(self.root), "PYTHONUNBUFFERED": "1"}
        if devices:
            env["CUDA_VISIBLE_DEVICES"] = ",".join(devices)
        argv = [str(self.pythons[cell.framework]), "-m", "runners", *runner_args(cell, out, run, run.data_root)]
        return popen(argv, log, env, cwd=self.root)

    def stop(self, proc):
        kill_group(proc)
