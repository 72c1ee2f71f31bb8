"""A pull request that adds a submission, judged from git objects alone: `pr_findings` proves that `git diff
BASE...HEAD` adds plain files (mode 100644) under exactly one folder results/community/NAME/ that the base does not
hold, and changes nothing else; `write_blobs` then writes those blobs as plain files into a folder of the checker's own,
the one the submission checks read. Nothing of the pull request is checked out (a checkout could hold links, or be
another tree than the commit), and none of it runs: CI's .github/workflows/submissions.yml calls `check-pr` (cli.py)."""

from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from scripts.paths import safe_id
from scripts.results.submission import spec
from scripts.results.submission.code import full_commit, git
from scripts.results.submission.spec import SubmissionError, shown

PLAIN = "100644"  # a plain, non-executable file: git's other modes are 100755, 120000 (a link), 160000 (a submodule)
KINDS = {"100755": "an executable", "120000": "a symbolic link", "160000": "a submodule", "040000": "a folder"}
VERBS = {"M": "edits", "D": "deletes", "T": "changes the type of", "A": "adds"}


@dataclass(frozen=True)
class Change:
    """One line of `git diff --raw`: a path's mode and blob before and after, and what happened to it."""

    old_mode: str
    new_mode: str
    new_blob: str
    status: str
    path: str


def changes(base: str, head: str, repo: Path | str | None = None) -> list[Change]:
    """What `head` changes since its merge base with `base` (`git diff --raw -z BASE...HEAD`, renames as delete and
    add); a SubmissionError where git cannot say (unrelated histories, a commit missing)."""
    code, out = git(
        ["diff", "--raw", "-z", "--no-renames", "--no-abbrev", "--ignore-submodules=none", f"{base}...{head}", "--"],
        repo,
    )
    if code != 0:
        raise SubmissionError(f"git cannot diff {base[:12]}...{head[:12]}: {out.decode(errors='replace')[:200]}")
    fields = out.split(b"\0")
    found = []
    for meta, path in zip(fields[0::2], fields[1::2], strict=False):  # ":OLD NEW OLDSHA NEWSHA STATUS" NUL path NUL
        old_mode, new_mode, _, new_blob, status = meta.decode().lstrip(":").split()
        found.append(Change(old_mode, new_mode, new_blob, status[:1], path.decode(errors="replace")))
    return found


def pr_findings(base: str, head: str, repo: Path | str | None = None) -> tuple[str | None, list[Change], list[str]]:
    """(NAME, its files, [findings]) of a pull request from `base` to `head`: [] findings only where it adds plain
    files under one new folder results/community/NAME/ and touches nothing else: no workflow, no allowed_signers, no
    script, no accepted submission; no link, submodule or executable; no second folder."""
    community = spec.ALLOWED_SIGNERS.parent.as_posix()
    base_sha, head_sha = full_commit(base, repo), full_commit(head, repo)
    if base_sha is None or head_sha is None:
        return None, [], [f"--base {shown(base)} --head {shown(head)}: not both commits here (fetch the pull request)"]
    base, head = base_sha, head_sha
    try:
        diff = changes(base, head, repo)
    except SubmissionError as e:
        return None, [], [str(e)]
    if not diff:
        return None, [], [f"the pull request changes nothing under {community}/: no submission to check"]
    found, folders = [], set()
    for change in diff:
        parts = PurePosixPath(change.path).parts
        if change.status != "A" or len(parts) < 4 or "/".join(parts[:2]) != community:
            found.append(
                f"{shown(change.path)}: {VERBS.get(change.status, 'changes')} a path outside a new submission "
                f"folder: a submission's pull request only adds files under {community}/NAME/"
            )
            continue
        if change.new_mode != PLAIN:
            found.append(
                f"{shown(change.path)}: {KINDS.get(change.new_mode, 'mode ' + change.new_mode)}, not a plain file "
                f"(mode {PLAIN}): a submission holds plain files only"
            )
        folders.add(parts[2])
    if len(folders) > 1:
        found.append(
            f"adds {len(folders)} folders ({', '.join(map(shown, sorted(folders)))}): one submission a pull request"
        )
    for name in sorted(folders):
        if not safe_id(name):
            found.append(f"{shown(name)}: not a submission's name (letters, digits, '.', '_', '-')")
        elif git(["cat-file", "-e", f"{base}:{community}/{name}"], repo)[0] == 0:
            found.append(
                f"{community}/{name}: exists in the base: a pull request adds a new submission, never edits one"
            )
    if found or len(folders) != 1:
        return None, [], found
    return next(iter(folders)), diff, found


def write_blobs(files: list[tuple[str, str]], into: Path, repo: Path | str | None = None) -> Path:
    """Write each (relative path, blob) of `files` as a plain file under `into` (created), read with `git cat-file
    --batch`: the bytes git holds, whatever a checkout would have made of them."""
    code, out = git(["cat-file", "--batch"], repo, stdin="".join(f"{blob}\n" for _, blob in files).encode())
    if code != 0:
        raise SubmissionError(f"git cannot read the pull request's files: {out.decode(errors='replace')[:200]}")
    at = 0
    for rel, _ in files:  # each answer: "SHA blob SIZE\n" + SIZE bytes + "\n"
        header_end = out.index(b"\n", at)
        header = out[at:header_end].split()
        if len(header) != 3 or header[1] != b"blob" or any(p in ("", ".", "..") for p in rel.split("/")):
            raise SubmissionError(f"{shown(rel)}: not a file git holds, or not a relative path")
        size = int(header[2])
        target = into / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        with open(target, "xb") as f:  # never through a link, never over a file written before
            f.write(out[header_end + 1 : header_end + 1 + size])
        at = header_end + 1 + size + 1
    return into


def accepted_at(commit: str, into: Path, repo: Path | str | None = None) -> Path:
    """The base's results/community at `commit` (its accepted submissions), written under `into` from git objects:
    what a pull request's folder is held against, whatever the working tree holds."""
    community = spec.ALLOWED_SIGNERS.parent.as_posix()
    code, listing = git(["ls-tree", "-r", "-z", "--full-tree", commit, "--", f"{community}/"], repo)
    if code != 0:
        raise SubmissionError(f"git cannot list {community} at {commit[:12]}")
    files = []
    for entry in filter(None, listing.split(b"\0")):
        meta, path = entry.split(b"\t", 1)
        mode, kind, blob = meta.decode().split()
        rel = path.decode(errors="replace")[len(community) + 1 :]
        if kind == "blob" and mode == PLAIN and "/" in rel:  # the submission folders' files
            files.append((rel, blob))
    into.mkdir(parents=True, exist_ok=True)
    return write_blobs(files, into, repo)
