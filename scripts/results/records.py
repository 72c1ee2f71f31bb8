"""Records are untrusted input wherever the host side reads them (docs/design.md, "Result record").

A record arrives from a runner in a container, a cell job on another host, an artifact download: any of its fields may
be wrong, hostile or truncated. `read` checks a record file against SCHEMA (jsonschema), its ids against a safe alphabet
(so a cell id or host name can become a file name and never a path), its times as ISO 8601 and not in the future;
`inconsistencies` refuses a record whose published figures do not follow from its own samples (and any NaN or infinity,
any accuracy or AUC outside [0, 1]); `confined` builds a path from record fields only under a given folder; `quarantine`
puts a file that fails aside with its reason, so one bad record never stops a merge or a report.
"""

import hashlib
import json
import math
import os
import re
import statistics
import sys
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import MappingProxyType
from typing import Any, TypeGuard

try:
    import jsonschema
except ImportError:  # a bare GPU machine's Python (make gpu-check) may lack it: see OWN_RECORDS_ONLY
    jsonschema = None

from scripts.paths import SAFE_ID
from scripts.plan.matrix import Cell  # a record's cell: the axes its id is made of (shared.record.CELL_KEYS)
from shared import params, sysinfo, timing
from shared.record import (
    CELL_KEYS,
    MAX_BYTES,  # noqa: F401  (re-exported: the size cap, as tests/test_untrusted.py names it)
    OPTIONAL_CELL_KEYS,
    READABLE,
    STATUSES,
    RecordError,
    not_plain,
    read_plain,
)
from shared.timing import warm_windows


