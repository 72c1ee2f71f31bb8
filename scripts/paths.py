"""Where the host side's files are, which names may become part of a path, and how a set of files is hashed: what every
wing shares.

The floor of scripts/ (docs/style.md, "The host side in wings"): it imports nothing of the project, so any module may
import it for a constant instead of importing the command or the wing that happens to use the constant most.
Standard library only: `make setup` and the system-package check run it before any environment exists.
"""

import hashlib
import re
from collections.abc import Iterable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]  # the checkout
DATA = ROOT / "data"  # synthetic/ and real/ (make data)
RESULTS = ROOT / "results"  # one folder per run, and the committed references
REFERENCES = RESULTS / "reference"  # reference records per machine class (make reference)
COMMUNITY = RESULTS / "community"  # accepted community submissions

# The alphabet of every id that becomes part of a file name or a command line: run ids, cell ids, services, reference
# names. Checked wherever such an id arrives from outside (a plan file, a record, a submission).
SAFE_ID = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}\Z"


def safe_id(text: object) -> bool:
    """True for a string of the safe alphabet (SAFE_ID)."""
    return isinstance(text, str) and re.search(SAFE_ID, text) is not None


def files_hash(files: Iterable[tuple[str, bytes]]) -> str:
    """16 hex digits of a SHA-256 over `files`, (path relative to the repository, content) pairs in the order given:
    the one code-hash recipe, for an image's code (scripts/launch/compose.py: code_hash) and a community submission's
    runners/ + shared/ (scripts/results/submission/code.py, which recomputes it from git at any commit)."""
    digest = hashlib.sha256()
    for name, data in files:
        digest.update(name.encode() + b"\0" + data + b"\0")
    return digest.hexdigest()[:16]
