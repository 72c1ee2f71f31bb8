"""The runner code of a submission, from git: its hash at a commit or in the checkout, whether a commit is one whose
code the checker may run (CommitTrust), and the code itself (the runners to reproduce with, the plan a commit makes)."""

import json
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Iterable
from enum import Enum
from functools import lru_cache
from pathlib import Path, PurePosixPath
from typing import Any

from scripts.paths import files_hash
from scripts.results.submission import spec
from scripts.results.submission.spec import CODE_DIRS, SubmissionError


def git(args: list[str], repo: Path | str | None = None, stdin: bytes | None = None) -> tuple[int, bytes]:
    """`git ARGS` in `repo` (default spec.REPO): (exit code, stdout bytes)."""
    try:
        out = subprocess.run(["git", *args], cwd=repo or spec.REPO, input=stdin, capture_output=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired) as e:
        return 1, str(e).encode()
    return out.returncode, out.stdout


def tree_hash(files: Iterable[tuple[str, bytes]]) -> str:
    """The runner-code hash of (path, content) pairs: compose's recipe (files_hash) in the order of sorted paths."""
    return files_hash(sorted(files, key=lambda item: PurePosixPath(item[0]).parts))


def is_code(path: str) -> bool:
    return "__pycache__" not in PurePosixPath(path).parts and not path.endswith(".pyc")


def full_commit(commit: object, repo: Path | str | None = None) -> str | None:
    """The 40-hex commit `commit` (a hash or an abbreviation) names in `repo`, or None where it names none."""
    if not isinstance(commit, str) or not re.fullmatch(r"[0-9a-f]{4,40}", commit):
        return None
    code, out = git(["rev-parse", "--verify", "--quiet", f"{commit}^{{commit}}"], repo)
    return out.decode().strip() if code == 0 else None


def committed_code_hash(commit: str, repo: Path | str | None = None) -> str:
    """The hash of runners/ + shared/ as committed at `commit` (40 hex), read with git ls-tree and cat-file."""
    return _committed_code_hash(commit, str(repo or spec.REPO))


@lru_cache(maxsize=32)
def _committed_code_hash(commit: str, repo: str) -> str:
    code, listing = git(["ls-tree", "-r", "-z", "--full-tree", commit, "--", *CODE_DIRS], repo)
    if code != 0:
        raise SubmissionError(f"git cannot list {' and '.join(CODE_DIRS)} at {commit}: {listing.decode()[:200]}")
    blobs = []
    for entry in filter(None, listing.split(b"\0")):
        meta, path = entry.split(b"\t", 1)
        _, kind, sha = meta.split()
        if kind == b"blob" and is_code(path.decode()):
            blobs.append((path.decode(), sha.decode()))
    code, out = git(["cat-file", "--batch"], repo, stdin="".join(f"{sha}\n" for _, sha in blobs).encode())
    if code != 0:
        raise SubmissionError(f"git cannot read the files of {commit}: {out.decode(errors='replace')[:200]}")
    files: list[tuple[str, bytes]] = []
    at = 0
    for rel, _ in blobs:  # each answer: "SHA blob SIZE\n" + SIZE bytes + "\n"
        header_end = out.index(b"\n", at)
        size = int(out[at:header_end].split()[2])
        files.append((rel, out[header_end + 1 : header_end + 1 + size]))
        at = header_end + 1 + size + 1
    return tree_hash(files)


def checkout_code_hash(repo: Path | str | None = None) -> str:
    """The hash of runners/ + shared/ as they are in the checkout: tracked and untracked files, not ignored ones."""
    repo = repo or spec.REPO
    code, out = git(["ls-files", "-z", "--cached", "--others", "--exclude-standard", "--", *CODE_DIRS], repo)
    if code != 0:
        raise SubmissionError(
            f"{repo} is not a git checkout ({out.decode()[:200]}); submit from a clone of the repository"
        )
    paths = sorted({p for p in out.decode().split("\0") if p and is_code(p)})
    return tree_hash((p, (Path(repo) / p).read_bytes()) for p in paths if (Path(repo) / p).is_file())


