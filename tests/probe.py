"""One process per framework for the framework tier: every probe job of a framework's selected tests, in one start.

Starting a framework's environment costs seconds to minutes before any test work (TensorFlow's import, Theano's C
compile of its ops, CNTK's and Caffe2's libraries). The forward-equivalence, training-equivalence and learnability tests
used to start one process per framework × task × check; now the first of them that asks for a framework starts
tests/fw_probe.py once in its environment, with every job of that framework's tests in this session (only those
selected: `-k cnn` probes no GRU), and each test asserts on its own job's plain result, as it did on its own process.

A job is (kind, task, tuning):
- "forward": the canonical weights and a fixed input through `build_model` / `load_canonical` / `predict_logits`;
- "train": the runner's `train_steps` from the canonical start on one fixed batch (tests/test_training_equivalence.py);
- "run": the runner's whole cell through `python -m runners`' own `main`, at the tiny scale, writing its record.
A framework's default jobs share one probe; each tuned task gets a probe of its own (`probe_of`), so no tuned
switch (a compiler cache, a global jit flag) can reach a default check, and the compiles of the tuned paths (minutes
each with torch.compile inside Keras) spread over the workers instead of queueing behind one another. The
multi-device cells (DenseNet-121 on two CPU devices) keep a process each: TensorFlow and JAX fix their device count
when their runtime starts (runners/tensorflow/__init__.py, runners/jax/__init__.py).

pytest-xdist's workers share the probes' folder: the first worker to need a probe runs it under a file lock and the
other reads what it left, so each probe starts once a session, wherever its tests are scheduled.
(`xdist_group` cannot keep them on one worker here: pytest-xdist 3.8 writes the group into `item._nodeid`, which
pytest 9 no longer reads, so the mark groups nothing.)
"""

import fcntl
import json
import subprocess
from pathlib import Path
from typing import NamedTuple

import numpy as np
import pytest

from scripts.results.records import write_replacing
from shared import canonical, params

ROOT = Path(__file__).resolve().parents[1]
PROBE = ROOT / "tests" / "fw_probe.py"
TIMEOUT = 3600  # one framework's every job; a test that waits on the probe gets as long (see `job`)


class Job(NamedTuple):
    kind: str  # forward | train | run
    task: str
    tuning: str = "default"

    @property
    def name(self):
        return f"{self.kind}-{self.task}-{self.tuning}"


# The tests that assert on a probe's jobs, as their ids begin (tests/conftest.py schedules them by framework).
TESTS = {
    "tests/test_equivalence.py::test_same_weights_same_logits",
    "tests/test_training_equivalence.py::test_same_training_steps",
    "tests/test_learnability.py::test_runner_learns",
    "tests/test_runner_contract.py::test_every_tuned_training_cell_runs_whole",
}


def job(kind):
    """Decorator: the test asserts on the probe's `kind` job of its (framework, task[, tuning]) parameters."""

    def mark(test):
        test.probe_kind = kind
        return pytest.mark.timeout(TIMEOUT)(test)

    return mark


def probe_of(framework, job):
    """The probe that runs `job`: the framework's default jobs share one; each tuned task has its own."""
    return framework if job.tuning == "default" else f"{framework}-{job.tuning}-{job.task}"


def job_of(item):
    kind = getattr(getattr(item, "function", None), "probe_kind", None)
    spec = getattr(item, "callspec", None)
    if kind is None or spec is None or "framework" not in spec.params:
        return None, None
    return spec.params["framework"], Job(kind, spec.params["task"], spec.params.get("tuning", "default"))


# ---------------------------------------------------------------- each kind's inputs (fixed seeds)


def inputs(task):
    """The forward check's input batch."""
    rng = np.random.default_rng(7)
    if task == "cnn":
        return rng.random((5, 3, 32, 32), dtype=np.float32)
    if task == "gru":
        return rng.integers(0, params.GRU["max_features"], (5, 23)).astype(np.int32)
    return rng.standard_normal((2, 3, 64, 64), dtype=np.float32)  # ImageNet-normalized range; 64×64 keeps it fast


GRU_LENGTH = params.task_params("gru", "tiny")["maxlen"]


def batch(task):
    """One fixed batch of the task's batch size: CIFAR-like images in [0, 1], or token ids over the whole vocabulary
    (so some repeat within the batch: the sparse-squares rule shows) and labels. The GRU's sequences are the tiny
    scale's length, 40 steps, not IMDB's 150: the recurrence is the same at every step, and a step compiled by
    torch.compile inside Keras unrolls it (keras-torch's tuned three steps took 351 s in CI at 150)."""
    rng = np.random.default_rng(11)
    p = params.TASK_PARAMS[task]
    if task == "cnn":
        return rng.random((p["batch_size"], 3, 32, 32), dtype=np.float32), rng.integers(0, 10, p["batch_size"])
    tokens = rng.integers(1, p["max_features"], (p["batch_size"], GRU_LENGTH)).astype(np.int32)
    return tokens, rng.integers(0, 2, p["batch_size"])


