"""The result record: one JSON object per cell, written atomically, versioned (docs/design.md, "Result record").

Runners and the host both write records (the host only when a runner could not: a crash, a timeout); nobody edits one.

Like everything a runner imports from `shared`, this module runs on Python 3.6 and newer (CNTK 2.7 is a cp36 wheel):
no `capture_output`, no `missing_ok`, dataclasses from the backport there.
"""

import contextlib
import json
import os
import stat
import subprocess
import tempfile
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Dict, Mapping, Optional, Union

from shared.params import DEFAULT_TUNING

SCHEMA = 2  # 2: every fact a reader reads typed and ranged (cpu_mhz, the GPU facts, …), the keys as in 1
READABLE = (1, 2)  # the versions the readers read: a record of 1 holds the same keys, checked by the same types
STATUSES = ("ok", "failed", "skipped", "timeout")
UMASK = os.umask(0o022)
os.umask(UMASK)
PathArg = Union[str, "os.PathLike[str]"]  # a path as str or Path; a string: os.PathLike is no generic before 3.9
CELL_KEYS = ("framework", "task", "variant", "precision", "gpus", "device", "data", "scale", "tuning")
OPTIONAL_CELL_KEYS = {"tuning": DEFAULT_TUNING}  # absent from records written before the axis existed: read so


class Skip(Exception):
    """Raised by a runner for a combination it cannot run here (a precision the CPU lacks, …): status `skipped`."""


class GpuMissing(RuntimeError):
    """A cell asked for more GPUs than the framework can see: a broken install or launch, never an unsupported
    combination, so the status is `failed` (and `--resume` retries it), with what was visible and where to look."""

    def __init__(self, asked, visible, seen_by):
        super().__init__(
            f"{asked} GPU(s) asked for, {visible} visible to {seen_by}. Check the NVIDIA driver (`nvidia-smi` lists "
            "the GPUs), CUDA_VISIBLE_DEVICES, that the framework's CUDA build is installed (not a CPU-only wheel), "
            "and in a container the NVIDIA Container Toolkit (`docker run --rm --gpus all IMAGE nvidia-smi`)"
        )


class RecordError(Exception):
    """A record file that cannot be used: unreadable, truncated, or of a schema this code does not know."""


def now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def git_commit(cwd: Optional[PathArg] = None) -> Optional[str]:
    """The commit of the checkout the code runs from, or the ROSETTA_GIT_COMMIT an image was built with."""
    if os.environ.get("ROSETTA_GIT_COMMIT"):
        return os.environ["ROSETTA_GIT_COMMIT"]
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--short=12", "HEAD"],
            cwd=cwd or Path(__file__).parent,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            universal_newlines=True,  # not text=: Python 3.6 (CNTK) has no such argument
            timeout=10,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() or None


def make_record(
    cell: Mapping[str, Any],
    status: str,
    *,
    run_id: Optional[str] = None,
    reason: Optional[str] = None,
    log_tail: Optional[str] = None,
    metrics: Optional[Mapping[str, Any]] = None,
    timing: Optional[Mapping[str, Any]] = None,
    system: Optional[Mapping[str, Any]] = None,
    started_at: Optional[str] = None,
) -> Dict[str, Any]:
    """A complete record; every key of the schema is present so CSV columns never depend on which cells ran."""
    assert status in STATUSES, status
    cell = {**OPTIONAL_CELL_KEYS, **cell}
    assert set(cell) == set(CELL_KEYS), sorted(cell)
    return {
        "schema": SCHEMA,
        "run_id": run_id,
        "cell": dict(cell),
        "status": status,
        "reason": reason,
        "log_tail": log_tail,
        "metrics": metrics or {},
        "timing": timing or {},
        "system": system or {},
        "started_at": started_at or now(),
        "finished_at": now(),
        "git_commit": git_commit(),
    }


def write_atomic(path: PathArg, text: str) -> None:
    """Write `text` to `path` so that readers see the old file or the whole new one, never a part."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.chmod(tmp, 0o666 & ~UMASK)  # mkstemp makes 0600; records and manifests are read by other users/containers
        with os.fdopen(fd, "w") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):  # unlink(missing_ok=True) needs Python 3.8
            os.unlink(tmp)
        raise


def write_record(path: PathArg, record: Mapping[str, Any]) -> None:
    write_atomic(path, json.dumps(record, indent=2, sort_keys=True, default=str) + "\n")


def read_record(path: PathArg) -> Dict[str, Any]:
    """Load one record; a truncated file or an unknown schema is a RecordError that says what to do."""
    try:
        record = json.loads(Path(path).read_text())
    except (OSError, json.JSONDecodeError) as e:
        raise RecordError(f"{path}: not a readable result record ({e}); delete it to re-run that cell") from e
    if not isinstance(record, dict):
        raise RecordError(f"{path}: a record is a JSON object, this is a {type(record).__name__}")
    if record.get("schema") not in READABLE:
        raise RecordError(
            f"{path}: record schema {record.get('schema')!r}, this code reads schemas {', '.join(map(str, READABLE))}; "
            "merge it with the version of the project that wrote it, or re-run the cell"
        )
    return record


# ---------------------------------------------------------------- reading a file that came from outside

MAX_BYTES = 8 * 2**20  # a record is a few KB; its log tail at most tens of KB

KINDS = (
    (stat.S_ISLNK, "a symbolic link"),
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISDIR, "a folder"),
)


def not_plain(path: PathArg, cap: int = MAX_BYTES) -> Optional[str]:
    """Why `path` is not a plain file of at most `cap` bytes (a link, a FIFO, a device, too big), or None; by lstat,
    so nothing is opened or followed."""
    try:
        st = os.lstat(path)
    except OSError as e:
        return f"unreadable ({e})"
    for test, kind in KINDS:
        if test(st.st_mode):
            return f"{kind}, not a plain file"
    if st.st_size > cap:
        return f"{st.st_size} bytes, more than any record ({cap})"
    return None


def read_plain(path: PathArg, cap: int = MAX_BYTES) -> bytes:
    """The bytes of the plain file `path`: opened without following a link and without blocking (a FIFO swapped in
    after the check is not waited on), at most `cap` bytes; RecordError naming why not."""
    why = not_plain(path, cap)
    if why:
        raise RecordError(f"{path}: {why}; not read")
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as e:
        raise RecordError(f"{path}: not opened as a plain file ({e}); not read") from e
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
            raise RecordError(f"{path}: not a plain file; not read")
        data = f.read(cap + 1)
    if len(data) > cap:
        raise RecordError(f"{path}: more than any record ({cap} bytes); not read")
    return data
