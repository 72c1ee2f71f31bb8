"""The house style that readers rely on: the same sections, names and imports in every runner module."""

import ast
import re

import pytest
from conftest import ROOT

from runners import FRAMEWORKS
from scripts.plan.matrix import load
from shared import params

pytestmark = pytest.mark.unit

SECTIONS = ["Config", "Data", "Model", "Train step", "Evaluate", "Main"]
NAMES = {"load_data", "build_model", "evaluate", "main"}
FRAMEWORK_MODULES = {
    "torch",
    "torchvision",
    "tensorflow",
    "keras",
    "jax",
    "jaxlib",
    "flax",
    "optax",
    "mxnet",
    "chainer",
    "cntk",
    "theano",
    "lasagne",
    "caffe2",
}
# A task module beside a script of the same name in another language (runners/r_keras/cnn.py launches cnn.R, and
# runners/julia_knet/cnn.py cnn.jl: tests/test_julia_runner.py checks those) is a
# launcher: the script is the code people read, so the script is what the skeleton test checks.
R_SCRIPTS = sorted(p for p in (ROOT / "runners").glob("*/*.R") if p.stem in params.TASKS)
RUNNER_MODULES = sorted(
    p
    for p in (ROOT / "runners").glob("*/*.py")
    if p.stem in params.TASKS and not p.with_suffix(".R").exists() and not p.with_suffix(".jl").exists()
)


def imported_modules(path):
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            yield node.module.split(".")[0]


def test_every_framework_has_a_module_per_declared_task():
    """matrix.yaml's tasks of each framework id exist as modules of its runner package (runners/__init__.py)."""
    for fid, fw in load().frameworks.items():
        package = ROOT / "runners" / FRAMEWORKS[fid][0]
        assert {p.stem for p in package.glob("*.py")} >= set(fw.tasks), fid


@pytest.mark.parametrize("path", RUNNER_MODULES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_runner_module_skeleton(path):
    text = path.read_text()
    tree = ast.parse(text)
    assert ast.get_docstring(tree), "a header docstring says framework, version, task"
    found = re.findall(r"^# ==== (.+) ====$", text, flags=re.M)
    assert found == SECTIONS, f"sections {found}, expected {SECTIONS} in that order"
    defined = {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
    defined |= {t.id for n in tree.body if isinstance(n, ast.Assign) for t in n.targets if isinstance(t, ast.Name)}
    assert NAMES <= defined, f"missing {NAMES - defined}"
    assert defined & {"train_step", "make_train_step", "extract"}, "a train step (or the timed unit) by its name"
    assert "SWITCHES" in defined, "performance switches are named in one place at the top"
    assert text.index("SWITCHES") < text.index("# ==== Data ====")


@pytest.mark.parametrize("path", R_SCRIPTS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_r_script_skeleton(path):
    """The R runners keep the Python runners' skeleton: a header comment, the six sections in order, the same function
    names (`name <- function`), SWITCHES before the Data section, and the entry point of runners/rscript.R."""
    text = path.read_text()
    assert text.startswith("# R "), "a header comment says R, framework, version, task"
    found = re.findall(r"^# ==== (.+) ====$", text, flags=re.M)
    assert found == SECTIONS, f"sections {found}, expected {SECTIONS} in that order"
    defined = set(re.findall(r"^([A-Za-z_][A-Za-z0-9_.]*) <- ", text, flags=re.M))
    assert NAMES <= defined, f"missing {NAMES - defined}"
    assert defined & {"train_step", "make_train_step", "extract"}, "a train step (or the timed unit) by its name"
    assert "SWITCHES" in defined and text.index("SWITCHES <- ") < text.index("# ==== Data ====")
    assert text.rstrip().endswith("if (sys.nframe() == 0L) run_task(main)")


@pytest.mark.parametrize("path", sorted((ROOT / "runners").rglob("*.py")), ids=lambda p: str(p.relative_to(ROOT)))
def test_runners_never_import_the_host_side(path):
    assert "scripts" not in set(imported_modules(path))


@pytest.mark.parametrize("path", sorted((ROOT / "shared").glob("*.py")), ids=lambda p: p.name)
def test_shared_is_framework_free(path):
    assert not set(imported_modules(path)) & FRAMEWORK_MODULES


GRU_SIZES = {"max_features", "embedding_dim", "hidden", "maxlen", "num_classes"}
GRU_SCRIPTS = sorted(p for p in (ROOT / "runners").glob("*/gru.*") if p.suffix in (".py", ".R", ".jl"))


@pytest.mark.parametrize("path", GRU_SCRIPTS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_gru_sizes_come_from_params(path):
    """No GRU runner spells a size as a number (`hidden=100` as a default or an argument): they come from
    shared/params.py (params.GRU, cfg.params; params.json for R and Julia), so a changed size changes every runner."""
    text = path.read_text()
    if path.suffix != ".py":
        spelt = re.findall(rf"\b({'|'.join(GRU_SIZES)})\s*=\s*[0-9]", text)
    else:
        spelt = []
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.arguments):
                named = node.posonlyargs + node.args
                pairs = list(zip(named[len(named) - len(node.defaults) :], node.defaults, strict=False))
                pairs += [(a, d) for a, d in zip(node.kwonlyargs, node.kw_defaults, strict=False) if d is not None]
                spelt += [a.arg for a, d in pairs if a.arg in GRU_SIZES and isinstance(d, ast.Constant)]
            elif isinstance(node, ast.keyword) and node.arg in GRU_SIZES and isinstance(node.value, ast.Constant):
                spelt.append(node.arg)
    assert not spelt, f"sizes spelt as numbers: {spelt}"
