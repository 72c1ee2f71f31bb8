"""Community results: a run folder packaged as a submission, and the checker that accepts or rejects one.

    python -m scripts.results.submission submit results/demo-20261204-101500 [--name NAME] [--no-hosts]
                                                                          # make submit RUN=…
    python -m scripts.results.submission check results/community/NAME [DIR …]    # no DIR: every submission there

A submission is a folder results/community/NAME/:
    submission.json   what it is: run id, profile, commit, runner-code hash, the machine, its cells per status
    plan.json         the run's plan (every cell the run was to hold)
    cells/ID.json     one record per cell, as the run wrote it (--no-hosts: host names replaced by a placeholder)
    logs/ID.log       the cells' logs (the same)
    digests.sha256    SHA-256 of every other file, written at submit time (`sha256sum -c digests.sha256` reads it)

The checker follows MLPerf's submission checker: one line per finding, naming the file and why, then one summary line
per submission and a total; exit 0 only when every submission is accepted. A submission is accepted when
- nothing was edited after submit: every file is in digests.sha256 with its digest, none is missing, none was added;
- every record validates (scripts/results/records.py), is named by its cell id, belongs to the plan's run, and every
  cell of the plan has its record (a cell never silently goes missing);
- the runner code is a commit of this repository: the commit exists here (with --ancestor-of, on that branch), and
  the code hash is the hash of runners/ + shared/ at that commit, recomputed from git; every record ran at it;
- the machine description is complete (CPU, cores, machine class; GPUs and driver for GPU cells; each framework
  stack's version and Python, CUDA for GPU cells) and is the one the records themselves give;
- each ok cell has its samples (timing.values, verify's `samples`) and a median that is theirs (a demo or tiny
  training cell too short for one timing window, which its record says, is timed by its epoch as verify does);
- statuses are honest: an ok cell has its time metric, a system description and no failure reason; a failed,
  timed-out or skipped cell says why; the counts in submission.json are the records'.

`accepted(root)` and `findings(folder)` are the API the static site reads submissions through.
"""

import argparse
import hashlib
import json
import math
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from datetime import UTC, datetime
from functools import lru_cache
from pathlib import Path, PurePosixPath

from scripts.paths import COMMUNITY, ROOT, SAFE_ID, files_hash, safe_id
from scripts.plan import planfile as plans
from scripts.plan.matrix import Cell
from scripts.results import records
from scripts.results.verify import samples
from shared import flops, params
from shared.calibration import cpu_ceiling
from shared.params import SAMPLE_UNIT, TIME_METRIC, TRAINING_TASKS
from shared.record import STATUSES, RecordError, now, write_atomic, write_record
from shared.sysinfo import safe_name

# The repository whose history and whose allowed_signers the checker trusts: this checkout (in CI, the base branch's;
# the tests point it at a repository of their own, committed from the working tree).
REPO = ROOT
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


# ---------------------------------------------------------------- the runner-code hash, from git or the checkout


def git(args, repo=None, stdin=None):
    """`git ARGS` in `repo` (default REPO): (exit code, stdout bytes)."""
    try:
        out = subprocess.run(["git", *args], cwd=repo or REPO, input=stdin, capture_output=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired) as e:
        return 1, str(e).encode()
    return out.returncode, out.stdout


def tree_hash(files):
    """The runner-code hash of (path, content) pairs: compose's recipe (files_hash) in the order of sorted paths."""
    return files_hash(sorted(files, key=lambda item: PurePosixPath(item[0]).parts))


def is_code(path):
    return "__pycache__" not in PurePosixPath(path).parts and not path.endswith(".pyc")


def full_commit(commit, repo=None):
    """The 40-hex commit `commit` (a hash or an abbreviation) names in `repo`, or None where it names none."""
    if not isinstance(commit, str) or not re.fullmatch(r"[0-9a-f]{4,40}", commit):
        return None
    code, out = git(["rev-parse", "--verify", "--quiet", f"{commit}^{{commit}}"], repo)
    return out.decode().strip() if code == 0 else None


def committed_code_hash(commit, repo=None):
    """The hash of runners/ + shared/ as committed at `commit` (40 hex), read with git ls-tree and cat-file."""
    return _committed_code_hash(commit, str(repo or REPO))


@lru_cache(maxsize=32)
def _committed_code_hash(commit, repo):
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
    files, at = [], 0
    for path, _ in blobs:  # each answer: "SHA blob SIZE\n" + SIZE bytes + "\n"
        header_end = out.index(b"\n", at)
        size = int(out[at:header_end].split()[2])
        files.append((path, out[header_end + 1 : header_end + 1 + size]))
        at = header_end + 1 + size + 1
    return tree_hash(files)


def checkout_code_hash(repo=None):
    """The hash of runners/ + shared/ as they are in the checkout: tracked and untracked files, not ignored ones."""
    repo = repo or REPO
    code, out = git(["ls-files", "-z", "--cached", "--others", "--exclude-standard", "--", *CODE_DIRS], repo)
    if code != 0:
        raise SubmissionError(
            f"{repo} is not a git checkout ({out.decode()[:200]}); submit from a clone of the repository"
        )
    paths = sorted({p for p in out.decode().split("\0") if p and is_code(p)})
    return tree_hash((p, (Path(repo) / p).read_bytes()) for p in paths if (Path(repo) / p).is_file())


