"""Mutation run over the safety code: does the test suite notice when a check is removed?

    python -m bench.mutate_safety                  # every mutation below; prints KILLED/SURVIVED and the kill rate
    python -m bench.mutate_safety --only clock,slot    # those whose name contains "clock" or "slot"

Each mutation is a hand-written one-line (or few-line) edit that removes or weakens one check of
scripts/results/records.py, scripts/results/merge.py, scripts/results/submission/ or scripts/launch/workflow_trust.py:
the ones issue 31 found surviving the suite, and one per check added since. Each runs in a throw-away copy of the
working tree (a git repository of its own, so the submission tests can build their commit), with only the test files
that guard that code; a mutation is killed when they fail (or time out). Targeted, not exhaustive: a kill rate over
these says whether the checks are tested, not that the code is.
"""

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from bench import locate

ROOT = Path(__file__).resolve().parent.parent
UNTRUSTED, SUBMISSION = "tests/test_untrusted.py", "tests/test_submission.py"
ACTIONS = "tests/test_github_actions.py"
PLANS = "tests/test_trust_plans.py"  # issue 48: plans, merge's plan, plain files beside records
SCHEMA_TYPES = "tests/test_schema_types.py"


class MutationError(Exception):
    """A mutation that no longer applies (the code moved): the message names it."""


@dataclass(frozen=True)
class Mutation:
    name: str
    file: str
    edits: tuple  # ((old, new), …): each old must occur exactly once, by tokens (bench/locate.py)
    tests: tuple = (UNTRUSTED,)


