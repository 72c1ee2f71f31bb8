"""Community results: a run folder packaged as a submission, and the checker that accepts or rejects one.

    python -m scripts.results.submission submit results/demo-20261204-101500 [--name NAME] [--no-hosts]
    python -m scripts.results.submission check results/community/NAME [DIR …]    # no DIR: every submission there
    python -m scripts.results.submission check-pr --base SHA --head SHA         # CI: a pull request, from git

The modules, by concern: spec.py (what a submission folder holds, the repository it is checked against), package.py
(building one from a run folder), checks.py and derived.py (the checks), verdict.py (findings, accepted), code.py
(git: the runner-code hash, CommitTrust), pr.py (a pull request read from git objects), machine.py, signing.py and
cli.py. `accepted(root)` and `findings(folder)` are the API the static site reads submissions through; the names below
are the package's public ones.
"""

from scripts.results import records
from scripts.results.submission import spec
from scripts.results.submission.checks import (
    check_code,
    check_copies,
    check_digests,
    check_image_hashes,
    check_machine,
    check_records,
    check_status,
    lacking,
    layout,
    read_manifest,
    short_training,
)
from scripts.results.submission.cli import PROOF, check_main, check_pr_main, describe, main, report
from scripts.results.submission.code import (
    CommitTrust,
    checkout_code_hash,
    commit_trust,
    committed_code_hash,
    derived_at,
    full_commit,
    git,
    is_code,
    runner_code_at,
    tree_hash,
)
from scripts.results.submission.derived import (
    CALIBRATION_FLOOR,
    GPU_FLOP_PER_SM_CYCLE,
    check_calibration,
    check_consistency,
    check_plan,
    physical_ceiling,
)
from scripts.results.submission.machine import host_value, incomplete, machine_of, statuses
from scripts.results.submission.package import (
    copy,
    default_name,
    host_names,
    redact_json,
    redactor,
    run_commit,
    run_to_submit,
    seal,
    submit,
)
from scripts.results.submission.pr import Change, accepted_at, changes, pr_findings, write_blobs
from scripts.results.submission.signing import sign, signer, ssh_keygen
from scripts.results.submission.spec import (
    ALLOWED_SIGNERS,
    CODE_DIRS,
    COMMUNITY,
    DIGESTS,
    HOST_PLACEHOLDER,
    MANIFEST,
    MANIFEST_SCHEMA,
    NAMESPACE,
    PLAN,
    REPO,
    SCHEMA,
    SIGNATURE,
    SubmissionError,
    contents,
    digest,
    shown,
)
from scripts.results.submission.verdict import accepted, against_accepted, files_of, findings, submissions, summary
from shared.record import RecordError

__all__ = [
    "ALLOWED_SIGNERS",
    "CALIBRATION_FLOOR",
    "CODE_DIRS",
    "COMMUNITY",
    "DIGESTS",
    "GPU_FLOP_PER_SM_CYCLE",
    "HOST_PLACEHOLDER",
    "MANIFEST",
    "MANIFEST_SCHEMA",
    "NAMESPACE",
    "PLAN",
    "PROOF",
    "REPO",
    "SCHEMA",
    "SIGNATURE",
    "Change",
    "CommitTrust",
    "RecordError",
    "SubmissionError",
    "accepted",
    "accepted_at",
    "against_accepted",
    "check_calibration",
    "check_code",
    "check_consistency",
    "check_copies",
    "check_digests",
    "check_image_hashes",
    "check_machine",
    "check_main",
    "check_plan",
    "check_pr_main",
    "check_records",
    "check_status",
    "changes",
    "checkout_code_hash",
    "commit_trust",
    "committed_code_hash",
    "contents",
    "copy",
    "default_name",
    "derived_at",
    "describe",
    "digest",
    "files_of",
    "findings",
    "full_commit",
    "git",
    "host_names",
    "host_value",
    "incomplete",
    "is_code",
    "lacking",
    "layout",
    "machine_of",
    "main",
    "physical_ceiling",
    "pr_findings",
    "read_manifest",
    "records",
    "redact_json",
    "redactor",
    "report",
    "run_commit",
    "run_to_submit",
    "runner_code_at",
    "seal",
    "shown",
    "short_training",
    "sign",
    "signer",
    "spec",
    "ssh_keygen",
    "statuses",
    "submissions",
    "submit",
    "summary",
    "tree_hash",
    "write_blobs",
]