# ---------------------------------------------------------------- what a run's records say of its machine


def host_value(system, key):
    if key == "gpus":  # the host's GPU models (nvidia-smi), else the framework's names for them
        names = [g.get("name") for g in system.get("gpu_facts") or [] if isinstance(g, dict)]
        return sorted({str(n) for n in names or system.get("gpus") or [] if n})
    return system.get(key)


def machine_of(recs):
    """(machine fingerprint, [disagreements]) from `recs` ({relative path: record}). Only runner-written records
    describe a machine (a host-written record of a crash names only the host)."""
    described = {
        path: r["system"]
        for path, r in recs.items()
        if isinstance(r.get("system"), dict) and r["system"].get("machine_class")
    }
    machine = {"machine_classes": sorted({s["machine_class"] for s in described.values()})}
    disagreements = []
    for key in HOST_KEYS:
        seen = {}
        for path, system in sorted(described.items()):
            value = host_value(system, key)
            if value not in (None, "", []):
                seen.setdefault(json.dumps(value, sort_keys=True), path)
        if len(seen) > 1:
            disagreements.append(f"{key}: " + ", ".join(f"{v} ({p})" for v, p in seen.items()))
        machine[key] = json.loads(next(iter(seen))) if seen else None
    stacks = {}
    for path, system in sorted(described.items()):
        cell = recs[path]["cell"]
        stack = stacks.setdefault(f"{cell['framework']}:{cell['variant']}", {key: set() for key in STACK_KEYS})
        for key in STACK_KEYS:
            if system.get(key) not in (None, ""):
                stack[key].add(json.dumps(system[key]))
    machine["stacks"] = {
        name: {
            key: (json.loads(next(iter(v))) if len(v) == 1 else sorted(map(json.loads, v)) if v else None)
            for key, v in stack.items()
        }
        for name, stack in stacks.items()
    }
    return machine, disagreements


def incomplete(machine, recs):
    """What the machine description lacks for the cells `recs` ({path: record}) hold, one line each."""
    missing = [f"machine.{key}" for key in ("machine_classes", "cpu", "cpu_count") if not machine.get(key)]
    ok = [r for r in recs.values() if r.get("status") == "ok" and isinstance(r.get("cell"), dict)]
    if any(r["cell"].get("device") == "gpu" for r in ok):
        missing += [f"machine.{key} (the run has GPU cells)" for key in ("gpus", "driver") if not machine.get(key)]
    stacks = machine.get("stacks") if isinstance(machine.get("stacks"), dict) else {}
    for r in ok:
        name = f"{r['cell'].get('framework')}:{r['cell'].get('variant')}"
        stack = stacks.get(name) if isinstance(stacks.get(name), dict) else {}
        keys = ("framework_version", "python") + (("cuda",) if r["cell"].get("device") == "gpu" else ())
        missing += [f"machine.stacks.{name}.{key}" for key in keys if stack.get(key) in (None, "", [])]
    return sorted(set(missing))


def statuses(recs):
    counts = Counter(r.get("status") for r in recs.values())
    return {status: counts[status] for status in STATUSES}


# ---------------------------------------------------------------- submit


def default_name(machine, recs):
    """MACHINECLASS-DATE in the safe alphabet: the GPU class where the run has one, the date of its last record."""
    classes = machine["machine_classes"]
    klass = next((c for c in classes if c.startswith("gpu:")), classes[0] if classes else "unknown-machine")
    last = max((records.moment(r["finished_at"], "finished_at") for r in recs.values()), default=datetime.now(UTC))
    return f"{re.sub(r'[^a-z0-9._-]+', '-', klass).strip('-.')}-{last.strftime('%Y%m%d')}"[:128]


def host_names(recs):
    """Every name this machine goes by in a run's files: the records' hosts, ROSETTA_HOST, this machine's name."""
    names = {(r.get("system") or {}).get("host") for r in recs.values() if isinstance(r.get("system"), dict)}
    node = platform.node()
    names |= {os.environ.get("ROSETTA_HOST"), node, node.split(".")[0], safe_name(node)}
    return sorted((n for n in names if isinstance(n, str) and n and n != HOST_PLACEHOLDER), key=len, reverse=True)


def redactor(hosts):
    """A function replacing each of `hosts` (as a whole word of a host name's alphabet, any case) in a text."""
    if not hosts:
        return lambda text: text
    pattern = re.compile(r"(?<![A-Za-z0-9_-])(?:" + "|".join(map(re.escape, hosts)) + r")(?![A-Za-z0-9_-])", re.I)
    return lambda text: pattern.sub(HOST_PLACEHOLDER, text)


