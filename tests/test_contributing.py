"""CONTRIBUTING.md's checklist ("Adding a framework") is complete: followed step by step in a copy of the repository,
it adds a toy NumPy family (tests/data/toy-framework/) that every check a new system must pass without a framework
environment accepts: the skeleton and Rosetta markers, compose and matrix agreeing, the layout, the matrix, the
environments `make venvs` builds, the demo's cells, the images `make images` builds, one ok record through the runner
contract, and the side-by-side pages.

Nothing here reads CONTRIBUTING.md: each edit below cites the step it follows. A step the checklist lacks is an edit
the test must make without a step to cite, and a check that fails in the copy where the edit is left out: the
checklist then gets the step (as it got the compose anchors and twins service, compose.gpu.yaml for a CPU-only family,
tests/test_matrix.py's CPU-only systems and the calibration GEMM). The integration tier: NumPy, toy's one framework,
is in the host environment, but training the toy CNN in NumPy and the copy's checks take about a minute."""

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT

from shared import canonical, datasets

# One worker builds the copy once for the module's tests (tests/conftest.py schedules the group whole).
pytestmark = [pytest.mark.integration, pytest.mark.xdist_group("toy")]

TOY = ROOT / "tests" / "data" / "toy-framework"
HOST_PYTHON = Path(sys.executable)

MATRIX_ENTRY = """\
  toy:
    family: toy           # tests/test_contributing.py's NumPy family (tests/data/toy-framework/)
    python: "3.11"
    tasks: [cnn]
    precisions: [fp32]
    variants:
      cpu:
        base_image: rosetta/debian:bookworm
        requirements: docker/toy/requirements.txt
        device: cpu
"""
COMPOSE_ANCHORS = """\
x-toy-image: &toy-image
  image: ${ROSETTA_REGISTRY:-}rosetta/toy:${ROSETTA_VARIANT:-cpu}
  build: {<<: *not-built, args: {<<: *not-built-args, FAMILY: toy, FRAMEWORK: toy}}
  pull_policy: never
x-toy: &toy
  <<: [*runner, *toy-image]
"""


def edit(path, old, new):
    """Replace the one occurrence of `old` in `path` by `new`; the test fails where the file no longer has it."""
    text = path.read_text()
    assert text.count(old) == 1, f"{path.name}: expected {old!r} once; the checklist test needs updating"
    path.write_text(text.replace(old, new))


def copy_of_the_repository(dest):
    """The files git knows (tracked, and new ones not ignored) as they are in the working tree, and the host
    environment linked in: what a contributor's clone holds before the checklist."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout.decode()
    for name in filter(None, listed.split("\0")):
        source = ROOT / name
        if source.is_file() and not name.startswith("tests/data/toy-framework/"):
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, dest / name)
    (dest / ".venv").mkdir()
    (dest / ".venv" / "host").symlink_to(Path(sys.prefix))
    return dest


def follow_the_checklist(repo):
    """CONTRIBUTING.md's "Adding a framework", steps 1 to 3, for a framework id `toy` of a family `toy`."""
    # Step 1: the runner package, framework_info() and count_parameters() (and the calibration GEMM) in __init__.py,
    # one module per task with the six sections, SWITCHES, build_model / load_canonical / predict_logits, and the
    # `# rosetta:` markers of the task's concepts (step 2's last item).
    shutil.copytree(TOY / "runners" / "toy", repo / "runners" / "toy")
    # Step 2: the id in runners/__init__.py's FRAMEWORKS ...
    init = repo / "runners" / "__init__.py"
    text = init.read_text()
    end = text.index("\n}\n", text.index("FRAMEWORKS = {"))
    init.write_text(text[:end] + '\n    "toy": ("toy", {}),  # NumPy alone (tests/test_contributing.py)' + text[end:])
    # ... its pins in docker/toy/requirements.txt (a CPU-only family: no requirements-cuda.txt) ...
    shutil.copytree(TOY / "docker" / "toy", repo / "docker" / "toy")
    # ... the family in matrix.yaml (family, Python version, tasks, precisions, variants) ...
    edit(repo / "matrix.yaml", "\nprofiles:\n", "\n" + MATRIX_ENTRY + "\nprofiles:\n")
    # ... and its services: in compose.yaml the family's image anchors, one service per task and the family's
    # twins service; in compose.gpu.yaml the same benchmark services (a family without GPU images too).
    edit(repo / "compose.yaml", "\nservices:\n", "\n" + COMPOSE_ANCHORS + "\nservices:\n")
    edit(
        repo / "compose.yaml",
        "\nservices:\n",
        "\nservices:\n  toy-cnn: {<<: *toy, command: [toy, cnn]}\n  twins-toy: {<<: [*twins, *toy-image]}\n",
    )
    gpu = repo / "compose.gpu.yaml"
    gpu.write_text(gpu.read_text().rstrip("\n") + "\n  toy-cnn: *gpu\n")
    # Step 3: the profiles that should run it (demo, and the reference and demo-full that inherit the demo's
    # frameworks); with no GPU image it is not in `full`, so it joins tests/test_matrix.py's CPU-only systems.
    edit(repo / "matrix.yaml", "r-keras, r-mxnet, julia-knet]", "r-keras, r-mxnet, julia-knet, toy]")
    cpu_only = '{"julia-knet", "r-keras", "r-mxnet"}'
    edit(repo / "tests" / "test_matrix.py", cpu_only, cpu_only[:-1] + ', "toy"}')
    return repo


