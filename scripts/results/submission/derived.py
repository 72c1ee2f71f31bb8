"""The checks that hold without trusting the submitter: the plan is the one the stated commit's own code makes of
the profile, each record's parameters and FLOPs are the task's, and no rate passes what the stated hardware can do."""

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from scripts.plan import planfile as plans
from scripts.results import records
from scripts.results.records import Record
from scripts.results.submission.code import derived_at
from scripts.results.submission.spec import PLAN, Records, SubmissionError
from shared import flops, params
from shared.calibration import cpu_ceiling
from shared.record import RecordError

GPU_FLOP_PER_SM_CYCLE = 8192  # above any dense tensor-core rate per SM and clock (H100 bf16 ≈ 4,100; B200 ≈ 7,700)
CALIBRATION_FLOOR = 0.03  # the run's best CPU GEMM is at least this share of the stated CPU's ceiling


def physical_ceiling(record: Record | Mapping[str, Any]) -> float | None:
    """An upper bound on the FLOP/s of the hardware a record states, or None where it states too little: CPU cores ×
    5 GHz × the widest FMA (shared.calibration.cpu_ceiling); GPU SMs × their top clock × GPU_FLOP_PER_SM_CYCLE.
    The schema makes every gpu_facts entry an object."""
    record = Record.of(record)
    system = record.system
    if record.cell.device == "cpu":
        return cpu_ceiling(system) if system.get("cpu_usable") or system.get("cpu_count") else None
    sms, facts = system.get("gpu_sm_counts") or [], system.get("gpu_facts") or []
    clocks: list[Any] = [f.get("max_sm_clock_mhz") for f in facts]
    if not sms or not clocks or not all(isinstance(v, (int, float)) and v > 0 for v in [*sms, *clocks]):
        return None
    return sum(sms) * max(clocks) * 1e6 * GPU_FLOP_PER_SM_CYCLE


def check_consistency(
    rel: str, record: Record | Mapping[str, Any], params_hashes: dict[str, str] | None = None
) -> list[str]:
    """The record agrees with itself (records.inconsistencies, of the record as written: its machine class the one
    its own facts give among the rest), its task parameters are the commit's, and no rate passes the physical
    ceiling of the hardware it states."""
    record = Record.of(record)
    found = [f"{rel}: {line}" for line in records.inconsistencies(record.data)]
    task, scale, stated = record.cell.task, record.cell.scale, record.params_hash
    wanted = params_hashes.get(f"{task}:{scale}") if params_hashes else None
    if wanted and stated and stated != wanted:
        found.append(
            f"{rel}: system.params_hash {stated} is not the {task} task's parameters "
            f"at {scale} scale at the submission's commit ({wanted})"
        )
    per_sample = record.metrics.get("model_flops_per_sample")
    if isinstance(per_sample, (int, float)) and scale in params.SCALES and stated == params.params_hash(task, scale):
        model = flops.per_sample(task, params.task_params(task, scale))
        if records.differs(per_sample, model):  # what achieved_flops and the ceiling are reckoned from
            found.append(
                f"{rel}: metrics.model_flops_per_sample {per_sample:.6g} is not the task's ({model:.6g} "
                "FLOPs a sample, shared/flops.py)"
            )
    ceiling = physical_ceiling(record)
    if ceiling is None and record.status == "ok":
        found.append(
            f"{rel}: states too little of its hardware to bound its rates (CPU cores; GPU SM counts and clocks)"
        )
    calibration = record.facts("calibration")
    rates = {
        "metrics.achieved_flops": record.metrics.get("achieved_flops"),
        **{f"system.calibration.{k}": calibration.get(k) for k in ("gemm_fp32_flops", "gemm_reduced_flops")},
    }
    for where, rate in rates.items():
        if ceiling and isinstance(rate, (int, float)) and rate > ceiling:
            found.append(
                f"{rel}: {where} {rate / 1e9:.4g} GFLOP/s is above what the stated hardware can do "
                f"({ceiling / 1e9:.4g} GFLOP/s at most)"
            )
    return found


def check_calibration(recs: Records) -> list[str]:
    """The CPU the records state is the one that calibrated: the run's best CPU GEMM is at least CALIBRATION_FLOOR of
    that CPU's ceiling (two cores written over as 56 leave the rate of two). The best, not each: one cell's GEMM may
    fall far in a transient of a loaded machine; one record's cores written over alone is another machine class
    (check_machine)."""
    best: dict[str, Any] = {}
    for rel, record in recs.items():
        rate = record.facts("calibration").get("gemm_fp32_flops")
        if record.cell.device == "cpu" and isinstance(rate, (int, float)) and rate > 0:
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


def check_plan(folder: Path, manifest: dict[str, Any], repo: Path | str) -> tuple[list[str], dict[str, str] | None]:
    """plan.json is what the profile expands to at the stated commit, whole: no cell added, removed or changed, and
    every other value (repeats, timeout_s, executor, …) the commit's own. Returns
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
    # the whole plan, not only its cells: repeats, timeout, executor, schema, any key the commit's code does not write
    found += [
        f"{PLAN}: {key} {doc.get(key)!r} is not profile {profile}'s plan's at commit {manifest['git_commit'][:12]} "
        f"({derived.get(key)!r})"
        for key in sorted((set(doc) | set(derived)) - {"cells"})
        if doc.get(key) != derived.get(key)
    ]
    return found, hashes
