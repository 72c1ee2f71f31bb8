"""ruff's checks and format hold on the whole tree (pyproject.toml): the unit tier enforces what .pre-commit-config.yaml
runs before a commit, so a change that skips the hook still fails here."""

import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT

pytestmark = pytest.mark.unit
RUFF = Path(sys.executable).with_name("ruff")  # the host environment's, pinned in scripts/requirements.txt


@pytest.mark.parametrize("argv", [["check", "--no-cache", "."], ["format", "--check", "--no-cache", "."]])
def test_ruff_is_clean(argv):
    proc = subprocess.run([str(RUFF), *argv], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, (
        f"`ruff {' '.join(argv)}` (fix with `make lint` and `ruff format .`):\n" + (proc.stdout + proc.stderr)[-3000:]
    )
