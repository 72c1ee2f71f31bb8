"""Building a submission from a run folder: `submit` copies its plan, records and logs (host names removed with
--no-hosts), seals them with their digests, signs them where asked, and keeps them only when the checker accepts."""

import json
import os
import platform
import re
import shutil
import tempfile
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from scripts.paths import safe_id
from scripts.plan import planfile as plans
from scripts.results import records
from scripts.results.submission import spec
from scripts.results.submission.code import checkout_code_hash, committed_code_hash, full_commit
from scripts.results.submission.machine import machine_of, statuses
from scripts.results.submission.signing import sign
from scripts.results.submission.spec import (
    DIGESTS,
    HOST_PLACEHOLDER,
    MANIFEST,
    PLAN,
    SCHEMA,
    SIGNATURE,
    Records,
    SubmissionError,
    contents,
    digest,
)
from scripts.results.submission.verdict import findings
from shared.record import RecordError, now, write_atomic, write_record
from shared.sysinfo import safe_name


def default_name(machine: dict[str, Any], recs: Records) -> str:
    """MACHINECLASS-DATE in the safe alphabet: the GPU class where the run has one, the date of its last record."""
    classes = machine["machine_classes"]
    klass = next((c for c in classes if c.startswith("gpu:")), classes[0] if classes else "unknown-machine")
    last = max((records.moment(r.finished_at, "finished_at") for r in recs.values()), default=datetime.now(UTC))
    return f"{re.sub(r'[^a-z0-9._-]+', '-', klass).strip('-.')}-{last.strftime('%Y%m%d')}"[:128]


def host_names(recs: Mapping[str, records.Record | Mapping[str, Any]]) -> list[str]:
    """Every name this machine goes by in a run's files: the records' hosts, ROSETTA_HOST, this machine's name."""
    names = {records.Record.of(r).host for r in recs.values()}
    node = platform.node()
    names |= {os.environ.get("ROSETTA_HOST"), node, node.split(".")[0], safe_name(node)}
    return sorted((n for n in names if isinstance(n, str) and n and n != HOST_PLACEHOLDER), key=len, reverse=True)


def redactor(hosts: list[str]) -> Callable[[str], str]:
    """A function replacing each of `hosts` (as a whole word of a host name's alphabet, any case) in a text."""
    if not hosts:
        return lambda text: text
    pattern = re.compile(r"(?<![A-Za-z0-9_-])(?:" + "|".join(map(re.escape, hosts)) + r")(?![A-Za-z0-9_-])", re.I)
    return lambda text: pattern.sub(HOST_PLACEHOLDER, text)