def redact_json(value, redact):
    """`value` with `redact` applied to every string in it (keys too): a JSON document stays one."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, list):
        return [redact_json(v, redact) for v in value]
    if isinstance(value, dict):
        return {redact(k): redact_json(v, redact) for k, v in value.items()}
    return value


def digest(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def contents(folder):
    """Every path under `folder` (files, links, anything), relative, as POSIX text; sorted."""
    folder = Path(folder)
    return sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_symlink() or not p.is_dir())


def seal(folder, manifest):
    """Write `manifest` as submission.json, then digests.sha256 over every other file of `folder`."""
    write_atomic(Path(folder) / MANIFEST, json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    lines = [f"{digest(Path(folder) / rel)}  {rel}\n" for rel in contents(folder) if rel not in (DIGESTS, SIGNATURE)]
    write_atomic(Path(folder) / DIGESTS, "".join(lines))


def run_to_submit(run_dir):
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
            recs[f"cells/{path.name}"] = records.read(path)
        except RecordError as e:
            bad.append(str(e))
    if bad:
        raise SubmissionError("unsound records (a submission holds only records that validate):\n  " + "\n  ".join(bad))
    if not recs:
        raise SubmissionError(f"{run_dir}/cells holds no record: nothing to submit")
    return plan_file, recs


def run_commit(recs, repo):
    """The one commit every record names, in full; a SubmissionError where they name none, several, or an unknown."""
    named = sorted({r.get("git_commit") for r in recs.values()} - {None})
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


def copy(run_dir, folder, recs, redact=None):
    """The run's plan, records and logs into `folder`: byte for byte, or with `redact` applied to every string."""
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
        write_record(folder / rel, redact_json(record, redact))
    for rel in logs:
        write_atomic(folder / rel, redact((run_dir / rel).read_text(errors="replace")))


def submit(run_dir, name=None, no_hosts=False, community=None, repo=None, sign_key=None):
    """Package the run folder `run_dir` as community/NAME/ (see the module docstring) and check it; returns its
    path. Refused (SubmissionError) when the checkout's runner code is not the commit the records name, the records
    describe more than one machine, or the checker would reject the result (nothing is left behind then)."""
    run_dir, community = Path(run_dir), Path(community or COMMUNITY)
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


# ---------------------------------------------------------------- check


def read_manifest(folder):
    """(manifest, [findings]); the manifest is None where it cannot be used at all."""
    try:
        manifest = json.loads(records.read_plain(folder / MANIFEST).decode())
    except (RecordError, ValueError, RecursionError) as e:
        return None, [f"{MANIFEST}: unreadable ({str(e)[:200]}); `make submit` writes it"]
    if records.jsonschema is None:
        return None, [f"{MANIFEST}: jsonschema is not installed, so nothing can be checked (make host)"]
    errors = sorted(
        records.jsonschema.Draft202012Validator(MANIFEST_SCHEMA).iter_errors(manifest),
        key=lambda e: list(map(str, e.absolute_path)),
    )
    if errors:
        return None, [
            f"{MANIFEST}: {'/'.join(map(str, e.absolute_path)) or '(the file)'}: {e.message[:300]}" for e in errors
        ]
    found = (
        []
        if manifest["name"] == folder.name
        else [f"{MANIFEST}: name {manifest['name']!r} is not the folder's ({folder.name!r})"]
    )
    return manifest, found


def check_digests(folder):
    """Every file listed with its SHA-256, none missing, none added, no link."""
    try:
        lines = records.read_plain(folder / DIGESTS).decode().splitlines()  # never a link followed out of the folder
    except (RecordError, UnicodeDecodeError) as e:
        return [f"{DIGESTS}: missing or unreadable ({str(e)[:200]}): nothing shows the files are as submitted"]
    listed, found = {}, []
    for n, line in enumerate(lines, 1):
        match = re.fullmatch(r"([0-9a-f]{64})  (\S.*)", line)
        rel = match and match.group(2)
        if not match or rel.startswith("/") or ".." in PurePosixPath(rel).parts or rel in (DIGESTS, SIGNATURE, "."):
            found.append(f"{DIGESTS}: line {n} is not 'SHA-256  relative path' of a file here: {line[:120]!r}")
        else:
            listed[rel] = match.group(1)
    present = set(contents(folder)) - {DIGESTS, SIGNATURE}
    for rel in sorted(present - set(listed)):
        found.append(f"{rel}: not in {DIGESTS}: added after submit")
    for rel, expected in sorted(listed.items()):
        path = folder / rel
        if rel not in present:
            found.append(f"{rel}: listed in {DIGESTS} but missing: removed after submit")
        elif path.is_symlink() or not path.is_file():
            found.append(f"{rel}: not a plain file (a link or a special file has no place in a submission)")
        elif digest(path) != expected:
            found.append(f"{rel}: edited after submit (its SHA-256 is not the one in {DIGESTS})")
    return found


def layout(folder):
    """Files a submission does not hold: anything but the manifest, digests, plan, cells/*.json, logs/*.log."""
    fixed = {MANIFEST, DIGESTS, PLAN, SIGNATURE}
    return [
        f"{rel}: unexpected file (a submission holds {MANIFEST}, {DIGESTS}, {PLAN}, cells/*.json, logs/*.log)"
        for rel in contents(folder)
        if rel not in fixed and not re.fullmatch(r"cells/[^/]+\.json|logs/[^/]+\.log", rel)
    ]


