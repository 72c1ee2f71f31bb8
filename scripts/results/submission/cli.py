"""Community results: a run folder packaged as a submission, and the checker that accepts or rejects one.

The command line: `submit RUN` packages a run folder, `check [DIR …]` prints one line per finding, one per
submission and a total (MLPerf's submission checker's form); exit 0 only when every submission is accepted.
`check-pr --base SHA --head SHA` is CI's: the pull request read from git objects (pr.py), then its one new folder."""

import argparse
import sys
import tempfile
from pathlib import Path
from typing import Any

from scripts.results.submission import spec
from scripts.results.submission.code import full_commit
from scripts.results.submission.package import submit
from scripts.results.submission.pr import accepted_at, pr_findings, write_blobs
from scripts.results.submission.spec import HOST_PLACEHOLDER, SubmissionError, shown
from scripts.results.submission.verdict import against_accepted, findings, submissions, summary

# What the checker's verdict means, printed with it (README, results/community/README.md).
PROOF = (
    "the digests prove only that the files are those listed in digests.sha256, which the submitter wrote: an "
    "edited, re-sealed copy passes them. What is checked beyond that holds without trusting the submitter: the "
    "records agree with themselves and with the stated hardware, the plan is the profile's at the stated commit "
    "and every planned cell has an honest record. Whether the numbers are real only a reproduction shows "
    "(python -m scripts.reproduce DIR --cells N on a machine of the same class); who made them only "
    "a signature shows"
)


def describe(manifest: dict[str, Any]) -> str:
    cells = ", ".join(f"{n} {status}" for status, n in manifest["cells"].items() if n)
    return (
        f"{sum(manifest['cells'].values())} cells ({cells}); {', '.join(manifest['machine']['machine_classes'])}; "
        f"commit {manifest['git_commit'][:12]}"
    )


def check_main(folders: list[Path], ancestor_of: str | None = None, community: Path | None = None) -> int:
    folders = [Path(f) for f in folders] or submissions(community)
    base = spec.REPO / spec.ALLOWED_SIGNERS.parent
    # a pull request's folder (--community) against the base branch's accepted submissions
    across = against_accepted(folders, base) if community and Path(community).resolve() != base.resolve() else {}
    return report(folders, ancestor_of, across)


def report(folders: list[Path], ancestor_of: str | None, across: dict[str, list[str]]) -> int:
    """Print the verdict on each of `folders` (its findings, and `across`'s: against_accepted's) and the total; a name
    of `across` that is not among `folders` is an accepted submission the pull request removed."""
    print(f"What this check proves: {PROOF}.")
    rejected = 0
    for name in sorted(set(across) - {f.name for f in folders}):
        for line in across[name]:
            print(f"ERROR {shown(line)}")
        rejected += 1
    for folder in folders:
        found = findings(folder, ancestor_of=ancestor_of) + across.get(folder.name, [])
        for line in found:
            print(f"ERROR {shown(line)}")
        if found:
            rejected += 1
            print(f"submission {shown(folder.name)}: REJECTED, {len(found)} finding(s)")
        else:
            shown_as = summary(folder)
            who = shown_as["signed_by"]
            print(
                f"submission {folder.name}: accepted: {describe(shown_as)}; "
                + (f"signed by {who} ({spec.ALLOWED_SIGNERS})" if who else "UNSIGNED: nothing shows who submitted it")
            )
    removed = len(set(across) - {f.name for f in folders})
    print(
        f"{len(folders)} submission(s) checked: {len(folders) + removed - rejected} accepted, {rejected} rejected"
        + (f" ({removed} accepted one(s) removed)" if removed else "")
    )
    return 1 if rejected else 0


def check_pr_main(base: str, head: str) -> int:
    """CI's check of a pull request, from git objects (pr.py): it must add one new folder of plain files under
    results/community and nothing else; then that folder, written out from its blobs, is checked against the
    accepted submissions at `base` (also from git objects), its commit on `base`'s history. Git: spec.REPO's."""
    name, files, found = pr_findings(base, head)
    for line in found:
        print(f"ERROR {shown(line)}")
    if name is None:
        print(
            f"pull request {shown(head)[:12]}: REJECTED before any of it is read, {len(found)} finding(s): a "
            f"submission's pull request adds one new folder {spec.ALLOWED_SIGNERS.parent}/NAME/ of plain files, "
            "and changes nothing else"
        )
        return 1
    base = full_commit(base) or base
    with tempfile.TemporaryDirectory(prefix="rosetta-pr-") as tmp:
        accepted_before = accepted_at(base, Path(tmp) / "base")
        prefix = len(spec.ALLOWED_SIGNERS.parent.as_posix()) + len(name) + 2
        folder = write_blobs([(c.path[prefix:], c.new_blob) for c in files], Path(tmp) / "pr" / name)
        across = against_accepted([*submissions(accepted_before), folder], accepted_before)
        return report([folder], base, {n: lines for n, lines in across.items() if lines or n == name})


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m scripts.results.submission", description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="command", required=True)
    s = sub.add_parser("submit", help="package a run folder as results/community/NAME/")
    s.add_argument("run", type=Path, help="the run folder, e.g. results/demo-20261204-101500")
    s.add_argument("--name", help="the submission's name (default: MACHINECLASS-DATE)")
    s.add_argument(
        "--no-hosts", action="store_true", help=f"replace host names in records and logs by {HOST_PLACEHOLDER!r}"
    )
    s.add_argument(
        "--sign",
        type=Path,
        metavar="KEY",
        help="sign the digest list with this SSH private key "
        f"(its public key listed in {spec.ALLOWED_SIGNERS}); unsigned otherwise",
    )
    c = sub.add_parser("check", help="accept or reject submissions (exit 0 only when all are accepted)")
    c.add_argument(
        "folders", nargs="*", type=Path, help=f"submission folders (default: every one under {spec.COMMUNITY})"
    )
    c.add_argument("--ancestor-of", metavar="REF", help="the submissions' commits must be on REF (e.g. origin/main)")
    c.add_argument(
        "--community",
        type=Path,
        metavar="DIR",
        help="without folders: check every submission under DIR "
        "(CI: the pull request's results/community, checked by this checkout's checker)",
    )
    p = sub.add_parser(
        "check-pr",
        help="CI: a pull request, from git objects: it adds one new submission folder of plain files and nothing "
        "else, and the checker accepts that submission (exit 0 only then)",
    )
    p.add_argument("--base", required=True, metavar="SHA", help="the base branch's commit (this checkout's history)")
    p.add_argument(
        "--head", required=True, metavar="SHA", help="the pull request's head commit (fetched, not checked out)"
    )
    args = ap.parse_args(argv)
    if args.command == "check":
        return check_main(args.folders, args.ancestor_of, args.community)
    if args.command == "check-pr":
        return check_pr_main(args.base, args.head)
    try:
        target = submit(args.run, args.name, args.no_hosts, sign_key=args.sign)
    except SubmissionError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(f"submitted {target}: accepted by the checker; open a pull request that adds it")
    return 0