def write_replacing(path: str | os.PathLike, text: str, binary: bytes | None = None) -> None:
    """Write through a temporary file the writer made and a rename: a link planted at `path` is replaced, never
    followed (shared.record.write_atomic, the runners', writes text the same way; this one also takes bytes)."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(binary if binary is not None else text.encode())
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


# File names and shell words as they are: no '/', no '..', no space, no newline. \Z, not $: jsonschema matches with
# Python's re.search, where $ also matches before a final newline ("run\n" would pass).
CLOCK_SKEW = timedelta(minutes=10)  # how far in the future a host's clock may run before it is a lie

_id = {"type": "string", "pattern": SAFE_ID}
_text = {"type": ["string", "null"], "maxLength": 200_000}
_short = {"type": ["string", "null"], "maxLength": 200}
_path = {"type": ["string", "null"], "maxLength": 4096}  # an interpreter's path, a linker's flags
# Sane ranges, so that a figure a reader computes with is a number of the size it can be: JSON Schema's minimum and
# maximum also refuse infinity (NaN, which compares false both ways, is refused by `contradictions`).
SECONDS = 1e9  # about 31 years: longer than any cell, any epoch, any warm-up
RATE = 1e15  # samples per second
FLOPS = 1e30  # FLOP/s, FLOPs per sample, a calibration's bytes per second
SIGNED = 1e15  # a loss, a feature mean: any sign, never astronomic
COUNT = 2**53  # the largest integer a float holds exactly
MHZ = 1e6


def _number(low: float, high: float) -> dict:
    """A number within [low, high], or null."""
    return {"type": ["number", "null"], "minimum": low, "maximum": high}


def _count(high: float = COUNT) -> dict:
    """A whole number within [0, high], or null."""
    return {"type": ["integer", "null"], "minimum": 0, "maximum": high}


def _list(items: dict, most: int) -> dict:
    """A list of at most `most` items of `items`, or null."""
    return {"type": ["array", "null"], "items": items, "maxItems": most}


_strings = _list({"type": "string", "maxLength": 200}, 4096)
_text_map = {  # an object of short strings (an environment, a package's version per name)
    "type": ["object", "null"],
    "additionalProperties": {"type": ["string", "null"], "maxLength": 2000},
    "maxProperties": 1000,
}
# Each metric by its kind: a time, a share, a rate, a signed figure, a count (the figures a reader computes with)
SECONDS_METRICS = (
    "train_seconds",
    "steady_state_seconds",
    "seconds_per_1000_images",
    "warmup_seconds",
    "train_minutes",
    "compile_seconds",
    "input_wait_seconds",
)
SHARE_METRICS = ("input_wait_fraction",)
QUALITY_METRICS = ("accuracy", "auc")  # within [0, 1] too, which `contradictions` refuses in its own words
RATE_METRICS = ("samples_per_second", "steady_samples_per_second")
FLOPS_METRICS = ("achieved_flops", "peak_flops", "model_flops_per_sample")
EFFICIENCY_METRICS = ("efficiency", "efficiency_of_gemm")  # a share of a peak; an older record's may pass 1
SIGNED_METRICS = ("final_loss", "feature_mean")
NUMBER_METRICS = (
    SECONDS_METRICS
    + SHARE_METRICS
    + QUALITY_METRICS
    + RATE_METRICS
    + FLOPS_METRICS
    + EFFICIENCY_METRICS
    + SIGNED_METRICS
)
INTEGER_METRICS = (
    "auc_classes",
    "batch_size",
    "crop_size",
    "devices",
    "epochs",
    "global_batch",
    "image_size",
    "images",
    "loader_workers",
    "parameters",
    "test_samples",
    "train_samples",
)
VERSIONS = (  # what a runner reports of its software, each a short string or null
    "framework_version",
    "python",
    "cuda",
    "driver",
    "os",
    "executor",
    "image",
    "gpu_ids",
    "backend",
    "backend_version",
    "cuda_build",
    "cudnn_build",
    "cupy_version",
    "cxx",
    "flax_version",
    "jaxlib_version",
    "julia_version",
    "keras_version",
    "knet_version",
    "numpy_version",
    "optax_version",
    "pygpu_version",
    "r_version",
    "reticulate_version",
    "theano_version",
    "blas",
    "cntk_device",
    "theano_device",
    "mkl_debug_cpu_type",
)
# The facts an ok GPU record must carry of its GPUs (shared.sysinfo.gpu_facts, from nvidia-smi): its machine class is
# derived from the name and memory (shared.sysinfo.machine_class), its peak from the name (shared.peaks)
GPU_FACTS_REQUIRED = ("name", "memory_mib", "driver")
GPU_FACTS = {
    "type": "object",
    "properties": {
        "name": _short,
        "memory_mib": _count(2**40),
        "max_sm_clock_mhz": _count(MHZ),
        "max_memory_clock_mhz": _count(MHZ),
        "compute_capability": _short,
        "driver": _short,
    },
}
SCHEMA = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "rosetta result record",
    "type": "object",
    "additionalProperties": False,
    "required": ["schema", "run_id", "cell", "status", "started_at", "finished_at"],
    "properties": {
        "schema": {"enum": list(READABLE)},
        "run_id": {"type": ["string", "null"], "pattern": SAFE_ID},
        "cell": {
            "type": "object",
            "additionalProperties": False,
            "required": [k for k in CELL_KEYS if k not in OPTIONAL_CELL_KEYS],
            "properties": {
                "framework": _id,
                "task": {"enum": list(params.TASKS)},
                "variant": _id,
                "precision": {"enum": ["fp32", "tf32", "amp", "bf16"]},
                "gpus": {"type": "integer", "minimum": 1, "maximum": 4096},
                "device": {"enum": ["cpu", "gpu"]},
                "data": {"enum": ["synthetic", "real"]},
                "scale": {"enum": ["full", "demo", "tiny"]},
                "tuning": {"enum": list(params.TUNINGS)},
            },
        },
        "status": {"enum": list(STATUSES)},
        "reason": _text,
        "log_tail": _text,
        # Typed, with a sane range, wherever a reader reads a field (report, site, verify, submission, shared/peaks.py,
        # gpu_check) and wherever a runner writes one (shared/sysinfo.py, shared/timing.py): a runner may add keys,
        # but a known key of the wrong type or out of range ("fast" for cpu_mhz, a negative count) is refused.
        "metrics": {
            "type": "object",
            "properties": {
                **{key: _number(0, SECONDS) for key in SECONDS_METRICS},
                **{key: _number(0, 1) for key in SHARE_METRICS},
                **{key: _number(-SIGNED, SIGNED) for key in QUALITY_METRICS},
                **{key: _number(0, RATE) for key in RATE_METRICS},
                **{key: _number(0, FLOPS) for key in FLOPS_METRICS},
                **{key: _number(0, 1e6) for key in EFFICIENCY_METRICS},
                **{key: _number(-SIGNED, SIGNED) for key in SIGNED_METRICS},
                **{key: _count() for key in INTEGER_METRICS},
                **{key: _short for key in ("data_placement", "input_pipeline", "weights", "init", "peak_source")},
                "epoch_seconds": _list({"type": "number", "minimum": 0, "maximum": SECONDS}, 100_000),
                "differences": _list({"type": "string", "maxLength": 2000}, 1000),
                "implausible": _list({"type": "string", "maxLength": 2000}, 100),
                "loss_curve": _list({"type": "number", "minimum": -SIGNED, "maximum": SIGNED}, 10_000),
            },
        },
        "timing": {
            "type": "object",
            "properties": {
                **{key: _number(0, SECONDS) for key in ("min", "median", "max", "q1", "q3", "warmup")},
                "spread": _number(0, 1e6),  # IQR / median
                # a sample of 0 s or less is `contradictions`' to refuse, with its own words
                **{key: _list({"type": "number", "maximum": SECONDS}, 100_000) for key in ("values", "warmup_windows")},
                "unit": _short,
                "repeats": _count(),
                "window_steps": _count(),
                "unstable": {"type": ["boolean", "null"]},
                "warm": {"type": ["boolean", "null"]},
                "barrier_audit": {  # shared.timing.barrier_audit
                    "type": ["object", "null"],
                    "properties": {
                        "checks": _count(),
                        "leaks": _count(),
                        "max_after_seconds": _number(0, SECONDS),
                        "median_after_seconds": _number(0, SECONDS),
                    },
                },
                # the cores' distance at each window edge (shared/placement.py): None where the probe could not answer
                "round_trips_ns": {
                    "type": ["array", "null"],
                    "items": {"type": ["number", "null"], "exclusiveMinimum": 0, "maximum": SECONDS * 1e9},
                    "maxItems": 100_001,
                },
            },
        },
        "system": {
            "type": "object",
            "properties": {
                "host": {"type": ["string", "null"], "pattern": SAFE_ID},
                "cpu": {"type": ["string", "null"], "maxLength": 1000},
                # shared.sysinfo.cpu_facts: the generation as /proc/cpuinfo says it (text; a number where a runner
                # wrote one), the clocks in MHz, the cores (usable: a cgroup's quota may be a fraction)
                **{
                    key: {"type": ["string", "integer", "null"], "maxLength": 100, "minimum": 0, "maximum": COUNT}
                    for key in ("cpu_vendor", "cpu_family", "cpu_model_number", "cpu_stepping")
                },
                "cpu_mhz": _number(0, MHZ),
                "cpu_max_mhz": _number(0, MHZ),
                "cpu_count": _count(10**6),
                "cpu_physical_cores": _count(10**6),
                "cpu_usable": _number(0, 10**6),
                "cpu_flags": _list({"type": "string", "maxLength": 100}, 1000),
                # what verify and the report's ‡ compare by: shared.sysinfo.machine_class's alphabet, params_hash's hex
                "machine_class": {"type": ["string", "null"], "pattern": "^[a-z0-9?][a-z0-9?:._-]{0,199}\\Z"},
                "params_hash": {"type": ["string", "null"], "pattern": "^[0-9a-f]{12}\\Z"},
                "code_hash": {"type": ["string", "null"], "pattern": "^[0-9a-f]{16}\\Z"},
                "gpus": _strings,
                "gpu_sm_counts": _list({"type": "integer", "minimum": 0, "maximum": 10**6}, 4096),
                "gpu_facts": _list(GPU_FACTS, 4096),
                "devices": _strings,
                "memory_gib": _number(0, 1e9),
                "cudnn": {"type": ["string", "integer", "null"], "maxLength": 200, "minimum": 0, "maximum": COUNT},
                **{key: _short for key in VERSIONS},
                **{key: _path for key in ("interpreter", "compiledir", "blas_ldflags")},
                "mkldnn": {"type": ["boolean", "null"]},
                "switches": {"type": ["object", "null"], "maxProperties": 1000},
                "build": {  # shared/buildinfo.py: what the environment carries
                    "type": ["object", "null"],
                    "properties": {
                        **{key: _strings for key in ("cuda", "cudnn", "nccl", "gpu_archs", "ptx")},
                        "frameworks": _text_map,
                        "kernels": {"type": ["object", "null"], "maxProperties": 1000},
                        "min_driver": _short,
                    },
                },
                "threads": {  # shared/threads.py: the thread counts the rule gave and who set them
                    "type": ["object", "null"],
                    "properties": {
                        "affinity": _list({"type": "integer", "minimum": 0, "maximum": 10**6}, 10**6),
                        "env": _text_map,
                        "set_by": _text_map,
                        "inter_op": _count(10**6),
                        "intra_op": _count(10**6),
                        "usable_cpus": _count(10**6),
                    },
                },
                "placement": {
                    "type": ["object", "null"],
                    "properties": {  # shared/placement.py
                        "before_ns": _number(0, SECONDS * 1e9),
                        "after_ns": _number(0, SECONDS * 1e9),
                        "cpus": _list({"type": "integer", "minimum": 0, "maximum": 10**6}, 2),
                    },
                },
                "calibration": {
                    "type": ["object", "null"],
                    "properties": {
                        **{key: _number(0, FLOPS) for key in ("gemm_fp32_flops", "gemm_reduced_flops")},
                        "host_copy_bytes_per_s": _number(0, FLOPS),
                        "gemm_n": _count(10**6),
                        "note": _text,
                        "reduced_dtype": _short,
                    },
                },
            },
        },
        "started_at": {"type": "string", "maxLength": 40},
        "finished_at": {"type": "string", "maxLength": 40},
        "git_commit": {"type": ["string", "null"], "pattern": "^[0-9a-f]{4,40}\\Z"},
    },
    # An ok record of a GPU cell carries its GPUs' facts: what its machine class and its peak are derived from
    "allOf": [
        {
            "if": {
                "required": ["status", "cell"],
                "properties": {"status": {"const": "ok"}, "cell": {"properties": {"device": {"const": "gpu"}}}},
            },
            "then": {
                "required": ["system"],
                "properties": {
                    "system": {
                        "required": ["gpu_facts"],
                        "properties": {
                            "gpu_facts": {
                                "type": "array",
                                "minItems": 1,
                                "items": {
                                    "required": list(GPU_FACTS_REQUIRED),
                                    "properties": {
                                        "name": {"type": "string", "minLength": 1},
                                        "memory_mib": {"type": "integer", "minimum": 1},
                                        "driver": {"type": "string", "minLength": 1},
                                    },
                                },
                            }
                        },
                    }
                },
            },
        }
    ],
}
VALIDATOR = jsonschema.Draft202012Validator(SCHEMA) if jsonschema else None
# Without jsonschema no record can be checked, so none is read, unless the one process that may read records without it
# says so: make gpu-check on a bare GPU machine, which reads only what its own runners wrote in its own run, and says in
# gpu-check.json that they were not schema-checked there (they are when copied: scripts.results.reference, merge).
OWN_RECORDS_ONLY = False


# RFC 3339's date-time (its profile of ISO 8601): 'T' (or a space, as RFC 3339 allows) between date and time, and
# an offset. Python's fromisoformat alone takes any one character there ('2026-12-04/09:00:00'), and that text
# becomes part of file names (scripts/results/merge.py: attempt_name).
RFC3339 = re.compile(r"\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d{1,6})?([Zz]|[+-]\d{2}:\d{2})")


def moment(text: Any, where: str) -> datetime:
    """An RFC 3339 time as an aware datetime (a record's times are compared as times, never as strings)."""
    if not isinstance(text, str) or not RFC3339.fullmatch(text):
        raise RecordError(
            f"{where}: {text!r} is not an ISO 8601 time of RFC 3339's form (YYYY-MM-DDTHH:MM:SS[.frac] and Z or ±HH:MM)"
        )
    try:
        when = datetime.fromisoformat(text.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise RecordError(f"{where}: {text!r} is not an ISO 8601 time") from None
    return when if when.tzinfo else when.replace(tzinfo=UTC)


CONSISTENT = 1e-6  # relative: a published figure and the same figure recomputed from the record's samples


def non_finite(value: Any, path: str = "") -> list[str]:
    """The paths of every NaN or infinity in a JSON value, and of every integer beyond a float's range (JSON allows
    10**400; no arithmetic on it does): a record's numbers must all be numbers."""
    if (
        isinstance(value, float)
        and not math.isfinite(value)
        or isinstance(value, int)
        and not isinstance(value, bool)
        and abs(value) > sys.float_info.max
    ):
        return [path or "(the record)"]
    if isinstance(value, dict):
        return [p for key, v in value.items() for p in non_finite(v, f"{path}/{key}" if path else str(key))]
    if isinstance(value, list):
        return [p for i, v in enumerate(value) for p in non_finite(v, f"{path}/{i}")]
    return []


def differs(published: float, recomputed: float) -> bool:
    return abs(published - recomputed) > CONSISTENT * max(abs(recomputed), 1e-12)


def number(value: Any) -> TypeGuard[int | float]:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def contradictions(record: Any) -> list[str]:
    """What in a record contradicts itself, in words ([] for none), as every reader of records refuses it (check): NaN
    or infinity anywhere (or an integer beyond a float's range); a sample or warm-up window of 0 s or less; an accuracy
    or AUC that is not within [0, 1]; a machine class other than the one shared.sysinfo.machine_class derives from the
    record's own facts (CPU model, family/model/stepping, flags, usable cores; GPU model and memory); and, in an ok
    record, a published figure that does not follow from its own samples as the runners compute it (shared/timing.py): a
    training task's `steady_state_seconds` (the median window's seconds per step × steps per epoch × epochs, or without
    windows the epochs' fallback) and feature extraction's `seconds_per_1000_images` (the median pass ÷ images × 1,000).
    A figure whose inputs the record lacks, or whose task parameters this checkout does not know (another params_hash),
    is not recomputed."""
    found = [f"{path} is not a finite number" for path in non_finite(record)]
    if found:
        return found
    block = record.get("timing") if isinstance(record.get("timing"), dict) else {}
    for key in ("values", "warmup_windows"):
        held = block.get(key)
        kept = held if isinstance(held, list) else []
        if any(number(v) and v <= 0 for v in kept):
            found.append(f"timing/{key} holds a time of 0 or less (a sample is a duration)")
    metrics = record.get("metrics") if isinstance(record.get("metrics"), dict) else {}
    for key in ("accuracy", "auc"):
        value = metrics.get(key)
        if number(value) and math.isfinite(value) and not 0 <= value <= 1:
            found.append(f"metrics/{key} {value!r} is not within [0, 1]")
    cell = record.get("cell") if isinstance(record.get("cell"), dict) else {}
    system = record.get("system") if isinstance(record.get("system"), dict) else {}
    claimed = system.get("machine_class")
    if claimed and cell.get("device") in ("cpu", "gpu"):
        derived = sysinfo.machine_class(system, cell["device"], cell.get("gpus", 1))
        if derived != claimed:
            found.append(f"system/machine_class {claimed} disagrees with the record's own facts, which give {derived}")
    if found or record.get("status") != "ok" or cell.get("task") not in params.TASKS:
        return found
    held = block.get("values")
    values = [float(v) for v in (held if isinstance(held, list) else []) if number(v)]
    task = cell["task"]
    known = (
        system.get("params_hash") == params.params_hash(task, cell.get("scale", "full"))
        if cell.get("scale") in params.SCALES
        else False
    )
    recomputed: float | None  # the extraction figure, or the steady state (None where it has no inputs)
    if task == "resnet50":
        published, images = metrics.get("seconds_per_1000_images"), metrics.get("images")
        if values and number(published) and number(images) and images > 0:
            recomputed = statistics.median(values) / images * 1000
            if differs(published, recomputed):
                found.append(
                    f"metrics/seconds_per_1000_images {published:.6g} does not follow from the passes "
                    f"(median {statistics.median(values):.6g} s over {images} images: {recomputed:.6g})"
                )
        return found
    published, epochs = metrics.get("steady_state_seconds"), metrics.get("epoch_seconds")
    if not (
        known
        and number(published)
        and isinstance(epochs, list)
        and epochs
        and all(map(number, epochs))
        and number(metrics.get("train_samples"))
    ):
        return found
    batch = metrics.get("global_batch") or params.task_params(task, cell["scale"])["batch_size"] * (
        metrics.get("devices") or 1
    )
    steps = int(metrics["train_samples"]) // int(batch) if number(batch) and batch > 0 else None
    windows = values if block.get("unit") == params.STEP_UNIT else None
    warmup = metrics.get("warmup_seconds") if number(metrics.get("warmup_seconds")) else None
    recomputed = timing.steady_state_seconds([float(e) for e in epochs], warmup, steps, windows)
    if recomputed is not None and differs(published, recomputed):
        how = (
            f"median window {statistics.median(windows):.6g} s × {steps} steps × {len(epochs)} epochs"
            if windows
            else f"the epochs' times, {steps} steps an epoch"
        )
        found.append(
            f"metrics/steady_state_seconds {published:.6g} does not follow from the samples ({how}: {recomputed:.6g})"
        )
    return found


def figures_that_do_not_follow(record: Any) -> list[str]:
    """inconsistencies' second part, one line each, for a record that contradicts nothing (contradictions: every
    number finite, accuracy and AUC within [0, 1], the steady state and the extraction figure recomputed): the other
    published figures against the samples they come from: timing.median/min/max of timing.values, the warm-up
    windows as the rule splits them off, train_seconds as the sum of the epochs, the steady-state time as a whole
    number of median windows (so the batch it implies is the task's), throughput from those times, achieved FLOP/s
    and efficiency from the throughput and the calibration. A figure a record does not have is not checked."""
    found: list[str] = []
    metrics = record.get("metrics") if isinstance(record.get("metrics"), dict) else {}
    timing = record.get("timing") if isinstance(record.get("timing"), dict) else {}
    system = record.get("system") if isinstance(record.get("system"), dict) else {}
    cell = record["cell"]  # the schema (check, before any of this) makes it an object holding every axis but tuning
    held = system.get("calibration")
    calibration = held if isinstance(held, dict) else {}
    held = timing.get("values")
    values = [v for v in (held if isinstance(held, list) else []) if number(v)]
    if values and any(v <= 0 for v in values):
        return found  # check_status / the report: a non-positive sample is not a figure to recompute from
    if values:
        for key, figure in (("median", statistics.median(values)), ("min", min(values)), ("max", max(values))):
            if number(timing.get(key)) and differs(timing[key], figure):
                found.append(f"timing.{key} {timing[key]:.6g} is not the {key} of timing.values ({figure:.6g})")
    warm = timing.get("warmup_windows")
    if isinstance(warm, list) and warm and all(number(w) and w > 0 for w in warm):
        split = warm_windows([*warm, *values])[0]  # the rule decides which windows are warm-up, not the record
        if split != len(warm):
            found.append(
                f"timing.warmup_windows holds {len(warm)} windows where the warm-up rule makes {split} of "
                f"the {len(warm) + len(values)} windows warm-up (shared.timing.warm_windows)"
            )
    task = cell["task"]
    epochs = metrics.get("epoch_seconds")
    train = metrics.get("train_seconds")
    if isinstance(epochs, list) and epochs and number(train) and differs(train, sum(epochs)):
        found.append(f"metrics.train_seconds {train:.6g} is not the sum of metrics.epoch_seconds ({sum(epochs):.6g})")
    minutes = metrics.get("train_minutes")
    if number(minutes) and number(train) and differs(minutes * 60, train):
        found.append(f"metrics.train_minutes {minutes:.6g} is not train_seconds ÷ 60 ({train / 60:.6g})")
    steady, median = metrics.get("steady_state_seconds"), statistics.median(values) if values else None
    steady_rate = metrics.get("steady_samples_per_second")
    if (
        median is not None
        and timing.get("unit") == params.STEP_UNIT
        and number(steady)
        and steady > 0
        and number(steady_rate)
        and task in params.TASKS
    ):
        steps = steady / median  # every step of the run, at the median window's rate
        batch = steady_rate * steady / round(steps) if round(steps) else 0
        scale = cell["scale"]
        # the task's batch only where the record ran this checkout's task parameters (its params_hash)
        wanted = (
            params.task_params(task, scale).get("batch_size")
            if scale in params.SCALES and system.get("params_hash") == params.params_hash(task, scale)
            else None
        )
        gpus = cell["gpus"]  # the schema: at least 1
        if abs(steps - round(steps)) > 1e-6 * steps or round(steps) < 1:
            found.append(
                f"metrics.steady_state_seconds {steady:.6g} is not a whole number of steps at the median "
                f"window's {median:.6g} s ({steps:.6g} steps)"
            )
        elif wanted and all(differs(batch, wanted * k) for k in {1, gpus}):
            found.append(
                f"metrics.steady_state_seconds {steady:.6g} and steady_samples_per_second {steady_rate:.6g} "
                f"imply {batch:.6g} samples a step at the median window's {median:.6g} s; the task's batch "
                f"is {wanted}"
            )
    rate = metrics.get("samples_per_second")
    if (
        number(rate)
        and number(train)
        and number(steady)
        and number(steady_rate)
        and differs(rate * train, steady_rate * steady)
    ):
        found.append(
            f"metrics.samples_per_second × train_seconds ({rate * train:.6g} samples) is not "
            f"steady_samples_per_second × steady_state_seconds ({steady_rate * steady:.6g})"
        )
    per_1000, images = metrics.get("seconds_per_1000_images"), metrics.get("images")
    achieved, per_sample = metrics.get("achieved_flops"), metrics.get("model_flops_per_sample")
    used = 1000 / per_1000 if task == "resnet50" and images and number(per_1000) and per_1000 else steady_rate or rate
    if number(achieved) and number(per_sample) and number(used) and differs(achieved, per_sample * used):
        found.append(
            f"metrics.achieved_flops {achieved:.6g} is not model_flops_per_sample × the throughput "
            f"({per_sample * used:.6g})"
        )
    gemm = calibration.get("gemm_reduced_flops") or calibration.get("gemm_fp32_flops")
    devices = metrics.get("devices", 1) if cell["device"] == "gpu" else 1
    # Records since the one-denominator rule (shared/peaks.py) carry peak_flops: `efficiency` is of the device's peak,
    # `efficiency_of_gemm` of the framework's own GEMM; older ones have only `efficiency`, of the GEMM. Either share is
    # published only up to 1 (shared.peaks.shares names a larger one `implausible` instead).
    shares = [
        ("efficiency_of_gemm", gemm * devices if number(gemm) and number(devices) else None, "the calibrated GEMM")
    ]
    shares.append(
        ("efficiency", metrics.get("peak_flops"), "the device's peak")
        if "peak_flops" in metrics
        else ("efficiency", shares[0][1], "the calibrated GEMM")
    )
    for key, denominator, words in shares:
        share = metrics.get(key)
        if (
            number(share)
            and number(achieved)
            and number(denominator)
            and denominator > 0
            and differs(share, achieved / denominator)
        ):
            found.append(f"metrics.{key} {share:.6g} is not achieved_flops over {words} ({achieved / denominator:.6g})")
    return found


def inconsistencies(record: Any) -> list[str]:
    """Everything in a record that does not follow from the rest of it, one line each ([] for none): what every
    reader refuses (contradictions), then, where there is none of that, every other published figure against the
    samples and facts it comes from (figures_that_do_not_follow). The submission checker asks for all of it."""
    return contradictions(record) or figures_that_do_not_follow(record)


def schema_problem(record: Any) -> str | None:
    """What of `record` breaks the schema, as "field: message"; None where nothing does. A NaN or an infinity is named
    first, in `contradictions`' words (the schema's ranges refuse an infinity too, but only as out of range; NaN,
    which compares false both ways, not at all)."""
    infinite = non_finite(record)
    if infinite:
        return f"inconsistent: {'; '.join(f'{path} is not a finite number' for path in infinite)[:600]}"  # as before
    error = jsonschema.exceptions.best_match(VALIDATOR.iter_errors(record)) if VALIDATOR else None
    return (
        None if error is None else f"{'/'.join(map(str, error.absolute_path)) or '(the record)'}: {error.message[:300]}"
    )


def consistency_problem(record: Any) -> str | None:
    """What of a schema-valid `record` does not follow from the rest of it; None where nothing."""
    try:
        wrong = contradictions(record)
    except (TypeError, ValueError, AttributeError, ArithmeticError) as e:  # a fact of a type no reader expects
        return f"malformed ({type(e).__name__}: {str(e)[:200]})"
    return f"inconsistent: {'; '.join(wrong)[:600]}" if wrong else None


# (check, its inputs, a record file's bytes) -> its answer: a reference read by every verify is judged once a process
_JUDGED: dict = {}


def judged(problem: Callable[[Any], str | None], record: Any, data: bytes | None) -> str | None:
    """`problem(record)`, from the cache where `data` (the bytes `record` was parsed from) was judged before."""
    if data is None:
        return problem(record)
    key = (problem, id(VALIDATOR), contradictions, data)  # what the answer depends on (a test may swap either)
    if key not in _JUDGED:
        if len(_JUDGED) >= 8192:
            _JUDGED.clear()
        _JUDGED[key] = problem(record)
    return _JUDGED[key]


def check(record: Any, where: str, data: bytes | None = None) -> dict[str, Any]:
    """Raise a RecordError naming the first field of `record` that breaks the schema or the clock. `data`, the bytes
    `record` was parsed from where it came from a file, lets the checks of its content run once per content."""
    if not isinstance(record, dict):
        raise RecordError(f"{where}: a record is a JSON object, this is a {type(record).__name__}")
    if VALIDATOR is None and not OWN_RECORDS_ONLY:
        raise RecordError(
            f"{where}: jsonschema is not installed, so no record can be checked; install it "
            "(pip install -r scripts/requirements.txt, or make host)"
        )
    schema = judged(schema_problem, record, data)
    if schema is not None:
        raise RecordError(f"{where}: {schema}")
    started, finished = (moment(record[key], f"{where}: {key}") for key in ("started_at", "finished_at"))
    if max(started, finished) > datetime.now(UTC) + CLOCK_SKEW:
        raise RecordError(
            f"{where}: started_at/finished_at {record['started_at']} … {record['finished_at']} lie in "
            "the future (a wrong clock or a forged record)"
        )
    if finished < started:
        raise RecordError(f"{where}: finished_at {record['finished_at']} is before started_at {record['started_at']}")
    wrong = judged(consistency_problem, record, data)
    if wrong is not None:
        raise RecordError(f"{where}: {wrong}")
    return record


def parse(data: bytes, where: str) -> dict[str, Any]:
    """A record from the bytes of its file (shared.record.read_record's checks, on bytes already read)."""
    try:
        record = json.loads(data.decode())
    except (UnicodeDecodeError, ValueError) as e:  # ValueError: JSONDecodeError, and an integer of 4,300+ digits
        raise RecordError(f"{where}: not a readable result record ({e}); delete it to re-run that cell") from e
    if not isinstance(record, dict):
        raise RecordError(f"{where}: a record is a JSON object, this is a {type(record).__name__}")
    if record.get("schema") not in READABLE:
        raise RecordError(
            f"{where}: record schema {record.get('schema')!r}, this code reads schemas "
            f"{', '.join(map(str, READABLE))}; merge it with the version of the project that wrote it, or re-run "
            "the cell"
        )
    return record


def read(path: str | os.PathLike) -> dict:
    """A record file, read and checked, as the dict it holds; RecordError (with the reason) for anything that is not a
    sound record: a link, FIFO, device or oversize file is refused by name, never opened (read_plain). The host's
    readers, the submission checker among them, take `load`'s Record instead (its `data` is this dict)."""
    path = Path(path)
    try:
        data = read_plain(path)
        return check(parse(data, str(path)), str(path), data)
    except RecursionError:
        raise RecordError(f"{path}: nested too deeply to be a record") from None


# ---------------------------------------------------------------- a read record, typed


def _block(value: object) -> dict:
    """A record's object-valued field as a dict: {} where an older writer left it out or wrote null."""
    return value if isinstance(value, dict) else {}


def _numbers(value: object) -> tuple:
    """A record's list of numbers as a tuple: () where an older writer left it out or wrote null."""
    return tuple(value) if isinstance(value, list) else ()


def upgrade(record: Mapping[str, Any]) -> dict:
    """`record` (a checked record dict) as the newest writers write it: the one place that fills in what older writers
    of schema SCHEMA left out, so no reader carries its own fallback. A copy; the record itself is left as written.

    - `cell.tuning`, absent before the tuning axis: the default (shared.record.OPTIONAL_CELL_KEYS);
    - `metrics`, `timing`, `system`, absent or null in host-written records: empty;
    - `system.machine_class`, absent before the key existed: derived from the record's own facts
      (shared.sysinfo.machine_class; for a host-written record without facts, the class of an unknown machine).
    """
    up = dict(record)
    up["cell"] = {**OPTIONAL_CELL_KEYS, **_block(record.get("cell"))}
    for key in ("metrics", "timing", "system"):
        up[key] = dict(_block(record.get(key)))
    system, cell = up["system"], up["cell"]
    if not system.get("machine_class"):
        system["machine_class"] = sysinfo.machine_class(system, cell.get("device"), cell.get("gpus"))
    return up


@dataclass(frozen=True)
class Timing:
    """A record's timing block (shared/timing.py): its samples and the statistics published from them; () or None
    where the record has none."""

    values: tuple = ()  # every window's seconds per step, or every pass's seconds, after warm-up
    warmup_windows: tuple = ()
    round_trips_ns: tuple = ()  # the cores' distance at each window edge (shared/placement.py), None unmeasured
    unit: str | None = None  # what a value is a time of; None: the record kept no samples (an older writer)
    median: float | None = None
    q1: float | None = None
    q3: float | None = None
    min: float | None = None
    max: float | None = None
    spread: float | None = None
    warmup: float | None = None
    repeats: int | None = None  # how many windows or passes it kept: 0 for a cell too short to fill one

    @property
    def samples(self) -> list[float]:
        """The post-warm-up samples as floats, [] where the record kept none (no unit)."""
        return [float(v) for v in self.values] if self.unit else []


@dataclass(frozen=True)
class Record:
    """A checked record, upgraded (`upgrade`) and typed for its readers: `data` is the dict as written (for writing,
    hashing, flattening into a table); every other field reads the upgraded record. Records compare by `data`."""

    data: Mapping[str, Any]
    cell: Cell = field(compare=False)
    status: str = field(compare=False)
    reason: str | None = field(compare=False)
    run_id: str | None = field(compare=False)
    started_at: str = field(compare=False)
    finished_at: str = field(compare=False)
    git_commit: str | None = field(compare=False)
    metrics: Mapping[str, Any] = field(compare=False)  # read-only; a key a runner did not write is absent
    timing: Timing = field(compare=False)
    system: Mapping[str, Any] = field(compare=False)  # read-only; machine_class always present
    __hash__ = None  # type: ignore[assignment]  # like the dict it wraps

    @classmethod
    def of(cls, record: "Record | Mapping[str, Any]") -> "Record":
        """`record` (a checked record dict, or a Record, returned as it is) as a Record."""
        if isinstance(record, Record):
            return record
        up = upgrade(record)
        timing = up["timing"]
        return cls(
            data=record,
            cell=Cell(**{key: up["cell"].get(key) for key in CELL_KEYS}),
            status=up["status"],
            reason=up.get("reason"),
            run_id=up.get("run_id"),
            started_at=up["started_at"],
            finished_at=up["finished_at"],
            git_commit=up.get("git_commit"),
            metrics=MappingProxyType(up["metrics"]),
            timing=Timing(
                values=_numbers(timing.get("values")),
                warmup_windows=_numbers(timing.get("warmup_windows")),
                round_trips_ns=_numbers(timing.get("round_trips_ns")),
                **{
                    key: timing.get(key)
                    for key in ("unit", "median", "q1", "q3", "min", "max", "spread", "warmup", "repeats")
                },
            ),
            system=MappingProxyType(up["system"]),
        )

    @property
    def machine_class(self) -> str:
        """The machine class the record was measured on: recorded, or derived from its facts (upgrade)."""
        return self.system["machine_class"]

    @property
    def has_facts(self) -> bool:
        """Whether the record, as written, holds its machine's facts (a machine class or a CPU): a runner wrote it,
        not the host for a cell that never ran."""
        written = _block(self.data.get("system"))
        return bool(written.get("machine_class") or written.get("cpu"))

    @property
    def host(self) -> str | None:
        return self.system.get("host")

    @property
    def params_hash(self) -> str | None:
        return self.system.get("params_hash")

    def facts(self, key: str) -> Mapping[str, Any]:
        """An object-valued system fact (`calibration`, `placement`, …), empty where the record has none."""
        return MappingProxyType(_block(self.system.get(key)))

    @property
    def samples(self) -> list[float]:
        """The post-warm-up samples (seconds per step or per pass), [] where the record kept none."""
        return self.timing.samples

    @property
    def steady(self) -> float | None:
        """The steady-state figure: the median sample where the record has samples, else the task's recorded time
        (records that kept no samples)."""
        if self.samples:
            return statistics.median(self.samples)
        value = self.metrics.get("steady_state_seconds") if self.cell.task in params.TRAINING_TASKS else None
        return value if value is not None else self.metrics.get(params.TIME_METRIC[self.cell.task])


def load(path: str | os.PathLike) -> Record:
    """A record file, read, checked (read) and upgraded, as a Record; RecordError for anything that is not one."""
    return Record.of(read(path))


def started(record: Mapping[str, Any]) -> tuple[datetime, datetime]:
    """The sort key of a record's attempts: start, then finish, as times."""
    return moment(record["started_at"], "started_at"), moment(record["finished_at"], "finished_at")


def confined(root: str | os.PathLike, *parts: str) -> Path:
    """root/parts…, refused (RecordError) unless it stays under `root` once resolved: the last line of defence
    behind the safe alphabet, for every path a record's fields name."""
    root = Path(root).resolve()
    path = root.joinpath(*parts).resolve()
    if path == root or root not in path.parents:
        raise RecordError(f"{'/'.join(map(str, parts))!r} would leave {root}")
    return path


def own_folder(run_dir: str | os.PathLike, name: str) -> Path:
    """RUN/NAME as a real folder of the run: a link planted there (to anywhere) is removed, never written through."""
    folder = Path(run_dir) / name
    if folder.is_symlink() or (folder.exists() and not folder.is_dir()):
        folder.unlink()
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def quarantine(run_dir: str | os.PathLike, source: str | os.PathLike, reason: str) -> Path:
    """Put a copy of the file `source` under RUN/quarantine/ (named by its content's hash, so the same bad file is
    kept once) with its reason beside it; returns the copy's path. The source itself is left as it was. A source
    that is not a plain file (a link, a FIFO, a device, too big) is quarantined by name: never opened, nothing of it
    copied."""
    folder = own_folder(run_dir, "quarantine")
    why = not_plain(source)
    try:
        data = b"" if why else read_plain(source)
    except RecordError as e:
        data, why = b"", str(e)
    name = hashlib.sha256(data or f"not read: {os.fspath(source)}".encode()).hexdigest()[:16]
    write_replacing(folder / f"{name}.json.quarantined", data.decode("latin-1"), binary=data)
    write_replacing(
        folder / f"{name}.reason.txt",
        f"source: {os.fspath(source)}\nreason: {reason}\n" + (f"not read: {why}\n" if why else ""),
    )
    return folder / f"{name}.json.quarantined"


def quarantined(run_dir: str | os.PathLike) -> list[tuple[str, str]]:
    """[(source, reason)] of the files quarantined in `run_dir`, for the report."""
    found = []
    folder = Path(run_dir) / "quarantine"
    for note in sorted(folder.glob("*.reason.txt")) if folder.is_dir() and not folder.is_symlink() else []:
        try:
            text = read_plain(note).decode(errors="replace")
        except RecordError:
            continue  # not one the quarantine wrote
        lines = dict(line.split(": ", 1) for line in text.splitlines() if ": " in line)
        found.append((lines.get("source", "?"), lines.get("reason", "?")))
    return found
