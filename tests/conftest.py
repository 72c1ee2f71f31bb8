"""Shared fixtures: the project root, the synthetic data, the framework environments, and the tiers.

Framework tests run in each framework's own virtual environment (.venv/FAMILY, `python -m scripts.launch.venvs ID`).
Outside CI a missing environment skips its tests with the command that builds it; in CI (CI=true) it fails them.

Every test carries exactly one tier marker, by what it needs (docs/testing.md): unit, framework, integration or
network. `--framework ID` (make test FW=ID) keeps the tests of one framework; a unit test that asks for a framework's
environment fails, naming the tier it belongs in.
"""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import probe  # noqa: E402

from runners import FRAMEWORKS  # noqa: E402
from scripts.launch.venvs import python_of  # noqa: E402
from scripts.plan.matrix import load  # noqa: E402
from shared import datasets  # noqa: E402

IN_CI = os.environ.get("CI") == "true"
TIERS = ("unit", "framework", "integration", "network")
_running = {"tiers": ()}  # the tier markers of the test running now in this process


def tiers_of(item):
    return [mark.name for mark in item.iter_markers() if mark.name in TIERS]


def framework_of(item):
    spec = getattr(item, "callspec", None)
    return spec.params.get("framework") if spec else None


def pytest_addoption(parser):
    parser.addoption("--framework", metavar="ID", help="only the tests of framework ID (make test FW=ID)")


def pytest_collection_modifyitems(config, items):
    wanted = config.getoption("--framework")
    if wanted:
        if wanted not in FRAMEWORKS:
            raise pytest.UsageError(f"--framework {wanted}: not a framework; choose one of {', '.join(FRAMEWORKS)}")
        chosen = [item for item in items if framework_of(item) == wanted]
        config.hook.pytest_deselected(items=[item for item in items if framework_of(item) != wanted])
        items[:] = chosen
    if os.environ.get("PYTEST_XDIST_WORKER"):  # the order the workers' collections give the scheduler
        dearest_first(items)
    listing = os.environ.get("ROSETTA_TIER_LIST")  # tests/test_tiers.py: every collected test and its tiers
    if listing:
        Path(listing).write_text(json.dumps({item.nodeid: tiers_of(item) for item in items}))


# pytest-xdist 3.8's `xdist_group` writes the group into item._nodeid, which pytest 9 no longer reads: the mark groups
# nothing. This scheduler groups by what a test id shows instead: a module whose tests share a group (its pytestmark
# names one: the Compose project, the Slurm cluster, Julia's container, the image builds) goes to one worker whole,
# and so do one probe's tests (tests/probe.py), so each probe is started by one worker, once.
GROUPED_MODULES = {
    f"tests/{path.name}": match.group(1)
    for path in sorted(Path(__file__).parent.glob("test_*.py"))
    for match in [re.search(r'^pytestmark = .*xdist_group\("([\w-]+)"\)', path.read_text(), re.M)]
    if match
}


def scope_of(nodeid):
    """The unit of work a test belongs to: its module's group, its framework's probe, or the test alone."""
    module, _, name = nodeid.partition("::")
    if module in GROUPED_MODULES:
        return GROUPED_MODULES[module]
    function, _, params = name.partition("[")
    if f"{module}::{function}" in probe.TESTS:
        framework = max((f for f in FRAMEWORKS if params.startswith(f"{f}-")), key=len, default=None)
        if framework:  # the id's parameters after the framework: TASK or TASK-TUNING
            task, _, tuning = params[len(framework) + 1 : -1].partition("-")
            return "probe-" + probe.probe_of(framework, probe.Job("", task, tuning or "default"))
    return nodeid


# What a unit of work cost in CI (two cores, tests/fw_probe.py's per-job times and --durations on d593fb0), in
# seconds, where it is far above a typical test's: the scheduler hands out the dearest first, so the last unit to
# start is a cheap one and the workers finish together (longest processing time first). pytest-xdist's own order is by
# test count, which started keras-torch's tuned GRU probe (two tests, 495 s) twenty minutes into `make test`.
# Estimates, not assertions: a wrong one costs wall time, never a result (docs/testing.md).
SCOPE_SECONDS = {
    "compose": 450,  # tests/test_containers.py: the Compose profile, the data folders, the user's own call
    "probe-keras-torch-tuned-gru": 500,  # torch.compile inside Keras: its GRU steps compile for minutes
    "probe-keras-torch-tuned-cnn": 240,
    "probe-jax-tuned-cnn": 190,
    "slurm": 120,
    "tests/test_demo.py::test_smoke_profile_end_to_end": 120,
    "site": 90,  # the unit tier's dearest: tests/test_site.py builds the site once and reads it page by page
    "tiers": 30,  # tests/test_tiers.py collects the whole suite three times
    "toy": 40,  # tests/test_contributing.py: a copy of the repository, its checks, and a toy CNN trained in NumPy
}
PREFIX_SECONDS = {
    # DenseNet-121 on two CPU devices: a process each, its train step compiled (TensorFlow, Keras, JAX: 110-170 s)
    "tests/test_learnability.py::test_feature_and_multi_device_tasks_run[": 120,
    "probe-": 60,  # a framework's default probe, or a tuned task's: its start and every job
    "tests/test_gpu_check.py::": 10,  # gpu_check on a fake machine: a run of the check, 6-17 s each
}


