"""ruff's checks and format hold on the whole tree, mypy's on the files pyproject.toml's [tool.mypy] names: the unit
tier enforces what .pre-commit-config.yaml runs before a commit, so a change that skips the hook still fails here."""

import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT

pytestmark = pytest.mark.unit
RUFF = Path(sys.executable).with_name("ruff")  # the host environment's, pinned in scripts/requirements.txt
MYPY = Path(sys.executable).with_name("mypy")


@pytest.mark.parametrize("argv", [["check", "--no-cache", "."], ["format", "--check", "--no-cache", "."]])
def test_ruff_is_clean(argv):
    proc = subprocess.run([str(RUFF), *argv], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, (
        f"`ruff {' '.join(argv)}` (fix with `make lint` and `ruff format .`):\n" + (proc.stdout + proc.stderr)[-3000:]
    )


def test_mypy_is_clean(tmp_path):
    """The files pyproject.toml's [tool.mypy] names type-check (a cold cache: what a fresh clone sees)."""
    proc = subprocess.run(
        [str(MYPY), "--cache-dir", str(tmp_path)], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, "`mypy` (fix with `make lint`):\n" + (proc.stdout + proc.stderr)[-3000:]