M = Mutation
MUTATIONS = (
    # ---- records.py: reading untrusted records
    M(
        "confined-and-safe-names",
        "scripts/results/records.py",
        (
            ("if path == root or root not in path.parents:", "if False:"),
            ('"properties": {"framework": _id, "task"', '"properties": {"framework": {"type": "string"}, "task"'),
            ('"variant": _id,', '"variant": {"type": "string"},'),
        ),
    ),
    M(
        "clock-skew-ten-years",
        "scripts/results/records.py",
        (("CLOCK_SKEW = timedelta(minutes=10)", "CLOCK_SKEW = timedelta(days=3650)"),),
    ),
    M("finished-before-started", "scripts/results/records.py", (("    if finished < started:", "    if False:"),)),
    M(
        "size-cap",
        "shared/record.py",
        (("    if st.st_size > cap:", "    if False:"), ("    if len(data) > cap:", "    if False:")),
    ),
    M("special-files-by-lstat", "shared/record.py", (("    for test, kind in KINDS:", "    for test, kind in ():"),)),
    M("no-follow-open", "shared/record.py", (("os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK", "os.O_RDONLY"),)),
    M(
        "rfc-3339",
        "scripts/results/records.py",
        (("if not isinstance(text, str) or not RFC3339.fullmatch(text):", "if not isinstance(text, str):"),),
    ),
    M(
        "quarantine-folder-link",
        "scripts/results/records.py",
        (("    if folder.is_symlink() or (folder.exists() and not folder.is_dir()):", "    if False:"),),
    ),
    M(
        "inconsistent-nan",
        "scripts/results/records.py",
        (("isinstance(value, float) and not math.isfinite(value) or", "False or"),),
        (SUBMISSION,),
    ),
    M(
        "inconsistent-accuracy-range",
        "scripts/results/records.py",
        (("if number(value) and math.isfinite(value) and not 0 <= value <= 1:", "if False:"),),
        (SUBMISSION,),
    ),
    M(
        "inconsistent-median",
        "scripts/results/records.py",
        (("if number(timing.get(key)) and differs(timing[key], figure):", "if False:"),),
        (SUBMISSION,),
    ),
    M(
        "inconsistent-steady-batch",
        "scripts/results/records.py",
        (("elif wanted and all(differs(", "elif False and all(differs("),),
    ),
    M(
        "confined-parent",
        "scripts/results/records.py",
        (("if path == root or root not in path.parents:", "if path == root:"),),
        (PLANS,),
    ),
    M("size-cap-read-side", "shared/record.py", (("    if len(data) > cap:", "    if False:"),), (PLANS,)),
    # ---- records.py: the schema types and ranges every field a reader reads (issue 48)
    M(
        "schema-cpu-mhz-untyped",
        "scripts/results/records.py",
        (('"cpu_mhz": _number(0, MHZ),', '"cpu_mhz": {},'),),
        (SCHEMA_TYPES,),
    ),
    M(
        "schema-number-ranges",
        "scripts/results/records.py",
        (
            (
                'return {"type": ["number", "null"], "minimum": low, "maximum": high}',
                'return {"type": ["number", "null"]}',
            ),
        ),
        (SCHEMA_TYPES,),
    ),
    M(
        "schema-counts-signed",
        "scripts/results/records.py",
        (
            (
                'return {"type": ["integer", "null"], "minimum": 0, "maximum": high}',
                'return {"type": ["integer", "null"]}',
            ),
        ),
        (SCHEMA_TYPES,),
    ),
    M(
        "schema-gpu-facts-typed",
        "scripts/results/records.py",
        (('"gpu_facts": _list(GPU_FACTS, 4096),', '"gpu_facts": {"type": ["array", "null"]},'),),
        (SCHEMA_TYPES,),
    ),
    M(
        "schema-non-finite-named",
        "scripts/results/records.py",
        (("    if infinite:\n", "    if False:\n"),),
        ("tests/test_record_consistency.py",),
    ),
    M(
        "gpu-facts-required",
        "scripts/results/records.py",
        (('"required": ["gpu_facts"],', '"required": [],'),),
        (SCHEMA_TYPES,),
    ),
    M("gpu-facts-non-empty", "scripts/results/records.py", (('"minItems": 1,', ""),), (SCHEMA_TYPES,)),
    M(
        "gpu-facts-named",
        "scripts/results/records.py",
        (('"required": list(GPU_FACTS_REQUIRED),', '"required": [],'),),
        (SCHEMA_TYPES,),
    ),
    M(
        "gpu-facts-memory-positive",
        "scripts/results/records.py",
        (('"memory_mib": {"type": "integer", "minimum": 1},', '"memory_mib": {"type": "integer"},'),),
        (SCHEMA_TYPES,),
    ),
    M(
        "gpu-facts-only-when-failed",
        "scripts/results/records.py",
        (('"properties": {"status": {"const": "ok"}, "cell"', '"properties": {"status": {"const": "failed"}, "cell"'),),
        (SCHEMA_TYPES,),
    ),
    # ---- shared/peaks.py: no peak, never an error, whatever a record's facts hold
    M(
        "peaks-positive-facts",
        "shared/peaks.py",
        (("return value if math.isfinite(value) and value > 0 else None", "return value"),),
        (SCHEMA_TYPES,),
    ),
    M(
        "peaks-gpu-facts-shape",
        "shared/peaks.py",
        (
            (
                "first = facts[0] if isinstance(facts, list) and facts and isinstance(facts[0], Mapping) else {}",
                "first = (facts or [{}])[0]",
            ),
        ),
        (SCHEMA_TYPES,),
    ),
    M(
        "peaks-finite-peak",
        "shared/peaks.py",
        (("return peak if math.isfinite(peak) else None", "return peak"),),
        (SCHEMA_TYPES,),
    ),
    M(
        "peaks-shares-of-numbers",
        "shared/peaks.py",
        (
            ("got = positive(achieved)", "got = achieved"),
            ("bottom = positive(peak)", "bottom = peak"),
            ("own = positive(gemm)", "own = gemm"),
        ),
        (SCHEMA_TYPES,),
    ),
    M(  # issue 49: a CPU's peak is never below the best GEMM measured on it (no honest cell "implausible")
        "peaks-gemm-floor",
        "shared/peaks.py",
        (("if best and best > peak:", "if False:"),),
        ("tests/test_flops.py", "tests/test_report.py"),
    ),
    M(
        "report-best-gemm-of-the-class",
        "scripts/results/report.py",
        (("best[key] = max(best.get(key, 0.0), gemm)", "pass"),),
        ("tests/test_report.py",),
    ),
    # ---- merge.py: one cell per slot, the plan, the order of attempts
    M(
        "plan-run-id",
        "scripts/results/merge.py",
        (("if run_id is not None and record.run_id != run_id:", "if False:"),),
    ),
    M(
        "plan-cells",
        "scripts/results/merge.py",
        (("if cell_ids is not None and cell_id(record) not in cell_ids:", "if False:"),),
    ),
    M("one-cell-per-slot", "scripts/results/merge.py", (("        if wanted != cid:", "        if False:"),)),
    M("equal-times-tiebreak", "scripts/results/merge.py", ((", hashlib.sha256(canonical).hexdigest())", ")"),)),
    M(
        "log-plain-file",
        "scripts/results/merge.py",
        (
            (
                'records.write_replacing(copy, "", binary=records.read_plain(log, LOG_BYTES))',
                "shutil.copyfile(log, copy)",
            ),
        ),
    ),
    M(
        "host-given-attempt",
        "scripts/results/merge.py",
        (("return (attempt or 0, *records.started", "return (0, *records.started"),),
    ),
    M(
        "merge-plan-plain-file",
        "scripts/results/merge.py",
        (("    data = records.read_plain(path)", "    data = Path(path).read_bytes()"),),
        (PLANS,),
    ),
    M(
        "merge-run-plan-first",
        "scripts/results/merge.py",
        (
            (
                'chosen = plan or (run_dir / "plan.json" if os.path.lexists(run_dir / "plan.json") else None)',
                "chosen = plan",
            ),
        ),
        (PLANS,),
    ),
    M(
        "merge-plan-of-another-run",
        "scripts/results/merge.py",
        (("    if run_id is not None and named != {run_id}:", "    if False:"),),
        (PLANS,),
    ),
    M(
        "merge-run-id-alphabet",
        "scripts/results/merge.py",
        (("if run_id is not None and not safe_id(run_id):", "if False:"),),
        (PLANS,),
    ),
    M(
        "merge-skips-quarantine",
        "scripts/results/merge.py",
        (
            (
                'if file.name in SKIP or {"attempts", "quarantine"} & set(inside):',
                'if file.name in SKIP or {"attempts"} & set(inside):',
            ),
        ),
        (PLANS,),
    ),
    M(
        "merge-index-attempt",
        "scripts/results/merge.py",
        (
            (
                "if current is not None and order(current, index.get(cid)) > order(record, attempt):",
                "if current is not None and order(current, None) > order(record, attempt):",
            ),
        ),
        (PLANS,),
    ),
    M(
        "merge-bad-current-quarantined",
        "scripts/results/merge.py",
        (("        records.quarantine(run_dir, target, str(e))", "        pass"),),
        (PLANS,),
    ),
    # ---- plans: untrusted wherever read (scripts/plan/planfile.py and the launchers that read them)
    M(
        "plan-repeats-range",
        "scripts/plan/planfile.py",
        (("if number_in(plan.repeats, REPEATS, True)", "if True"),),
        (PLANS,),
    ),
    M(
        "plan-timeout-finite",
        "scripts/plan/planfile.py",
        (("if number_in(plan.timeout_s, TIMEOUT_S, False)", "if True"),),
        (PLANS,),
    ),
    M(
        "plan-image-registry",
        "scripts/plan/planfile.py",
        (
            (
                'IMAGE = re.compile(r"rosetta/[a-z0-9][a-z0-9._-]*:[A-Za-z0-9][A-Za-z0-9._-]*")',
                'IMAGE = re.compile(r"[a-z0-9][a-z0-9._/-]*:[A-Za-z0-9][A-Za-z0-9._-]*")',
            ),
        ),
        (PLANS,),
    ),
    M(
        "plan-against-matrix-values",
        "scripts/plan/planfile.py",
        (("        if getattr(plan, key) != getattr(derived, key):", "        if False:"),),
        (PLANS,),
    ),
    M(
        "plan-against-matrix-cells",
        "scripts/plan/planfile.py",
        (("        if planned != wanted:", "        if False:"),),
        (PLANS,),
    ),
    M(
        "cell-needs-code-hash",
        "scripts/cell.py",
        (("        if expected is None:", "        if False:"),),
        (PLANS,),
    ),
    M(
        "cell-plan-against-matrix",
        "scripts/cell.py",
        (("plans.check_against(plans.read(args.plan), load(args.matrix), str(args.plan))", "plans.read(args.plan)"),),
        (PLANS,),
    ),
    M(
        "slurm-plan-against-matrix",
        "scripts/launch/slurm.py",
        (("plans.check_against(plans.read(args.plan), load(), str(args.plan))", "plans.read(args.plan)"),),
        (PLANS,),
    ),
    M(
        "k8s-plan-against-matrix",
        "scripts/launch/k8s.py",
        (("plans.check_against(plans.read(args.plan), load(), str(args.plan))", "plans.read(args.plan)"),),
        (PLANS,),
    ),
    M(
        "slurm-resolve-before-check",
        "scripts/launch/slurm.py",
        (
            (
                "plan_path, run_dir = Path(plan_path).resolve(), Path(run_dir).resolve()\ncheck_sbatch(extra, run_dir)",
                "check_sbatch(extra, run_dir)\nplan_path, run_dir = Path(plan_path).resolve(), Path(run_dir).resolve()",
            ),
        ),
        (PLANS,),
    ),
    M(
        "reference-plain-copy",
        "scripts/results/reference.py",
        (
            (
                '            raise ValueError(f"{run_dir / name}: {why}; a reference copies plain files only")',
                "            pass",
            ),
            ("        data = verify.records.read_plain(source)", "        data = Path(source).read_bytes()"),
        ),
        (PLANS,),
    ),
    M(
        "theano-cache-per-cell",
        "scripts/launch/executors.py",
        (('            **cache_env(cache, os.environ.get("THEANO_FLAGS", "")),', ""),),
        (PLANS,),
    ),
    # ---- submission/: what a submission proves
    M(
        "non-positive-time",
        "scripts/results/submission/checks.py",
        (("or not math.isfinite(value) or value <= 0:", "or not math.isfinite(value):"),),
        (SUBMISSION,),
    ),
    M(
        "non-positive-sample",
        "scripts/results/records.py",
        (("if any(number(v) and v <= 0 for v in kept):", "if False:"),),
        (SUBMISSION,),
    ),
    M(
        "record-run-id",
        "scripts/results/submission/checks.py",
        (("if record.run_id != plan_file.run_id:", "if False:"),),
        (SUBMISSION,),
    ),
    M(
        "record-commit",
        "scripts/results/submission/checks.py",
        (("if ran is not None and not commit.startswith(ran):", "if False:"),),
        (SUBMISSION,),
    ),
    M(
        "hosts-left",
        "scripts/results/submission/checks.py",
        (("if r.host not in (None, HOST_PLACEHOLDER)]", "if False]"),),
        (SUBMISSION,),
    ),
    M(
        "digests",
        "scripts/results/submission/checks.py",
        (("elif digest(path) != expected:", "elif False:"),),
        (SUBMISSION,),
    ),
    M(
        "plan-added-cells",
        "scripts/results/submission/derived.py",
        (("for i in sorted(set(cells) - set(wanted))]", "for i in []]"),),
        (SUBMISSION,),
    ),
    M(
        "plan-removed-cells",
        "scripts/results/submission/derived.py",
        (
            (
                '"(removed: a submission is the whole profile)" for i in sorted(set(wanted) - set(cells))]',
                '"(removed: a submission is the whole profile)" for i in []]',
            ),
        ),
        (SUBMISSION,),
    ),
    M(
        "plan-whole-compared",
        "scripts/results/submission/derived.py",
        (("        if doc.get(key) != derived.get(key)", "        if False"),),
        (PLANS,),
    ),
    M(
        "copied-samples",
        "scripts/results/submission/checks.py",
        (("        if other is not None:", "        if False:"),),
        (SUBMISSION,),
    ),
    M(
        "calibration-floor",
        "scripts/results/submission/derived.py",
        (('if best and best["share"] < CALIBRATION_FLOOR:', "if False:"),),
        (SUBMISSION,),
    ),
    M(
        "one-cpu-class",
        "scripts/results/submission/checks.py",
        (("    if len(cpu_classes) > 1:", "    if False:"),),
        (SUBMISSION,),
    ),
    # a red-team pass (2026-12-06): what a hostile submission did to the checker before these checks
    M(
        "commit-on-head",
        "scripts/results/submission/verdict.py",
        (('    ancestor_of = ancestor_of or "HEAD"', "    ancestor_of = ancestor_of"),),
        (SUBMISSION,),
    ),
    M(
        "digests-link-followed",
        "scripts/results/submission/checks.py",
        (
            (
                "lines = records.read_plain(folder / DIGESTS).decode().splitlines()",
                "lines = (folder / DIGESTS).read_text().splitlines()",
            ),
        ),
        (SUBMISSION,),
    ),
    M(
        "signed-digests-read-raw",
        "scripts/results/submission/signing.py",
        (("data = records.read_plain(Path(folder) / DIGESTS)", "data = (Path(folder) / DIGESTS).read_bytes()"),),
        (SUBMISSION,),
    ),
    M(
        "submission-folder-link",
        "scripts/results/submission/verdict.py",
        (("    if folder.is_symlink() or not folder.is_dir():", "    if not folder.is_dir():"),),
        (SUBMISSION,),
    ),
    M(
        "names-printed-raw",
        "scripts/results/submission/spec.py",
        (('return "".join(c if c.isprintable() else repr(c)[1:-1] for c in str(text))', "return str(text)"),),
        (SUBMISSION,),
    ),
    M(
        "inputs-not-required",
        "scripts/results/submission/checks.py",
        (("return found + lacking(rel, record)", "return found"),),
        (SUBMISSION,),
    ),
    M(
        "accepted-removed",
        "scripts/results/submission/verdict.py",
        (("        if now is None:", "        if False:"),),
        (SUBMISSION,),
    ),
    M(
        "accepted-edited",
        "scripts/results/submission/verdict.py",
        (("            if changed:", "            if False:"),),
        (SUBMISSION,),
    ),
    M(
        "replayed-under-a-new-name",
        "scripts/results/submission/verdict.py",
        (
            (
                "if other is not None and name in mine and name not in accepted_before:",
                "if False:",
            ),
        ),
        (SUBMISSION,),
    ),
    M(
        "flops-per-sample-unchecked",
        "scripts/results/submission/derived.py",
        (("if records.differs(per_sample, model):", "if False:"),),
        (SUBMISSION,),
    ),
    M(
        "train-minutes-unchecked",
        "scripts/results/records.py",
        (("if number(minutes) and number(train) and differs(minutes * 60, train):", "if False:"),),
        (SUBMISSION,),
    ),
    M(
        "physical-ceiling",
        "scripts/results/submission/derived.py",
        (("if ceiling and isinstance(rate, (int, float)) and rate > ceiling:", "if False:"),),
        (SUBMISSION,),
    ),
    M(
        "machine-class-rederived",
        "scripts/results/records.py",
        (("if derived != claimed:", "if False:"),),
        (SUBMISSION,),
    ),
    M(
        "signature-verify",
        "scripts/results/submission/signing.py",
        (('code, out = ssh_keygen(["-Y", "verify",', 'code, out = 0, "" or ssh_keygen(["-Y", "verify",'),),
        (SUBMISSION,),
    ),
    # round three (issue 48): a pull request read from git objects, replays by value, the links left untested
    M(
        "pr-only-adds",
        "scripts/results/submission/pr.py",
        (('if change.status != "A" or len(parts) < 4 or "/".join(parts[:2]) != community:', "if False:"),),
        (SUBMISSION,),
    ),
    M(
        "pr-plain-files",
        "scripts/results/submission/pr.py",
        (("if change.new_mode != PLAIN:", "if False:"),),
        (SUBMISSION,),
    ),
    M(
        "pr-one-folder",
        "scripts/results/submission/pr.py",
        (("    if len(folders) > 1:", "    if False:"),),
        (SUBMISSION,),
    ),
    M("pr-safe-name", "scripts/results/submission/pr.py", (("if not safe_id(name):", "if False:"),), (SUBMISSION,)),
    M(
        "pr-new-folder",
        "scripts/results/submission/pr.py",
        (('elif git(["cat-file", "-e", f"{base}:{community}/{name}"], repo)[0] == 0:', "elif False:"),),
        (SUBMISSION,),
    ),
    M(
        "pr-folder-checked",
        "scripts/results/submission/cli.py",
        (
            (
                "return report([folder], base, {n: lines for n, lines in across.items() if lines or n == name})",
                "return 0",
            ),
        ),
        (SUBMISSION,),
    ),
    M(
        "replay-by-value",
        "scripts/results/submission/checks.py",
        (("abs(x - y) <= REPLAY_TOLERANCE * max(abs(x), abs(y))", "x == y"),),
        (SUBMISSION,),
    ),
    M(
        "replay-across-by-value",
        "scripts/results/submission/verdict.py",
        (("same_shape(shape, theirs)", "shape == theirs"),),
        (SUBMISSION,),
    ),
    M(
        "signature-link",
        "scripts/results/submission/signing.py",
        (("if sig.is_symlink() or not sig.is_file():", "if not sig.is_file():"),),
        (SUBMISSION,),
    ),
    M(
        "accepted-linked",
        "scripts/results/submission/verdict.py",
        (("elif now.is_symlink():", "elif False:"),),
        (SUBMISSION,),
    ),
    M(
        "community-removed-reported",
        "scripts/results/submission/cli.py",
        (("for name in sorted(set(across) - {f.name for f in folders}):", "for name in []:"),),
        (SUBMISSION,),
    ),
    M(
        "community-across-joined",
        "scripts/results/submission/cli.py",
        (
            (
                "found = findings(folder, ancestor_of=ancestor_of) + across.get(folder.name, [])",
                "found = findings(folder, ancestor_of=ancestor_of)",
            ),
        ),
        (SUBMISSION,),
    ),
    M(
        "hosted-labels-exact",
        "scripts/launch/workflow_trust.py",
        (
            (
                "or label not in HOSTED for label in labels",
                'or not re.fullmatch(r"(ubuntu|windows|macos)-[\\w.-]+", label) for label in labels',
            ),
        ),
        (ACTIONS,),
    ),
    M(
        "unknown-triggers",
        "scripts/launch/workflow_trust.py",
        (("        if unknown:", "        if False:"),),
        (ACTIONS,),
    ),
    M(
        "reproduce-within-tolerance",
        "scripts/reproduce.py",
        (("within = ratio is None or limit is None or 1 / limit <= ratio <= limit", "within = True"),),
        (SUBMISSION,),
    ),
)