def redact_json(value: Any, redact: Callable[[str], str]) -> Any:
    """`value` with `redact` applied to every string in it (keys too): a JSON document stays one."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, list):
        return [redact_json(v, redact) for v in value]
    if isinstance(value, dict):
        return {redact(k): redact_json(v, redact) for k, v in value.items()}
    return value


def seal(folder: Path | str, manifest: dict[str, Any]) -> None:
    """Write `manifest` as submission.json, then digests.sha256 over every other file of `folder`."""
    write_atomic(Path(folder) / MANIFEST, json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    lines = [f"{digest(Path(folder) / rel)}  {rel}\n" for rel in contents(folder) if rel not in (DIGESTS, SIGNATURE)]
    write_atomic(Path(folder) / DIGESTS, "".join(lines))


def run_to_submit(run_dir: Path) -> tuple[plans.PlanFile, Records]:
    """(plan file, {relative path: record}) of a run folder; a SubmissionError for anything unsound in it."""
    if not (run_dir / PLAN).is_file() or not (run_dir / "cells").is_dir():
        raise SubmissionError(
            f"{run_dir} is not a run folder (it needs {PLAN} and cells/): pass the folder a "
            "`make demo`, `make matrix` or `python -m scripts.run` wrote under results/"
        )
    try:
        plan_file = plans.read(run_dir / PLAN)
    except plans.PlanError as e:
        raise SubmissionError(str(e)) from e
    recs, bad = {}, []
    for path in sorted((run_dir / "cells").glob("*.json")):
        try:
            recs[f"cells/{path.name}"] = records.load(path)
        except RecordError as e:
            bad.append(str(e))
    if bad:
        raise SubmissionError("unsound records (a submission holds only records that validate):\n  " + "\n  ".join(bad))
    if not recs:
        raise SubmissionError(f"{run_dir}/cells holds no record: nothing to submit")
    return plan_file, recs


def run_commit(recs: Records, repo: Path | str | None) -> str:
    """The one commit every record names, in full; a SubmissionError where they name none, several, or an unknown."""
    named = sorted({r.git_commit for r in recs.values() if r.git_commit is not None})
    if len(named) != 1:
        raise SubmissionError(
            f"the records name {len(named)} commits ({', '.join(named) or 'none'}): a submission "
            "is one run of one commit (re-run the cells of other commits with --resume)"
        )
    commit = full_commit(named[0], repo)
    if commit is None:
        raise SubmissionError(
            f"the records' commit {named[0]} is not in this checkout: submit from the clone that "
            "ran them (or `git fetch` it)"
        )
    return commit


def copy(run_dir: Path, folder: Path, recs: Records, redact: Callable[[str], str] | None = None) -> None:
    """The run's plan, records and logs into `folder`: byte for byte, or with `redact` applied to every string of
    each record as written (its `data`, never the upgraded view)."""
    (folder / "cells").mkdir(parents=True)
    (folder / "logs").mkdir()
    logs = [f"logs/{p.name}" for p in sorted((run_dir / "logs").glob("*.log"))]
    if redact is None:
        for rel in (PLAN, *recs, *logs):
            shutil.copyfile(run_dir / rel, folder / rel)
        return
    write_atomic(
        folder / PLAN, json.dumps(redact_json(json.loads((run_dir / PLAN).read_text()), redact), indent=2) + "\n"
    )
    for rel, record in recs.items():
        write_record(folder / rel, redact_json(record.data, redact))
    for rel in logs:
        write_atomic(folder / rel, redact((run_dir / rel).read_text(errors="replace")))


def submit(
    run_dir: Path | str,
    name: str | None = None,
    no_hosts: bool = False,
    community: Path | str | None = None,
    repo: Path | str | None = None,
    sign_key: Path | str | None = None,
) -> Path:
    """Package the run folder `run_dir` as community/NAME/ (its files: spec.py) and check it; returns its
    path. Refused (SubmissionError) when the checkout's runner code is not the commit the records name, the records
    describe more than one machine, or the checker would reject the result (nothing is left behind then)."""
    run_dir, community = Path(run_dir), Path(community or spec.COMMUNITY)
    plan_file, recs = run_to_submit(run_dir)
    commit = run_commit(recs, repo)
    committed, here = committed_code_hash(commit, repo), checkout_code_hash(repo)
    if committed != here:
        raise SubmissionError(
            f"runners/ and shared/ here (code hash {here}) are not those of commit {commit[:12]} "
            f"the records name ({committed}): uncommitted or later changes. Submit from a "
            f"checkout of that commit whose runner code is committed (git status runners shared)"
        )
    machine, disagreements = machine_of(recs)
    if disagreements:
        raise SubmissionError(
            "the records describe more than one machine (a submission is one machine; split the "
            "run):\n  " + "\n  ".join(disagreements)
        )
    name = name or default_name(machine, recs)
    if not safe_id(name):
        raise SubmissionError(
            f"--name {name!r}: use letters, digits, '.', '_' and '-' (at most 128, no leading punctuation)"
        )
    target = community / name
    if target.exists():
        raise SubmissionError(f"{target} exists: pass another --name, or delete it to submit again")
    community.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".submit-", dir=community))
    try:
        folder = staging / name
        redact = redactor(host_names(recs)) if no_hosts else None
        copy(run_dir, folder, recs, redact)
        seal(
            folder,
            {
                "schema": SCHEMA,
                "name": name,
                "created_at": now(),
                "run_id": plan_file.run_id,
                "profile": plan_file.plan.profile,
                "git_commit": commit,
                "code_hash": committed,
                "hosts_removed": bool(no_hosts),
                "machine": redact_json(machine, redact or str),
                "cells": statuses(recs),
            },
        )
        if sign_key:
            sign(folder, sign_key)
        found = findings(folder, repo=repo)
        if found:
            raise SubmissionError("the checker would reject this submission:\n  " + "\n  ".join(found))
        folder.rename(target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target