def check_records(folder):
    """({path: record} of the records that validate, [findings]): the schema, file names, the plan's run and cells."""
    found, recs, invalid = [], {}, set()
    for path in sorted((folder / "cells").glob("*.json")):
        rel = f"cells/{path.name}"
        try:
            record = records.read(path)
        except RecordError as e:
            found.append(f"{rel}: fails validation: {str(e).replace(str(path) + ': ', '', 1)}")
            invalid.add(path.stem)
            continue
        recs[rel] = record
        if path.stem != Cell(**record["cell"]).id:
            found.append(f"{rel}: holds cell {Cell(**record['cell']).id}, not the one its name says")
    try:
        plan_file = plans.read(folder / PLAN)
    except plans.PlanError as e:
        return recs, found + [f"{PLAN}: {str(e).replace(str(folder / PLAN) + ': ', '', 1)}"]
    planned = {c.id for c in plan_file.cells}
    for rel, record in recs.items():
        if record.get("run_id") != plan_file.run_id:
            found.append(f"{rel}: run id {record.get('run_id')!r} is not the plan's {plan_file.run_id!r}")
        if Path(rel).stem not in planned:
            found.append(f"{rel}: a cell the plan does not hold")
    for cell_id in sorted(planned - {Path(rel).stem for rel in recs} - invalid):
        found.append(
            f"cells/{cell_id}.json: missing: the plan holds this cell and every cell keeps its record "
            "(failed, skipped and timed-out ones too)"
        )
    return recs, found


def short_training(record):
    """A demo or tiny training cell too short to fill one timing window (a demo DenseNet's two steps): its record
    says it kept none (timing.repeats 0) and it is timed by its epoch, one value, as verify takes it. At full scale
    every training cell fills windows, so there a cell without samples is rejected."""
    timing, metrics = record.get("timing") or {}, record.get("metrics") or {}
    return (
        record["cell"]["scale"] != "full"
        and record["cell"]["task"] in TRAINING_TASKS
        and timing.get("repeats") == 0
        and bool(metrics.get("epoch_seconds"))
    )


def check_status(rel, record):
    """An honest status: ok only with its time metric, samples, a system and no failure reason; else a reason."""
    status, found = record["status"], []
    if status != "ok":
        if not (record.get("reason") or "").strip():
            found.append(f"{rel}: status {status} without a reason (a {status} cell says why)")
        return found
    task, metrics = record["cell"]["task"], record.get("metrics") or {}
    if (record.get("reason") or "").strip():
        found.append(f"{rel}: status ok but it gives a failure reason ({record['reason'][:80]!r})")
    value = metrics.get(TIME_METRIC[task])
    if not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        found.append(f"{rel}: status ok without its time metric metrics.{TIME_METRIC[task]}")
    if not (record.get("system") or {}).get("machine_class"):
        found.append(
            f"{rel}: status ok without a system description (the runner writes one with every result; "
            "a record the host wrote is failed, timeout or skipped)"
        )
    values = samples(record)
    if not values and short_training(record):
        pass
    elif not values:
        found.append(
            f"{rel}: status ok without samples (timing.values and timing.unit): a time is a set of post-warm-up samples"
        )
    # a sample of 0 s or less, NaN or infinity: refused with the record (records.contradictions); the median and every
    # other published figure: check_consistency
    return found + lacking(rel, record)


# What an ok record holds for its figures to be checked: every check of a published figure runs on its inputs, so an
# input left out would turn the check off (a ResNet-50 figure without `images`, a steady state without its epochs).
# The runners write all of it (shared/timing.py, shared/calibration.py, shared/sysinfo.py).
NEEDED_METRICS = {"resnet50": ("images", "seconds_per_1000_images")}
TRAINING_METRICS = ("train_samples", "epoch_seconds", "train_seconds", "steady_state_seconds")
RATE_METRICS = ("model_flops_per_sample", "achieved_flops")


def lacking(rel, record):
    """What an ok record lacks of the inputs its published figures are checked from, one finding each."""
    task, device = record["cell"]["task"], record["cell"]["device"]
    metrics, system = record.get("metrics") or {}, record.get("system") or {}
    found = [
        f"{rel}: metrics.{key} is missing (the figures it publishes are checked from it)"
        for key in (*NEEDED_METRICS.get(task, TRAINING_METRICS), *RATE_METRICS)
        if metrics.get(key) is None
    ]
    unit = (record.get("timing") or {}).get("unit")
    if samples(record) and unit != SAMPLE_UNIT[task]:
        found.append(f"{rel}: timing.unit {unit!r} is not the {task} task's {SAMPLE_UNIT[task]!r}")
    calibration = system.get("calibration") if isinstance(system.get("calibration"), dict) else {}
    needed = {
        "system.params_hash": system.get("params_hash"),
        "git_commit": record.get("git_commit"),
        "system.calibration.gemm_fp32_flops": calibration.get("gemm_fp32_flops"),
    }
    if device == "gpu":
        needed.update(
            {"system.gpu_sm_counts": system.get("gpu_sm_counts"), "system.gpu_facts": system.get("gpu_facts")}
        )
    found += [
        f"{rel}: {key} is missing (what the record is checked against: the task's parameters, the commit, the "
        "hardware's own rate and ceiling)"
        for key, value in needed.items()
        if value in (None, [], {})
    ]
    return found