def seconds_of(scope):
    """The expected cost of a unit of work (scope_of), for the order it is handed out in; 1 s for a plain test."""
    if scope in SCOPE_SECONDS:
        return SCOPE_SECONDS[scope]
    return max((s for prefix, s in PREFIX_SECONDS.items() if scope.startswith(prefix)), default=1)


def dearest_first(items):
    """`items` reordered so that the units of work the scheduler cuts them into come dearest first; a unit's tests
    keep their order, and so do the units of equal cost (a stable sort)."""
    cost = {scope: seconds_of(scope) for scope in {scope_of(item.nodeid) for item in items}}
    items.sort(key=lambda item: -cost[scope_of(item.nodeid)])


def pytest_xdist_make_scheduler(config, log):
    from xdist.scheduler import LoadScopeScheduling

    class ByNeed(LoadScopeScheduling):
        """Units of work by scope_of, handed out in the collection's order, which dearest_first made."""

        def _split_scope(self, nodeid):
            return scope_of(nodeid)

    config.option.loadscopereorder = False  # its reorder is by test count: keep the collection's (dearest first)
    return ByNeed(config, log)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    """The test's tiers, set before any of its fixtures (a module fixture that starts a framework counts too)."""
    _running["tiers"] = tuple(tiers_of(item))


def framework_python(framework):
    """The interpreter of `framework`'s environment; skip (or, in CI, fail) where it has not been built."""
    if "unit" in _running["tiers"]:
        pytest.fail(f"a unit test asked for {framework}'s environment: mark it `framework` (docs/testing.md)")
    python = python_of(load().frameworks[framework])
    if not python.exists():
        message = f"{python} missing: build it with `python -m scripts.launch.venvs {framework}`"
        pytest.fail(message) if IN_CI else pytest.skip(message)
    return python


def run_runner(framework, task, out, *args, data=None, timeout=600, env=None):
    """`python -m runners FRAMEWORK TASK …` in the framework's environment; returns the CompletedProcess."""
    argv = [
        str(framework_python(framework)),
        "-m",
        "runners",
        framework,
        task,
        "--data",
        str(data),
        "--out",
        str(out),
        "--device",
        "cpu",
        *args,
    ]
    return subprocess.run(
        argv,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})},
    )


# ---------------------------------------------------------------- records as a slower (or faster) install makes them

RATES = ("samples_per_second", "steady_samples_per_second", "achieved_flops", "efficiency", "efficiency_of_gemm")


def rates_over(record, factor, keys=RATES):
    """The record's throughputs and what follows from them (FLOP/s, efficiencies) for times `factor` × longer: a
    slower install is slower in every figure it publishes (records.inconsistencies refuses one that is not)."""
    metrics = record["metrics"]
    for key in keys:
        if metrics.get(key) is not None:
            metrics[key] /= factor
    return record


def scale_clocks(record, factor):
    """`record`, in place, as if every clock had read `factor` × its time: samples, medians, epochs, totals, and
    every rate that follows from them."""
    timing, metrics = record["timing"], record["metrics"]
    for key in ("values", "warmup_windows"):
        timing[key] = [v * factor for v in timing.get(key) or []]
    for key in ("median", "min", "max", "q1", "q3", "warmup"):
        if timing.get(key) is not None:
            timing[key] *= factor
    for key in ("train_seconds", "steady_state_seconds", "seconds_per_1000_images", "train_minutes", "warmup_seconds"):
        if metrics.get(key) is not None:
            metrics[key] *= factor
    if metrics.get("epoch_seconds"):
        metrics["epoch_seconds"] = [s * factor for s in metrics["epoch_seconds"]]
    return rates_over(record, factor)


@pytest.fixture(scope="session")
def synthetic_data(tmp_path_factory):
    """The synthetic twins of all three datasets, generated once per test session."""
    root = tmp_path_factory.mktemp("data") / "synthetic"
    datasets.prepare(root, synthetic=True)
    return root


@pytest.fixture(scope="session")
def probes(request, tmp_path_factory, synthetic_data):
    """Each framework's probe process (tests/probe.py), started once, when its first test asks."""
    # pytest-xdist's workers share the run's folder (each has its own below it): one probe a framework, not a worker
    run = tmp_path_factory.getbasetemp()
    shared = run.parent if os.environ.get("PYTEST_XDIST_WORKER") else run
    folder = shared / "probes"
    folder.mkdir(exist_ok=True)
    return probe.Probes(request.session, folder, framework_python, synthetic_data)


# Every framework whose model code can run here. julia-knet's cannot (Knet is not installable without Julia's
# registry): tests/test_julia_runner.py checks what of it runs here (parsing, the contract part, the skip).
ALL_FRAMEWORKS = [f for f in FRAMEWORKS if f != "julia-knet"]


def framework_tasks(tasks, frameworks=ALL_FRAMEWORKS):
    """(framework, task) pairs for parametrize: each framework with the tasks of `tasks` that matrix.yaml declares
    for it (mxnet-module has no DenseNet-121, for example), so a test never asks a runner for a task it lacks."""
    declared = load().frameworks
    return [(f, t) for f in frameworks for t in tasks if t in declared[f].tasks]
