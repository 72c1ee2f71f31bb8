"""The verdict on a submission folder: `findings` runs every check (checks.py, derived.py, signing.py) and says why
it is rejected; `accepted` lists the accepted ones (the API the static site reads them through); `against_accepted`
holds a pull request's folders against the base branch's accepted ones."""

import json
import re
from pathlib import Path
from typing import Any

from scripts.paths import SAFE_ID
from scripts.results import records
from scripts.results.submission import spec
from scripts.results.submission.checks import (
    REPLAY_TOLERANCE,
    check_code,
    check_copies,
    check_digests,
    check_image_hashes,
    check_machine,
    check_records,
    check_status,
    layout,
    read_manifest,
    replayed_samples,
    same_shape,
)
from scripts.results.submission.code import CommitTrust, commit_trust
from scripts.results.submission.derived import check_calibration, check_consistency, check_plan
from scripts.results.submission.signing import signer
from scripts.results.submission.spec import MANIFEST, contents, shown
from shared.record import RecordError


def findings(folder: Path | str, repo: Path | str | None = None, ancestor_of: str | None = None) -> list[str]:
    """Why the submission in `folder` is rejected, one line per finding naming its file ('NAME/cells/x.json: why');
    [] when it is accepted. Never raises for anything the folder holds: it is untrusted input."""
    folder = Path(folder)
    if folder.is_symlink() or not folder.is_dir():
        return [f"{shown(folder.name)}: not a folder (a link or a file has no place among submissions)"]
    if not re.fullmatch(SAFE_ID, folder.name):
        return [f"{shown(folder.name)}: not a submission's name (letters, digits, '.', '_', '-')"]
    repo = repo or spec.REPO
    # the plan is re-derived by running the commit's own code: only a commit on the checker's own history (HEAD, or
    # the branch --ancestor-of names) is ever run, never one that merely sits in the object store (a fetched PR)
    ancestor_of = ancestor_of or "HEAD"
    found = check_digests(folder) + layout(folder) + signer(folder, repo)[1]
    manifest, manifest_found = read_manifest(folder)
    found += manifest_found
    recs, record_found = check_records(folder)
    found += record_found
    for rel, record in recs.items():
        found += check_status(rel, record)
    found += check_copies(recs) + check_calibration(recs)
    hashes = None
    if manifest is not None:
        trust = commit_trust(manifest["git_commit"], repo, ancestor_of)  # asked of git once, for both uses
        found += check_code(manifest, recs, repo, ancestor_of, trust)
        found += check_machine(manifest, recs) + check_image_hashes(manifest, recs)
        # the plan is re-derived by running the commit's own scripts.plan.planfile: only a commit of this repository,
        # and with --ancestor-of (CI) only one on that branch, is ever run
        if trust is CommitTrust.ON_HISTORY:
            plan_found, hashes = check_plan(folder, manifest, repo)
            found += plan_found
    for rel, record in recs.items():
        found += check_consistency(rel, record, hashes)
    return [f"{folder.name}/{line}" for line in dict.fromkeys(found)]


def submissions(root: Path | str | None = None) -> list[Path]:
    """The submission folders under `root` (every folder but hidden ones: a submit in progress stages in one)."""
    root = Path(root or spec.COMMUNITY)
    return (
        sorted(p for p in root.iterdir() if not p.name.startswith(".") and (p.is_symlink() or p.is_dir()))
        if root.is_dir()
        else []
    )  # a link among them is listed, and rejected by findings: never walked


def summary(folder: Path | str) -> dict[str, Any]:
    """What the site shows of an accepted submission: its manifest, plus the folder's records and logs."""
    manifest = json.loads(records.read_plain(Path(folder) / MANIFEST).decode())
    return {
        **manifest,
        "signed_by": signer(folder)[0],
        "records": sorted(str(p) for p in (Path(folder) / "cells").glob("*.json")),
        "logs": sorted(str(p) for p in (Path(folder) / "logs").glob("*.log")),
    }


def accepted(root: Path | str | None = None, repo: Path | str | None = None) -> list[tuple[str, Path, dict[str, Any]]]:
    """[(name, folder, summary)] of the accepted submissions under `root` (default results/community), by name;
    rejected ones are left out (the checker says why). summary: the manifest's keys (name, created_at, run_id,
    profile, git_commit, code_hash, hosts_removed, machine{machine_classes, cpu, cpu_flags, cpu_count, gpus, driver,
    stacks}, cells{status: n}) and the paths of its records and logs. The commits must be in `repo`'s history: in a
    shallow clone (actions/checkout's default) every submission is rejected, so check out with fetch-depth: 0."""
    return [(folder.name, folder, summary(folder)) for folder in submissions(root) if not findings(folder, repo)]


def files_of(folder: Path) -> dict[str, bytes | None]:
    """{relative path: bytes} of a submission folder's plain files (links and special files are findings elsewhere)."""
    out: dict[str, bytes | None] = {}
    for rel in contents(folder):
        try:
            out[rel] = records.read_plain(folder / rel)
        except RecordError:
            out[rel] = None
    return out


def against_accepted(folders: list[Path], base: Path | str | None = None) -> dict[str, list[str]]:
    """{folder name: [findings]} of a pull request's submission folders against the base branch's accepted ones
    (`base`, default spec.REPO's results/community): an accepted submission is neither removed nor changed by a pull
    request (a maintainer's commit to the base branch does that), and a new submission holds no ok cell whose samples
    are another submission's times one factor (checks.same_shape: a replay under a new name, scaled or not)."""
    base = Path(base or spec.REPO / spec.ALLOWED_SIGNERS.parent)
    accepted_before = {f.name: f for f in submissions(base) if not f.is_symlink()}
    mine = {f.name: f for f in folders}
    found: dict[str, list[str]] = {name: [] for name in mine}
    for name, before in sorted(accepted_before.items()):
        now = mine.get(name)
        if now is None:
            found.setdefault(name, []).append(
                f"{name}: removed: an accepted submission is removed by a commit to "
                "the base branch, not by a pull request"
            )
        elif now.is_symlink():
            found[name].append(f"{name}: an accepted submission replaced by a link")
        else:
            old, new = files_of(before), files_of(now)
            changed = sorted(rel for rel in set(old) | set(new) if old.get(rel) != new.get(rel))
            if changed:
                found[name].append(
                    f"{name}: changes the accepted submission ({', '.join(changed[:5])}"
                    f"{' …' if len(changed) > 5 else ''}): accepted results are not edited"
                )
    seen: list[tuple[tuple[float, ...], str]] = []
    for name, folder in sorted(
        {**accepted_before, **mine}.items(), key=lambda item: (item[0] not in accepted_before, item[0])
    ):
        cells = folder / "cells"
        for path in (
            sorted(cells.glob("*.json"))
            if not folder.is_symlink() and cells.is_dir() and not cells.is_symlink()
            else []
        ):
            try:
                shape = replayed_samples(records.load(path))
            except RecordError:
                continue
            if shape is None:
                continue
            where = f"{name}/cells/{path.name}"
            other = next((w for theirs, w in seen if w.split("/")[0] != name and same_shape(shape, theirs)), None)
            if other is not None and name in mine and name not in accepted_before:
                found[name].append(
                    f"{where}: its samples are those of {other} times one factor (sorted, divided by their median, "
                    f"within {REPLAY_TOLERANCE:g}): a submission replayed under another name"
                )
            seen.append((shape, where))
    return found