def on_history(commit, repo, ancestor_of):
    """Whether `commit` is a commit of this repository on `ancestor_of`'s history: the only commits whose code the
    checker ever runs (check_code says why another is not)."""
    if full_commit(commit, repo) != commit:
        return False
    return git(["merge-base", "--is-ancestor", commit, ancestor_of], repo)[0] == 0


def check_code(manifest, recs, repo, ancestor_of=None):
    """The commit exists here (and is on `ancestor_of`), the code hash is runners/ + shared/ at it, every record
    ran at it."""
    commit = manifest["git_commit"]
    if full_commit(commit, repo) != commit:
        return [
            f"{MANIFEST}: git_commit {commit} is not a commit of this repository (a fork's or a rewritten "
            "commit; a shallow clone may lack it: git fetch --unshallow)"
        ]
    found = []
    if ancestor_of and git(["merge-base", "--is-ancestor", commit, ancestor_of], repo)[0] != 0:
        found.append(f"{MANIFEST}: git_commit {commit[:12]} is not on {ancestor_of}")
    try:
        expected = committed_code_hash(commit, repo)
    except SubmissionError as e:
        return found + [f"{MANIFEST}: {e}"]
    if manifest["code_hash"] != expected:
        found.append(
            f"{MANIFEST}: code_hash {manifest['code_hash']} is not the hash of runners/ and shared/ at "
            f"commit {commit[:12]} ({expected})"
        )
    for rel, record in recs.items():
        ran = record.get("git_commit")
        if ran is not None and not commit.startswith(ran):
            found.append(f"{rel}: ran at commit {ran}, not the submission's {commit[:12]}")
    return found


def check_machine(manifest, recs):
    """The machine description is complete and is the one the records give; the cell counts are the records'."""
    derived, disagreements = machine_of(recs)
    claimed = manifest["machine"]
    found = [f"cells/: the records describe more than one machine: {d}" for d in disagreements]
    cpu_classes = sorted({c for c in derived["machine_classes"] if c.startswith("cpu:")})
    if len(cpu_classes) > 1:  # a submission is one machine: its CPU cells share the cores they could use
        found.append(f"cells/: the CPU records describe more than one machine class: {', '.join(cpu_classes)}")
    found += [
        f"{MANIFEST}: {field} is missing (the machine description must be complete)"
        for field in incomplete(claimed, recs)
    ]
    found += [
        f"{MANIFEST}: machine.{key} is {claimed.get(key)!r}, the records say {derived.get(key)!r}"
        for key in sorted(set(derived) | set(claimed))
        if claimed.get(key) != derived.get(key)
    ]
    if manifest["hosts_removed"]:
        found += [
            f"{rel}: system.host names a host in a submission without host names"
            for rel, r in recs.items()
            if (r.get("system") or {}).get("host") not in (None, HOST_PLACEHOLDER)
        ]
    if manifest["cells"] != statuses(recs):
        found.append(f"{MANIFEST}: cells {manifest['cells']} are not the records' {statuses(recs)}")
    return found


def findings(folder, repo=None, ancestor_of=None):
    """Why the submission in `folder` is rejected, one line per finding naming its file ('NAME/cells/x.json: why');
    [] when it is accepted. Never raises for anything the folder holds: it is untrusted input."""
    folder = Path(folder)
    if folder.is_symlink() or not folder.is_dir():
        return [f"{shown(folder.name)}: not a folder (a link or a file has no place among submissions)"]
    if not re.fullmatch(SAFE_ID, folder.name):
        return [f"{shown(folder.name)}: not a submission's name (letters, digits, '.', '_', '-')"]
    repo = repo or REPO
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
        code_found = check_code(manifest, recs, repo, ancestor_of)
        found += code_found + check_machine(manifest, recs) + check_image_hashes(manifest, recs)
        # the plan is re-derived by running the commit's own scripts.plan.planfile: only a commit of this repository,
        # and with --ancestor-of (CI) only one on that branch, is ever run
        if on_history(manifest["git_commit"], repo, ancestor_of):
            plan_found, hashes = check_plan(folder, manifest, repo)
            found += plan_found
    for rel, record in recs.items():
        found += check_consistency(rel, record, hashes)
    return [f"{folder.name}/{line}" for line in dict.fromkeys(found)]


def submissions(root=None):
    """The submission folders under `root` (every folder but hidden ones: a submit in progress stages in one)."""
    root = Path(root or COMMUNITY)
    return (
        sorted(p for p in root.iterdir() if not p.name.startswith(".") and (p.is_symlink() or p.is_dir()))
        if root.is_dir()
        else []
    )  # a link among them is listed, and rejected by findings: never walked


