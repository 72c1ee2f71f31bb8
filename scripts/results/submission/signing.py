"""Signatures (optional): a submitter signs digests.sha256 with an SSH key; the checker names the signer only where
the key is listed in REPO's results/community/allowed_signers and the signature verifies."""

import subprocess
from pathlib import Path

from scripts.results import records
from scripts.results.submission import spec
from scripts.results.submission.spec import DIGESTS, NAMESPACE, SIGNATURE, SubmissionError
from shared.record import RecordError


def ssh_keygen(args: list[str], stdin: bytes | None = None) -> tuple[int, str]:
    try:
        out = subprocess.run(["ssh-keygen", *args], input=stdin, capture_output=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as e:
        return 1, str(e)
    return out.returncode, (out.stdout + out.stderr).decode(errors="replace")


def sign(folder: Path | str, key: Path | str) -> Path:
    """Sign digests.sha256 with the SSH private key `key` (ssh-keygen -Y sign): digests.sha256.sig."""
    code, out = ssh_keygen(["-Y", "sign", "-q", "-f", str(key), "-n", NAMESPACE, str(Path(folder) / DIGESTS)])
    if code != 0:
        raise SubmissionError(
            f"ssh-keygen cannot sign with {key}: {out.strip()[:300]}; pass an SSH private key "
            "(ssh-keygen -t ed25519) whose public key is in results/community/allowed_signers"
        )
    return Path(folder) / SIGNATURE


def signer(folder: Path | str, repo: Path | str | None = None) -> tuple[str | None, list[str]]:
    """(who signed, [findings]): (None, []) for an unsigned submission; the principal of allowed_signers (read from
    spec.REPO, never from the submission's side) whose key made a valid signature of digests.sha256; a finding for a
    signature that does not verify or whose key is not listed."""
    sig = Path(folder) / SIGNATURE
    if not sig.exists():
        return None, []
    allowed = Path(repo or spec.REPO) / spec.ALLOWED_SIGNERS
    if sig.is_symlink() or not sig.is_file():
        return None, [f"{SIGNATURE}: not a plain file"]
    if not allowed.is_file():
        return None, [f"{SIGNATURE}: signed, but {spec.ALLOWED_SIGNERS} does not exist here: no key to verify it with"]
    code, out = ssh_keygen(["-Y", "find-principals", "-s", str(sig), "-f", str(allowed)])
    principals = out.split() if code == 0 else []
    if not principals:
        return None, [f"{SIGNATURE}: not made by a key listed in {spec.ALLOWED_SIGNERS}"]
    try:  # a signature copied from a listed signer's submission names that signer: the digests may be anything
        data = records.read_plain(Path(folder) / DIGESTS)
    except RecordError:
        return None, []  # check_digests names it
    code, out = ssh_keygen(
        ["-Y", "verify", "-f", str(allowed), "-I", principals[0], "-n", NAMESPACE, "-s", str(sig)], stdin=data
    )
    if code != 0:
        return None, [
            f"{SIGNATURE}: does not verify for {principals[0]} ({out.strip()[:200]}): {DIGESTS} changed after signing"
        ]
    return principals[0], []