TRAIN_STEPS = 3


def write_inputs(framework, job, folder, data):
    """The job's entry of the plan tests/fw_probe.py reads, its input files written into `folder`."""
    entry = {
        "name": job.name,
        "kind": job.kind,
        "task": job.task,
        "tuning": job.tuning,
        "out": str(folder / f"{job.name}.out"),
    }
    if job.kind == "forward":
        np.savez(folder / f"{job.name}.npz", x=inputs(job.task), **canonical.random_weights(job.task))
        entry["in"] = str(folder / f"{job.name}.npz")
    elif job.kind == "train":
        x, y = batch(job.task)
        np.savez(folder / f"{job.name}.npz", x=x, y=y.astype(np.int32), **canonical.init_weights(job.task))
        entry.update({"in": str(folder / f"{job.name}.npz"), "steps": TRAIN_STEPS})
    else:
        entry["argv"] = [
            framework,
            job.task,
            "--data",
            str(data),
            "--out",
            entry["out"],
            "--device",
            "cpu",
            "--scale",
            "tiny",
            "--tuning",
            job.tuning,
        ]
    return entry


# ---------------------------------------------------------------- the session's probes


class Probes:
    """The probe results of this session, one probe process per `probe_of`, started on first use."""

    def __init__(self, session, folder, python_of, data):
        self.session, self.folder, self.python_of, self.data = session, folder, python_of, data
        self.done = {}

    def jobs(self, framework, name):
        """The jobs of probe `name`'s selected tests (forward, train, run; by task in each)."""
        wanted = {job for f, job in map(job_of, self.session.items) if f == framework and probe_of(f, job) == name}
        order = {"forward": 0, "train": 1, "run": 2}
        return sorted(wanted, key=lambda j: (order[j.kind], j.task))

    def result(self, framework, job):
        name = probe_of(framework, job)
        if name not in self.done:
            self.done[name] = self.start(framework, name, self.jobs(framework, name) or [job])
        outcome = self.done[name]
        if isinstance(outcome, str):
            pytest.fail(f"the {name} probe did not finish: {outcome}")
        entry = outcome.get(job.name)
        if entry is None:
            pytest.fail(f"the {framework} probe had no {job.name} job (was the test selected at collection?)")
        return entry

    def start(self, framework, name, jobs):
        """The probe's outcome: {job name: {error, out, log}}, or why it did not finish. pytest-xdist's workers share
        `self.folder`: the first to need a probe runs it under a lock, the other reads what it left."""
        folder = self.folder / name
        folder.mkdir(parents=True, exist_ok=True)
        with open(self.folder / f"{name}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            done = folder / "outcome.json"
            if not done.exists():
                write_replacing(done, json.dumps(self.run(framework, jobs, folder)))
            return json.loads(done.read_text())

    def run(self, framework, jobs, folder):
        python = self.python_of(framework)
        plan = [write_inputs(framework, j, folder, self.data) for j in jobs]
        (folder / "plan.json").write_text(json.dumps(plan, indent=1))
        try:
            proc = subprocess.run(
                [str(python), str(PROBE), framework, str(folder / "plan.json")],
                cwd=ROOT,
                capture_output=True,
                text=True,
                timeout=TIMEOUT,
            )
        except subprocess.TimeoutExpired:
            return f"timed out after {TIMEOUT} s running {[j.name for j in jobs]}"
        log = folder / "log.txt"
        log.write_text(proc.stdout[-20000:] + proc.stderr[-20000:])
        found = {}
        for entry in plan:
            out, error = Path(entry["out"]), Path(entry["out"] + ".error")
            found[entry["name"]] = {
                "error": error.read_text() if error.exists() else None,
                "out": str(out) if out.exists() else None,
                "log": str(log),
            }
        if proc.returncode != 0 and not any(e["error"] for e in found.values()):
            return f"exit {proc.returncode}: {proc.stderr[-3000:]}"
        return found


def outcome(entry, framework, job):
    """The job's output file; the test fails with the job's own traceback where it raised."""
    assert entry["error"] is None, f"{framework} {job.name} raised in the probe:\n{entry['error'][-3000:]}"
    assert entry["out"] is not None, (
        f"{framework} {job.name}: no output; probe log:\n" + Path(entry["log"]).read_text()[-3000:]
    )
    return Path(entry["out"])