def shown(text):
    """`text` as one printable line: a newline or control character in a file name cannot start a line of its own
    in a log (a forged 'accepted' line, a GitHub workflow command)."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in str(text))


def summary(folder):
    """What the site shows of an accepted submission: its manifest, plus the folder's records and logs."""
    manifest = json.loads(records.read_plain(Path(folder) / MANIFEST).decode())
    return {
        **manifest,
        "signed_by": signer(folder)[0],
        "records": sorted(str(p) for p in (Path(folder) / "cells").glob("*.json")),
        "logs": sorted(str(p) for p in (Path(folder) / "logs").glob("*.log")),
    }


def accepted(root=None, repo=None):
    """[(name, folder, summary)] of the accepted submissions under `root` (default results/community), by name;
    rejected ones are left out (the checker says why). summary: the manifest's keys (name, created_at, run_id,
    profile, git_commit, code_hash, hosts_removed, machine{machine_classes, cpu, cpu_flags, cpu_count, gpus, driver,
    stacks}, cells{status: n}) and the paths of its records and logs. The commits must be in `repo`'s history: in a
    shallow clone (actions/checkout's default) every submission is rejected, so check out with fetch-depth: 0."""
    return [(folder.name, folder, summary(folder)) for folder in submissions(root) if not findings(folder, repo)]


# ---------------------------------------------------------------- what holds without trusting the submitter

# What the checker's verdict means, printed with it (README, results/community/README.md).
PROOF = (
    "the digests prove only that the files are those listed in digests.sha256, which the submitter wrote: an "
    "edited, re-sealed copy passes them. What is checked beyond that holds without trusting the submitter: the "
    "records agree with themselves and with the stated hardware, the plan is the profile's at the stated commit "
    "and every planned cell has an honest record. Whether the numbers are real only a reproduction shows "
    "(python -m scripts.reproduce DIR --cells N on a machine of the same class); who made them only "
    "a signature shows"
)
GPU_FLOP_PER_SM_CYCLE = 8192  # above any dense tensor-core rate per SM and clock (H100 bf16 ≈ 4,100; B200 ≈ 7,700)
CALIBRATION_FLOOR = 0.03  # the run's best CPU GEMM is at least this share of the stated CPU's ceiling
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


def physical_ceiling(record):
    """An upper bound on the FLOP/s of the hardware a record states, or None where it states too little: CPU cores ×
    5 GHz × the widest FMA (shared.calibration.cpu_ceiling); GPU SMs × their top clock × GPU_FLOP_PER_SM_CYCLE."""
    system, cell = record.get("system") or {}, record["cell"]
    if cell["device"] == "cpu":
        return cpu_ceiling(system) if system.get("cpu_usable") or system.get("cpu_count") else None
    sms, facts = system.get("gpu_sm_counts") or [], system.get("gpu_facts") or []
    clocks = [f.get("max_sm_clock_mhz") for f in facts if isinstance(f, dict)]
    if not sms or not clocks or not all(isinstance(v, (int, float)) and v > 0 for v in [*sms, *clocks]):
        return None
    return sum(sms) * max(clocks) * 1e6 * GPU_FLOP_PER_SM_CYCLE


def check_consistency(rel, record, params_hashes=None):
    """The record agrees with itself (records.inconsistencies: its machine class the one its own facts give among
    the rest), its task parameters are the commit's, and no rate passes the physical ceiling of the hardware it
    states."""
    found = [f"{rel}: {line}" for line in records.inconsistencies(record)]
    system, cell = record.get("system") or {}, record["cell"]
    wanted = (params_hashes or {}).get(f"{cell['task']}:{cell['scale']}")
    if wanted and system.get("params_hash") and system["params_hash"] != wanted:
        found.append(
            f"{rel}: system.params_hash {system['params_hash']} is not the {cell['task']} task's parameters "
            f"at {cell['scale']} scale at the submission's commit ({wanted})"
        )
    per_sample = (record.get("metrics") or {}).get("model_flops_per_sample")
    if (
        isinstance(per_sample, (int, float))
        and cell["scale"] in params.SCALES
        and system.get("params_hash") == params.params_hash(cell["task"], cell["scale"])
    ):
        model = flops.per_sample(cell["task"], params.task_params(cell["task"], cell["scale"]))
        if records.differs(per_sample, model):  # what achieved_flops and the ceiling are reckoned from
            found.append(
                f"{rel}: metrics.model_flops_per_sample {per_sample:.6g} is not the task's ({model:.6g} "
                "FLOPs a sample, shared/flops.py)"
            )
    ceiling = physical_ceiling(record)
    if ceiling is None and record["status"] == "ok":
        found.append(
            f"{rel}: states too little of its hardware to bound its rates (CPU cores; GPU SM counts and clocks)"
        )
    calibration = system.get("calibration") if isinstance(system.get("calibration"), dict) else {}
    rates = {
        "metrics.achieved_flops": (record.get("metrics") or {}).get("achieved_flops"),
        **{f"system.calibration.{k}": calibration.get(k) for k in ("gemm_fp32_flops", "gemm_reduced_flops")},
    }
    for where, rate in rates.items():
        if ceiling and isinstance(rate, (int, float)) and rate > ceiling:
            found.append(
                f"{rel}: {where} {rate / 1e9:.4g} GFLOP/s is above what the stated hardware can do "
                f"({ceiling / 1e9:.4g} GFLOP/s at most)"
            )
    return found


