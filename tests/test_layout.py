"""The host side in wings (docs/style.md, "The host side in wings"): every module of scripts/ and bench/ imports, and
no import runs against the wings' direction: commands → results and launch → plan → paths, with shared/ below all."""

import ast
import importlib
from pathlib import Path

import pytest
from conftest import ROOT

pytestmark = pytest.mark.unit

WINGS = ("plan", "launch", "results")
# what a module of each kind may import from the project's host side (shared/ is open to all)
MAY_IMPORT = {
    "paths": set(),
    "plan": {"plan", "paths"},
    "launch": {"launch", "plan", "paths"},
    "results": {"results", "plan", "paths"},
    "command": {"command", "launch", "results", "plan", "paths"},
    "bench": {"bench", "command", "launch", "results", "plan", "paths"},
}


def module_name(path):
    rel = path.relative_to(ROOT).with_suffix("")
    parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
    return ".".join(parts)


def host_modules():
    return sorted(
        module_name(p)
        for folder in ("scripts", "bench")
        for p in (ROOT / folder).rglob("*.py")
        if "__pycache__" not in p.parts
    )


def kind(module):
    """paths, a wing, a command (a module of scripts/ beside the wings) or bench, for a module of scripts/ or bench/."""
    parts = module.split(".")
    if parts[0] == "bench":
        return "bench"
    if len(parts) == 1:
        return "package"
    if parts[1] == "paths":
        return "paths"
    return parts[1] if parts[1] in WINGS else "command"


def imported(path, module):
    """Every project module `path` imports, at its top or inside a function: {module name: line}."""
    found = {}
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(
                    package.split(".")[: len(package.split(".")) - node.level + 1] + ([base] if base else [])
                )
            # `from scripts.results import verify` imports the module scripts.results.verify
            names = [
                f"{base}.{alias.name}"
                if (ROOT / Path(*base.split("."), alias.name)).with_suffix(".py").exists()
                or (ROOT / Path(*base.split("."), alias.name)).is_dir()
                else base
                for alias in node.names
            ]
        else:
            continue
        for name in names:
            if name.split(".")[0] in ("scripts", "bench", "runners", "shared"):
                found.setdefault(name, node.lineno)
    return found


def test_the_folder_shows_the_three_wings_and_the_commands_on_top():
    modules = host_modules()
    assert {kind(m) for m in modules} == {"package", "paths", *WINGS, "command", "bench"}
    commands = sorted(m for m in modules if kind(m) == "command")
    assert commands == ["scripts.cell", "scripts.gpu_check", "scripts.reproduce", "scripts.run"], commands


@pytest.mark.parametrize("module", [m for m in host_modules() if not m.endswith(".__main__")])
def test_every_host_module_imports(module):
    importlib.import_module(module)


def test_no_import_runs_against_the_wings_direction():
    wrong = []
    for module in host_modules():
        path = ROOT / Path(*module.split("."))
        path = path / "__init__.py" if path.is_dir() else path.with_suffix(".py")
        mine = kind(module)
        for name, line in imported(path, module).items():
            if name.split(".")[0] in ("runners", "shared"):
                continue
            theirs = kind(name)
            if theirs != "package" and mine != "package" and theirs not in MAY_IMPORT[mine]:
                wrong.append(f"{path.relative_to(ROOT)}:{line}: {mine} imports {name} ({theirs})")
    assert not wrong, "\n".join(wrong)


@pytest.mark.parametrize("folder", ["shared", "runners"])
def test_the_runner_side_imports_nothing_of_the_host_side(folder):
    wrong = [
        f"{p.relative_to(ROOT)}: {name}"
        for p in (ROOT / folder).rglob("*.py")
        if "__pycache__" not in p.parts
        for name in imported(p, module_name(p))
        if name.split(".")[0] in ("scripts", "bench")
    ]
    assert not wrong, wrong


def test_the_direction_check_sees_a_wrong_import(tmp_path):
    """The check is not blind: a plan module that imports a command or a wing above it is found, also inside a
    function and through a relative import."""
    bad = tmp_path / "bad.py"
    bad.write_text(
        "from scripts import run\n\ndef f():\n    from scripts.results import report\n\nfrom .. import cell\n"
    )
    found = imported(bad, "scripts.plan.bad")
    assert {"scripts.run": 1, "scripts.results.report": 4, "scripts.cell": 6} == found
    assert kind("scripts.run") not in MAY_IMPORT["results"] and kind("scripts.results.report") not in MAY_IMPORT["plan"]