def environment(repo):
    """The copy's own imports, and nothing of the session running this test (its worker, its tier listing)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "ROSETTA_", "COV_"))}
    return {**env, "PYTHONPATH": str(repo)}


def run(repo, *argv, timeout=120):
    return subprocess.run(
        [str(HOST_PYTHON), *argv], cwd=repo, env=environment(repo), capture_output=True, text=True, timeout=timeout
    )


def toy_cnn(repo, data, out, *flags, timeout=120):
    """The runner contract's command line for toy's cnn at the tiny scale on the CPU, in the host environment."""
    argv = f"-m runners toy cnn --data {data} --out {out} --device cpu --scale tiny".split()
    return run(repo, *argv, *flags, timeout=timeout)


@pytest.fixture(scope="module")
def repo(tmp_path_factory):
    return follow_the_checklist(copy_of_the_repository(tmp_path_factory.mktemp("contributing")))


def test_the_checks_a_new_system_must_pass_accept_it(repo):
    """Step 4's `make test-unit` checks that concern a new system, run in the copy: the skeleton and Rosetta markers
    of toy's runner, compose and matrix agreeing, the layout, the matrix's validation, and CONTRIBUTING.md's own
    commands and links. A node id that names toy and is not collected fails too: the checks must see it."""
    nodes = [
        "tests/test_skeleton.py::test_every_framework_has_a_module_per_declared_task",
        "tests/test_skeleton.py::test_runner_module_skeleton[toy/cnn.py]",
        "tests/test_skeleton.py::test_runners_never_import_the_host_side[runners/toy/__init__.py]",
        "tests/test_skeleton.py::test_runners_never_import_the_host_side[runners/toy/cnn.py]",
        "tests/test_site.py::test_every_runner_has_its_six_sections[cnn-toy]",
        "tests/test_site.py::test_every_system_and_task_is_on_the_side_by_side_pages",
        "tests/test_site.py::test_every_runner_marks_every_concept_of_its_task[cnn-toy]",
        "tests/test_site.py::test_every_marker_in_the_runners_names_a_concept_of_its_file",
        "tests/test_containers.py::test_compose_services_and_matrix_agree_both_ways",
        "tests/test_containers.py::test_benchmark_services_are_offline_with_read_only_data",
        "tests/test_layout.py",
        "tests/test_matrix.py",
        "tests/test_docs.py::test_quoted_make_targets_and_variables_exist[CONTRIBUTING.md]",
        "tests/test_docs.py::test_quoted_python_modules_and_flags_exist[CONTRIBUTING.md]",
        "tests/test_docs.py::test_local_links_resolve[CONTRIBUTING.md]",
    ]
    proc = run(repo, *"-m pytest -m unit -n 0 -p no:cacheprovider -q".split(), *nodes, timeout=300)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert re.search(r"\b\d+ passed\b", proc.stdout) and not re.search(r"\b\d+ (failed|skipped|error)", proc.stdout)
    # `make test FRAMEWORK=toy` (--framework toy): the id is known and selects toy's framework-tier tests
    collect = "-m pytest --collect-only -q -p no:cacheprovider --framework toy tests/test_equivalence.py"
    proc = run(repo, *collect.split(), "tests/test_learnability.py")
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "[toy-cnn]" in proc.stdout, proc.stdout[-2000:]


def test_make_venvs_the_demo_and_make_images_take_it_up(repo):
    """Step 3: `make venvs` (no list to edit) builds toy's environment, the demo profile runs its cell, and
    `make images FRAMEWORK=toy` builds its CPU image."""
    proc = run(
        repo,
        "-c",
        "import json; from scripts.launch.venvs import one_per_family, venv_dir, local_requirements;"
        "from scripts.plan.matrix import load; fw = {f.id: f for f in one_per_family(load())}['toy'];"
        "print(json.dumps([str(venv_dir(fw)), str(local_requirements(fw))]))",
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == [str(repo / ".venv" / "toy"), str(repo / "docker" / "toy" / "requirements.txt")]
    proc = run(repo, "-m", "scripts.plan.matrix", "--profile", "demo")
    assert proc.returncode == 0, proc.stderr
    assert [line.strip() for line in proc.stdout.splitlines() if "toy" in line] == ["toy-cnn-cpu-fp32-1cpu"]
    proc = run(repo, "-m", "scripts.launch.images", "--framework", "toy", "--list")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == [{"framework": "toy", "variant": "cpu", "image": "rosetta/toy:cpu"}]


def test_it_keeps_the_runner_contract_with_one_ok_record(repo, tmp_path):
    """`python -m runners toy cnn … --scale tiny` on the synthetic twin (the host environment has NumPy, toy's
    one framework): an ok record the host side's reader accepts, with the canonical parameter count, an accuracy,
    and the calibration GEMM of step 1. A precision NumPy lacks is a skipped record saying why."""
    data = tmp_path / "synthetic"
    datasets.prepare(data, synthetic=True, datasets=("cifar10",))
    out = tmp_path / "toy-cnn.json"
    proc = toy_cnn(repo, data, out, timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    check = (
        "import json, sys; from scripts.results.records import load; r = load(sys.argv[1]);"
        "print(json.dumps([r.status, r.cell.framework, r.metrics.get('parameters'), r.metrics.get('accuracy'),"
        "(r.system.get('calibration') or {}).get('gemm_fp32_flops')]))"
    )
    proc = run(repo, "-c", check, str(out))
    assert proc.returncode == 0, proc.stderr
    status, framework, parameters, accuracy, gemm = json.loads(proc.stdout)
    assert (status, framework, parameters) == ("ok", "toy", canonical.count("cnn"))
    assert 0 <= accuracy <= 1 and gemm and gemm > 0
    skipped = tmp_path / "bf16.json"
    proc = toy_cnn(repo, data, skipped, "--precision", "bf16")
    record = json.loads(skipped.read_text())
    assert proc.returncode == 0 and record["status"] == "skipped" and "fp32 only" in record["reason"]


def test_the_side_by_side_pages_show_it_with_no_site_change(repo):
    """No step touches the site or the report: scripts/results/site.py takes its systems from FRAMEWORKS and
    matrix.yaml, so toy's runner has its column on the Rosetta page of its task (the page `make site` writes), every
    concept of the task a snippet linked to its marked line, and its name on the first page's list of systems."""
    show = (
        "import json; from scripts.results import rosetta, site; page = site.rosetta_page('cnn', "
        "site.runner_files()['cnn']); print(json.dumps([page, list(rosetta.TASK_CONCEPTS['cnn']), "
        "site.index_page([], [])]))"
    )
    proc = run(repo, "-c", show)
    assert proc.returncode == 0, proc.stderr[-2000:]
    page, concepts, index = json.loads(proc.stdout)
    links = re.findall(r'href="src/runners/toy/(?:cnn|__init__)\.py\.html#L-(\d+)"', page)
    assert len(links) >= len(concepts), f"{len(links)} of toy's snippets linked for {len(concepts)} concepts"
    assert "<code>toy</code>" in index