def check_calibration(recs):
    """The CPU the records state is the one that calibrated: the run's best CPU GEMM is at least CALIBRATION_FLOOR of
    that CPU's ceiling (two cores written over as 56 leave the rate of two). The best, not each: one cell's GEMM may
    fall far in a transient of a loaded machine; one record's cores written over alone is another machine class
    (check_machine)."""
    best = {}
    for rel, record in recs.items():
        system = record.get("system") or {}
        rate = (
            (system.get("calibration") or {}).get("gemm_fp32_flops")
            if isinstance(system.get("calibration"), dict)
            else None
        )
        if record["cell"]["device"] == "cpu" and isinstance(rate, (int, float)) and rate > 0:
            ceiling = physical_ceiling(record)
            if ceiling and rate / ceiling > best.get("share", -1):
                best = {"share": rate / ceiling, "rel": rel, "ceiling": ceiling, "rate": rate}
    if best and best["share"] < CALIBRATION_FLOOR:
        return [
            f"{best['rel']}: the run's best CPU GEMM ({best['rate'] / 1e9:.4g} GFLOP/s) is "
            f"{best['share']:.1%} of what the stated CPU can do ({best['ceiling'] / 1e9:.4g} GFLOP/s); every "
            f"real machine reaches {CALIBRATION_FLOOR:.0%}: the machine is not the one the records describe"
        ]
    return []


def check_copies(recs):
    """No two ok records share their samples: a cell turned ok with another cell's numbers."""
    seen, found = {}, []
    for rel, record in sorted(recs.items()):
        values = samples(record) if record["status"] == "ok" else []
        if len(values) >= 2:
            key = json.dumps(values)
            if key in seen:
                found.append(f"{rel}: its samples are those of {seen[key]}, to the last digit: copied numbers")
            seen.setdefault(key, rel)
    return found


@lru_cache(maxsize=16)
def derived_at(commit, profile, run_id, executor, repo):
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


def check_plan(folder, manifest, repo):
    """plan.json is what the profile expands to at the stated commit: no cell added, removed or changed. Returns
    (findings, {task:scale: params hash} at the commit, or None)."""
    try:
        doc = plans.document(folder / PLAN)
        profile, run_id, executor = doc["profile"], doc["run_id"], doc.get("executor")
        cells = {c["id"]: c for c in doc["cells"]}
    except (RecordError, ValueError, KeyError, TypeError, AttributeError):
        return [], None  # check_records names an unreadable plan
    if not (isinstance(profile, str) and isinstance(run_id, str) and isinstance(executor, (str, type(None)))):
        return [f"{PLAN}: profile, run_id and executor are not names"], None
    if profile != manifest["profile"] or run_id != manifest["run_id"]:
        return [
            f"{PLAN}: profile {profile!r}, run {run_id!r} are not the manifest's ({manifest['profile']!r}, "
            f"{manifest['run_id']!r})"
        ], None
    try:
        derived, hashes = derived_at(manifest["git_commit"], profile, run_id, executor, str(repo))
    except SubmissionError as e:
        return [f"{PLAN}: {e}"], None
    wanted = {c["id"]: c for c in derived["cells"]}
    found = [
        f"{PLAN}: cell {i} is not in profile {profile}'s plan at commit {manifest['git_commit'][:12]} (added)"
        for i in sorted(set(cells) - set(wanted))
    ]
    found += [
        f"{PLAN}: cell {i} of profile {profile}'s plan at commit {manifest['git_commit'][:12]} is missing "
        "(removed: a submission is the whole profile)"
        for i in sorted(set(wanted) - set(cells))
    ]
    found += [
        f"{PLAN}: cell {i} differs from profile {profile}'s plan at commit {manifest['git_commit'][:12]}"
        for i in sorted(set(cells) & set(wanted))
        if cells[i] != wanted[i]
    ]
    return found, hashes


def check_image_hashes(manifest, recs):
    """A record that ran in an image names the image's code hash: it must be the submission's."""
    return [
        f"{rel}: ran in an image of code hash {r['system']['code_hash']}, not the submission's {manifest['code_hash']}"
        for rel, r in recs.items()
        if isinstance(r.get("system"), dict) and r["system"].get("code_hash") not in (None, manifest["code_hash"])
    ]


# ---------------------------------------------------------------- signatures (optional)