def snapshot(into):
    """The working tree as it is (tracked and untracked, not ignored files) copied into `into`, committed there."""
    out = (
        subprocess.run(
            ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
            cwd=ROOT,
            check=True,
            capture_output=True,
        )
        .stdout.decode()
        .split("\0")
    )
    for rel in filter(None, out):
        source = ROOT / rel
        if source.is_file() and not source.is_symlink():
            (into / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, into / rel)
    ident = ["-c", "user.name=mutation", "-c", "user.email=mutation@rosetta.invalid", "-c", "commit.gpgsign=false"]
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "snapshot"]):
        subprocess.run(["git", *ident, *args], cwd=into, check=True, capture_output=True)


def apply(tree, mutation):
    path = tree / mutation.file
    text = path.read_text()
    for old, new in mutation.edits:
        try:
            text = locate.apply(text, old, new)
        except ValueError as e:
            raise MutationError(f"{mutation.name}: {e} in {mutation.file}") from e
    path.write_text(text)


def run_one(mutation, base, timeout):
    """'killed' or 'survived' (and seconds): the mutation applied to a copy of `base`, its tests run there."""
    with tempfile.TemporaryDirectory(prefix=f"mutant-{mutation.name}-") as tmp:
        tree = Path(tmp) / "tree"
        shutil.copytree(base, tree, symlinks=True)
        apply(tree, mutation)
        started = time.time()
        env = {**os.environ, "HYPOTHESIS_EXAMPLES": "5", "PYTHONDONTWRITEBYTECODE": "1"}
        try:
            done = subprocess.run(
                [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", *mutation.tests],
                cwd=tree,
                capture_output=True,
                text=True,
                timeout=timeout,
                env=env,
            )
            killed = done.returncode != 0
        except subprocess.TimeoutExpired:
            killed = True
        return ("killed" if killed else "survived"), time.time() - started


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m bench.mutate_safety", description=__doc__.split("\n")[0])
    ap.add_argument("--only", default="", help="run the mutations whose name contains this (comma: any of these)")
    ap.add_argument("--timeout", type=float, default=600, help="seconds per mutation before it counts as killed")
    args = ap.parse_args(argv)
    wanted = args.only.split(",")
    chosen = [m for m in MUTATIONS if any(w in m.name for w in wanted)]
    with tempfile.TemporaryDirectory(prefix="mutation-base-") as tmp:
        base = Path(tmp) / "base"
        base.mkdir()
        snapshot(base)
        for m in chosen:  # every edit still applies, before any test runs
            apply_check = (base / m.file).read_text()
            missing = [old for old, _ in m.edits if locate.count(apply_check, old) != 1]
            if missing:
                print(
                    f"error: {m.name}: {missing[0]!r} is not once in {m.file}; update bench/mutate_safety.py",
                    file=sys.stderr,
                )
                return 2
        for tests in sorted({m.tests for m in chosen}):  # unmutated, they pass: a kill is the mutation's doing
            outcome, seconds = run_one(Mutation("baseline", chosen[0].file, (), tests), base, args.timeout)
            if outcome != "survived":
                print(f"error: {' '.join(tests)} fail without any mutation; fix them first", file=sys.stderr)
                return 2
            print(f"baseline {' '.join(tests)} passes ({seconds:.0f} s)", flush=True)
        killed = 0
        for m in chosen:
            outcome, seconds = run_one(m, base, args.timeout)
            killed += outcome == "killed"
            print(f"{outcome.upper():8} {m.name:30} {m.file:24} ({seconds:.0f} s)", flush=True)
    print(f"kill rate: {killed}/{len(chosen)} = {killed / len(chosen):.0%}" if chosen else "no mutation chosen")
    return 0


if __name__ == "__main__":
    sys.exit(main())