def runner_code_at(commit: str, wanted: str, into: Path, repo: Path | str | None = None) -> Path:
    """runners/ and shared/ as committed at `commit`, extracted into `into` (git archive); refused unless their code
    hash is `wanted` (the submission's, which the checker recomputed from git)."""
    code, tar = git(["archive", "--format=tar", commit, "--", *CODE_DIRS], repo)
    if code != 0:
        raise SubmissionError(f"git cannot archive {' and '.join(CODE_DIRS)} at {commit[:12]}")
    into.mkdir(parents=True, exist_ok=True)
    subprocess.run(["tar", "-x", "-C", str(into)], input=tar, check=True, capture_output=True, timeout=120)
    got = tree_hash(
        (p.relative_to(into).as_posix(), p.read_bytes())
        for d in CODE_DIRS
        for p in sorted((into / d).rglob("*"))
        if p.is_file() and is_code(p.relative_to(into).as_posix())
    )
    if got != wanted:
        raise SubmissionError(f"runners/ and shared/ at {commit[:12]} hash to {got}, not the submission's {wanted}")
    return into


PLAN_SCRIPT = """import json, sys
try:                                       # the host side in wings (from issue 34 on)
    from scripts.plan import planfile as plan
    from scripts.plan.matrix import load
except ImportError:                        # a commit from before: one flat scripts/
    from scripts import plan
    from scripts.matrix import load
from shared import params
profile, run_id, executor = sys.argv[1], sys.argv[2], sys.argv[3] or None
try:
    made = plan.make(load(), profile, run_id, executor)
except TypeError:
    made = plan.make(load(), profile, run_id)
hashes = {}
for task in params.TASKS:
    for scale in getattr(params, "SCALES", ("full",)):
        try:
            hashes[task + ":" + scale] = params.params_hash(task, scale)
        except Exception:
            pass
print(json.dumps({"plan": json.loads(plan.to_json(made)), "params": hashes}))
"""


@lru_cache(maxsize=16)
def derived_at(
    commit: str, profile: str, run_id: str, executor: str | None, repo: str
) -> tuple[dict[str, Any], dict[str, str]]:
    """(plan document, {task:scale: params hash}) that `commit`'s own scripts.plan.planfile makes of `profile`, run from
    an archive of that commit (its matrix.yaml and its expansion code); a SubmissionError where it cannot."""
    with tempfile.TemporaryDirectory(prefix="rosetta-plan-") as tmp:
        code, top = git(["ls-tree", "--name-only", commit], repo)
        wanted = sorted(
            {"scripts", "shared", "runners", "matrix.yaml", "docker", ".github"} & set(top.decode().split())
        )
        code, tar = git(["archive", "--format=tar", commit, "--", *wanted], repo) if code == 0 else (code, top)
        if code != 0:
            raise SubmissionError(f"git cannot archive commit {commit[:12]}: {tar.decode(errors='replace')[:200]}")
        try:
            subprocess.run(["tar", "-x", "-C", tmp], input=tar, check=True, capture_output=True, timeout=120)
            out = subprocess.run(
                [sys.executable, "-c", PLAN_SCRIPT, profile, run_id, executor or ""],
                cwd=tmp,
                capture_output=True,
                text=True,
                timeout=300,
                env={**os.environ, "PYTHONPATH": tmp, "PYTHONDONTWRITEBYTECODE": "1"},
            )
        except (OSError, subprocess.SubprocessError) as e:
            raise SubmissionError(f"cannot expand profile {profile} at commit {commit[:12]}: {e}") from e
        if out.returncode != 0:
            raise SubmissionError(
                f"commit {commit[:12]}'s scripts.plan.planfile cannot expand profile {profile!r}: "
                f"{out.stderr.strip().splitlines()[-1:] or out.returncode}"
            )
        doc = json.loads(out.stdout.strip().splitlines()[-1])
        return doc["plan"], doc["params"]


class CommitTrust(Enum):
    """What a submission's commit is to the checker: only the code of a commit ON_HISTORY is ever run."""

    ON_HISTORY = "a commit of this repository on the accepted history"
    OFF_HISTORY = "a commit of this repository not on the accepted history (a fetched pull request's, a side branch's)"
    UNKNOWN = "not a commit of this repository (a fork's or a rewritten one, or not a commit at all)"


def commit_trust(commit: str, repo: Path | str | None, ancestor_of: str) -> CommitTrust:
    """Whether `commit` (40 hex) is a commit of this repository, and on `ancestor_of`'s history: asked of git once,
    for check_code's findings and findings' decision to run the commit's code, so neither reads the other's words."""
    if full_commit(commit, repo) != commit:
        return CommitTrust.UNKNOWN
    if git(["merge-base", "--is-ancestor", commit, ancestor_of], repo)[0] != 0:
        return CommitTrust.OFF_HISTORY
    return CommitTrust.ON_HISTORY
