"""What a submission folder holds, and the repository it is checked against.

A submission is a folder results/community/NAME/:
    submission.json   what it is: run id, profile, commit, runner-code hash, the machine, its cells per status
    plan.json         the run's plan (every cell the run was to hold)
    cells/ID.json     one record per cell, as the run wrote it (--no-hosts: host names replaced by a placeholder)
    logs/ID.log       the cells' logs (the same)
    digests.sha256    SHA-256 of every other file, written at submit time (`sha256sum -c digests.sha256` reads it)

REPO, COMMUNITY and ALLOWED_SIGNERS are read from this module at each call (`spec.REPO`), so a test that points the
checker at a repository of its own patches them here.
"""

import hashlib
from pathlib import Path

from scripts import paths
from scripts.paths import SAFE_ID
from scripts.results.records import Record
from shared.record import STATUSES

# The repository whose history and whose allowed_signers the checker trusts: this checkout (in CI, the base branch's;
# the tests point it at a repository of their own, committed from the working tree).
REPO = paths.ROOT
COMMUNITY = paths.COMMUNITY  # where accepted submissions are kept; a test points it at a folder of its own
ALLOWED_SIGNERS = Path("results") / "community" / "allowed_signers"  # relative to REPO
SIGNATURE = "digests.sha256.sig"  # ssh-keygen -Y sign of digests.sha256 (optional)
NAMESPACE = "rosetta-submission"  # the signature's namespace: a key's signature for another purpose fails
MANIFEST, DIGESTS, PLAN = "submission.json", "digests.sha256", "plan.json"
SCHEMA = 1
CODE_DIRS = ("runners", "shared")  # the runner code a submission's hash covers
HOST_PLACEHOLDER = "host-removed"  # what --no-hosts writes for a host name (in the records' safe alphabet)
# The machine, from the records' system blocks: facts of the host, the same in every record that has them (a CPU cell
# in a container without GPUs sees no GPU and no driver, so empty values do not count) …
HOST_KEYS = ("cpu", "cpu_flags", "cpu_count", "gpus", "driver")
# … and facts of each framework environment (FRAMEWORK:VARIANT), which differ from one image to the next.
STACK_KEYS = ("framework_version", "python", "cuda", "cudnn", "os", "memory_gib", "executor", "image")
Records = dict[str, Record]  # {relative path: record}, as records.load returns them

_hex = {"type": "string", "pattern": r"^[0-9a-f]+\Z"}


MANIFEST_SCHEMA = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "rosetta community submission",
    "type": "object",
    "additionalProperties": False,
    "required": [
        "schema",
        "name",
        "created_at",
        "run_id",
        "profile",
        "git_commit",
        "code_hash",
        "hosts_removed",
        "machine",
        "cells",
    ],
    "properties": {
        "schema": {"const": SCHEMA},
        "name": {"type": "string", "pattern": SAFE_ID},
        "created_at": {"type": "string", "maxLength": 40},
        "run_id": {"type": "string", "pattern": SAFE_ID},
        "profile": {"type": "string", "pattern": SAFE_ID},
        "git_commit": {**_hex, "minLength": 40, "maxLength": 40},
        "code_hash": {**_hex, "minLength": 16, "maxLength": 16},
        "hosts_removed": {"type": "boolean"},
        "machine": {"type": "object"},
        "cells": {
            "type": "object",
            "additionalProperties": False,
            "properties": {status: {"type": "integer", "minimum": 0} for status in STATUSES},
        },
    },
}


class SubmissionError(Exception):
    """A run folder that cannot be submitted; the message says what to do."""


def stated_class(record: Record) -> str | None:
    """The machine class as the record states it, None where it states none: not Record.machine_class, which
    upgrade derives for every record (a host-written one too), while only a runner-written record describes a
    machine. The schema makes `system` an object where it is present."""
    return record.data.get("system", {}).get("machine_class")


def digest(path: Path | str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def contents(folder: Path | str) -> list[str]:
    """Every path under `folder` (files, links, anything), relative, as POSIX text; sorted."""
    folder = Path(folder)
    return sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_symlink() or not p.is_dir())


def shown(text: object) -> str:
    """`text` as one printable line: a newline or control character in a file name cannot start a line of its own
    in a log (a forged 'accepted' line, a GitHub workflow command)."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in str(text))
