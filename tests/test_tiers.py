"""The suite's shape (docs/testing.md): every test carries exactly one tier marker, by what it needs, and a unit test
cannot start a framework's environment."""

import ast
import json
import os
import subprocess
import sys

import probe
import pytest
from conftest import ROOT, TIERS, dearest_first, framework_python, scope_of, seconds_of

# one worker runs the module: test_an_unmarked_test_is_named writes a file into tests/ that a collection of the whole
# folder running beside it would find
pytestmark = [pytest.mark.unit, pytest.mark.xdist_group("tiers")]


def collected(tmp_path, *args):
    listing = tmp_path / "tiers.json"
    argv = [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", *args]
    proc = subprocess.run(
        argv,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "ROSETTA_TIER_LIST": str(listing)},
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return json.loads(listing.read_text())


def test_every_test_carries_exactly_one_tier(tmp_path):
    tiers = collected(tmp_path)
    wrong = {test: marks for test, marks in tiers.items() if len(marks) != 1}
    assert not wrong, f"{len(wrong)} test(s) without exactly one of {TIERS} (docs/testing.md): " + "; ".join(
        f"{test} {marks}" for test, marks in list(wrong.items())[:20]
    )
    assert {marks[0] for marks in tiers.values()} == set(TIERS)


def test_an_unmarked_test_is_named(tmp_path):
    """The check has teeth: a test file with an unmarked test among marked ones fails it."""
    folder = ROOT / "tests"
    probe = folder / f"test_zz_unmarked_{os.getpid()}.py"
    probe.write_text(
        "import pytest\n\n@pytest.mark.unit\ndef test_marked():\n    pass\n\ndef test_unmarked():\n    pass\n"
    )
    try:
        tiers = collected(tmp_path, str(probe))
    finally:
        probe.unlink()
    assert tiers == {f"tests/{probe.name}::test_marked": ["unit"], f"tests/{probe.name}::test_unmarked": []}


def test_framework_selects_one_frameworks_tests(tmp_path):
    tiers = collected(tmp_path, "--framework", "chainer", "tests/test_equivalence.py")
    assert tiers and all("chainer" in test for test in tiers) and set(map(tuple, tiers.values())) == {("framework",)}
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "--framework", "nosuch", "tests/test_tiers.py"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode != 0 and "--framework nosuch: not a framework" in proc.stdout + proc.stderr


def test_a_unit_test_cannot_start_a_framework():
    with pytest.raises(pytest.fail.Exception, match="mark it `framework`"):
        framework_python("pytorch")


def test_the_scheduler_keeps_each_probe_and_each_grouped_module_on_one_worker():
    """tests/conftest.py's scope_of: what pytest-xdist hands a worker as one unit (xdist_group itself is inert)."""
    decorated = {
        f"tests/{path.name}::{node.name}"
        for path in (ROOT / "tests").glob("test_*.py")
        for node in ast.parse(path.read_text()).body
        if isinstance(node, ast.FunctionDef) and any("probe.job" in ast.unparse(d) for d in node.decorator_list)
    }
    assert decorated == probe.TESTS
    assert scope_of("tests/test_equivalence.py::test_same_weights_same_logits[keras-tf-cnn]") == "probe-keras-tf"
    assert scope_of("tests/test_training_equivalence.py::test_same_training_steps[tensorflow-gru-default]") == (
        "probe-tensorflow"
    )
    # each tuned task has a probe of its own, the same for its training steps and its whole cell
    assert scope_of("tests/test_training_equivalence.py::test_same_training_steps[keras-torch-gru-tuned]") == (
        "probe-keras-torch-tuned-gru"
    )
    whole = "tests/test_runner_contract.py::test_every_tuned_training_cell_runs_whole[keras-torch-gru-tuned]"
    assert scope_of(whole) == "probe-keras-torch-tuned-gru"
    assert scope_of("tests/test_learnability.py::test_runner_learns[keras2-theano-gru]") == "probe-keras2-theano"
    assert scope_of("tests/test_slurm.py::test_dry_run_writes_the_scripts_for_each_runtime") == "slurm"
    alone = "tests/test_learnability.py::test_feature_and_multi_device_tasks_run[jax-densenet121]"
    assert scope_of(alone) == alone


def test_the_dearest_units_of_work_are_handed_out_first():
    """tests/conftest.py's dearest_first: the scheduler's order is the collection's, dearest unit first, so no
    long probe starts after the cheap tests are gone; a unit's tests and units of equal cost keep their order."""
    ids = [
        "tests/test_api.py::test_a",
        "tests/test_equivalence.py::test_same_weights_same_logits[pytorch-cnn]",
        "tests/test_api.py::test_b",
        "tests/test_learnability.py::test_feature_and_multi_device_tasks_run[jax-densenet121]",
        "tests/test_training_equivalence.py::test_same_training_steps[keras-torch-gru-tuned]",
        "tests/test_learnability.py::test_runner_learns[pytorch-cnn]",
        "tests/test_runner_contract.py::test_every_tuned_training_cell_runs_whole[keras-torch-gru-tuned]",
        "tests/test_slurm.py::test_one",
    ]
    items = [type("Item", (), {"nodeid": nodeid})() for nodeid in ids]
    dearest_first(items)
    assert [item.nodeid for item in items] == [ids[4], ids[6], ids[3], ids[7], ids[1], ids[5], ids[0], ids[2]]
    assert seconds_of("tests/test_api.py::test_a") == 1