def ssh_keygen(args, stdin=None):
    try:
        out = subprocess.run(["ssh-keygen", *args], input=stdin, capture_output=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as e:
        return 1, str(e)
    return out.returncode, (out.stdout + out.stderr).decode(errors="replace")


def sign(folder, key):
    """Sign digests.sha256 with the SSH private key `key` (ssh-keygen -Y sign): digests.sha256.sig."""
    code, out = ssh_keygen(["-Y", "sign", "-q", "-f", str(key), "-n", NAMESPACE, str(Path(folder) / DIGESTS)])
    if code != 0:
        raise SubmissionError(
            f"ssh-keygen cannot sign with {key}: {out.strip()[:300]}; pass an SSH private key "
            "(ssh-keygen -t ed25519) whose public key is in results/community/allowed_signers"
        )
    return Path(folder) / SIGNATURE


def signer(folder, repo=None):
    """(who signed, [findings]): (None, []) for an unsigned submission; the principal of allowed_signers (read from
    REPO, never from the submission's side) whose key made a valid signature of digests.sha256; a finding for a
    signature that does not verify or whose key is not listed."""
    sig = Path(folder) / SIGNATURE
    if not sig.exists():
        return None, []
    allowed = Path(repo or REPO) / ALLOWED_SIGNERS
    if sig.is_symlink() or not sig.is_file():
        return None, [f"{SIGNATURE}: not a plain file"]
    if not allowed.is_file():
        return None, [f"{SIGNATURE}: signed, but {ALLOWED_SIGNERS} does not exist here: no key to verify it with"]
    code, out = ssh_keygen(["-Y", "find-principals", "-s", str(sig), "-f", str(allowed)])
    principals = out.split() if code == 0 else []
    if not principals:
        return None, [f"{SIGNATURE}: not made by a key listed in {ALLOWED_SIGNERS}"]
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


# ---------------------------------------------------------------- reproduce


def runner_code_at(commit, wanted, into, repo=None):
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


# ---------------------------------------------------------------- command line


def describe(manifest):
    cells = ", ".join(f"{n} {status}" for status, n in manifest["cells"].items() if n)
    return (
        f"{sum(manifest['cells'].values())} cells ({cells}); {', '.join(manifest['machine']['machine_classes'])}; "
        f"commit {manifest['git_commit'][:12]}"
    )


def files_of(folder):
    """{relative path: bytes} of a submission folder's plain files (links and special files are findings elsewhere)."""
    out = {}
    for rel in contents(folder):
        try:
            out[rel] = records.read_plain(folder / rel)
        except RecordError:
            out[rel] = None
    return out


def against_accepted(folders, base=None):
    """{folder name: [findings]} of a pull request's submission folders against the base branch's accepted ones
    (`base`, default REPO's results/community): an accepted submission is neither removed nor changed by a pull
    request (a maintainer's commit to the base branch does that), and a new submission holds no ok cell whose samples
    are another submission's to the last digit (a replay under a new name)."""
    base = Path(base or REPO / ALLOWED_SIGNERS.parent)
    accepted_before = {f.name: f for f in submissions(base) if not f.is_symlink()}
    mine = {f.name: f for f in folders}
    found = {name: [] for name in mine}
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
    seen = {}
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
                record = records.read(path)
            except RecordError:
                continue
            values = samples(record) if record["status"] == "ok" else []
            if len(values) < 2:
                continue
            key, where = json.dumps(values), f"{name}/cells/{path.name}"
            if key in seen and seen[key].split("/")[0] != name and name in mine and name not in accepted_before:
                found[name].append(
                    f"{where}: its samples are those of {seen[key]}, to the last digit: a submission "
                    "replayed under another name"
                )
            seen.setdefault(key, where)
    return found


def check_main(folders, ancestor_of=None, community=None):
    folders = [Path(f) for f in folders] or submissions(community)
    print(f"What this check proves: {PROOF}.")
    rejected = 0
    base = REPO / ALLOWED_SIGNERS.parent
    # a pull request's folder (--community) against the base branch's accepted submissions
    across = against_accepted(folders, base) if community and Path(community).resolve() != base.resolve() else {}
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
                + (f"signed by {who} ({ALLOWED_SIGNERS})" if who else "UNSIGNED: nothing shows who submitted it")
            )
    removed = len(set(across) - {f.name for f in folders})
    print(
        f"{len(folders)} submission(s) checked: {len(folders) + removed - rejected} accepted, {rejected} rejected"
        + (f" ({removed} accepted one(s) removed)" if removed else "")
    )
    return 1 if rejected else 0


def main(argv=None):
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
        f"(its public key listed in {ALLOWED_SIGNERS}); unsigned otherwise",
    )
    c = sub.add_parser("check", help="accept or reject submissions (exit 0 only when all are accepted)")
    c.add_argument("folders", nargs="*", type=Path, help=f"submission folders (default: every one under {COMMUNITY})")
    c.add_argument("--ancestor-of", metavar="REF", help="the submissions' commits must be on REF (e.g. origin/main)")
    c.add_argument(
        "--community",
        type=Path,
        metavar="DIR",
        help="without folders: check every submission under DIR "
        "(CI: the pull request's results/community, checked by this checkout's checker)",
    )
    args = ap.parse_args(argv)
    if args.command == "check":
        return check_main(args.folders, args.ancestor_of, args.community)
    try:
        target = submit(args.run, args.name, args.no_hosts, sign_key=args.sign)
    except SubmissionError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(f"submitted {target}: accepted by the checker; open a pull request that adds it")
    return 0


if __name__ == "__main__":
    sys.exit(main())
