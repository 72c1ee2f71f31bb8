"""The runner contract's command line and its one guarantee: exactly one result record per invocation.

    python -m runners FRAMEWORK TASK --data DIR --out FILE [--precision fp32|tf32|amp|bf16] [--gpus N]
                      [--device cpu|gpu] [--scale full|demo|tiny] [--variant NAME] [--run-id ID] [--repeats N]
                      [--switch NAME=VALUE ...]

A task module provides `main(cfg) -> dict(metrics=..., timing=..., switches=...)`; its runner package provides
`framework_info() -> dict(framework_version=..., cuda=..., cudnn=..., gpus=[...])`. Everything else — the record, the
failure capture, the exit code — happens here, identically for every framework.
"""

import argparse
import os
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Dict, Iterable, Mapping, Optional, Sequence, Tuple, Union

from shared import params, placement, threads, timing
from shared.calibration import calibrate, efficiency
from shared.datasets import SYNTHETIC, DataError, data_source, prepare
from shared.record import Skip, make_record, now, write_record
from shared.sysinfo import machine_class, system_info

LOG_TAIL_LINES = 40


@dataclass(frozen=True)
class RunConfig:
    framework: str
    task: str
    data: Path
    out: Path
    precision: str = "fp32"
    gpus: int = 1
    device: str = "cpu"
    scale: str = "full"
    variant: str = "local"
    run_id: Optional[str] = None
    repeats: int = 5
    switches: dict = field(default_factory=dict)
    tuning: str = params.DEFAULT_TUNING

    @property
    def params(self) -> Dict[str, Any]:
        return params.task_params(self.task, self.scale)


def parse_switch(text: str) -> Tuple[str, Any]:
    name, sep, value = text.partition("=")
    if not sep:
        raise argparse.ArgumentTypeError(f"--switch takes NAME=VALUE, got {text!r}")
    lowered = value.lower()
    return name, {"on": True, "true": True, "off": False, "false": False}.get(lowered, value)


def at_least_one(text: str) -> int:
    """A count of devices or repeats: an integer of 1 or more (`--gpus 0` would silently train on one device)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number of 1 or more, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be 1 or more, got {value}")
    return value


def one_of(known: Sequence[str]) -> Callable[[str], str]:
    """A choice that is also checked when it comes from the environment: argparse checks `choices` only on the
    command line, but passes a string default through `type`."""

    def check(text):
        if text not in known:
            raise argparse.ArgumentTypeError(f"invalid choice: {text!r} (choose from {', '.join(known)})")
        return text

    return check


def parser(frameworks: Iterable[str]) -> argparse.ArgumentParser:
    """The contract's flags. In a container, compose sets ROSETTA_DATA_DIR, ROSETTA_OUT_DIR, ROSETTA_SCALE,
    ROSETTA_DEVICE and ROSETTA_VARIANT, so `docker compose run pytorch-cnn` needs no arguments; flags win."""
    env = os.environ.get
    p = argparse.ArgumentParser(prog="python -m runners", description="Run one benchmark cell; write one record.")
    p.add_argument("framework", choices=sorted(frameworks))
    p.add_argument("task", choices=params.TASKS)
    p.add_argument(
        "--data",
        type=Path,
        default=env("ROSETTA_DATA_DIR"),
        required=not env("ROSETTA_DATA_DIR"),
        help="data root (holds cifar10/, imdb/, chestxray14/)",
    )
    p.add_argument(
        "--out",
        type=Path,
        help="result record (JSON) to write; default ROSETTA_OUT_DIR/FRAMEWORK-TASK.json",
        required=not env("ROSETTA_OUT_DIR"),
    )
    p.add_argument(
        "--precision",
        type=one_of(params.PRECISIONS),
        choices=params.PRECISIONS,
        default=env("ROSETTA_PRECISION", "fp32"),
        help="fp32, tf32 (GPU matmuls), amp (float16 autocast) or bf16; ROSETTA_PRECISION, default fp32",
    )
    p.add_argument(
        "--gpus",
        type=at_least_one,
        default=env("ROSETTA_GPUS", "1"),
        help="devices for data-parallel tasks (on CPU: processes), 1 or more",
    )
    p.add_argument(
        "--device",
        type=one_of(params.DEVICES),
        choices=params.DEVICES,
        default=env("ROSETTA_DEVICE", "gpu"),
        help="where the cell runs (ROSETTA_DEVICE; default gpu): a gpu cell on a machine without one fails",
    )
    p.add_argument(
        "--scale",
        type=one_of(params.SCALES),
        choices=params.SCALES,
        default=env("ROSETTA_SCALE", "full"),
        help="the work: full (the original's sizes), demo (two CPU cores), tiny (the tests); ROSETTA_SCALE",
    )
    p.add_argument(
        "--variant",
        default=env("ROSETTA_VARIANT", "local"),
        help="image variant (CUDA/cuDNN combination) the cell runs in",
    )
    p.add_argument("--run-id", default=None, help="the run the record belongs to (the orchestrator sets it)")
    p.add_argument("--repeats", type=at_least_one, default=5, help="timed repeats where a task repeats (resnet50)")
    p.add_argument(
        "--tuning",
        type=one_of(params.TUNINGS),
        choices=params.TUNINGS,
        default=env("ROSETTA_TUNING", params.DEFAULT_TUNING),
        help="default: the framework's idiomatic code; tuned: its own fast path (the task module's TUNED "
        "switches), skipped where the module has none",
    )
    p.add_argument(
        "--switch",
        type=parse_switch,
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="override one of the task module's performance switches (on/off or a value)",
    )
    return p


def config_from_args(args: argparse.Namespace) -> RunConfig:
    out = args.out or Path(os.environ["ROSETTA_OUT_DIR"]) / f"{args.framework}-{args.task}.json"
    return RunConfig(
        framework=args.framework,
        task=args.task,
        data=args.data,
        out=out,
        precision=args.precision,
        gpus=args.gpus,
        device=args.device,
        scale=args.scale,
        variant=args.variant,
        run_id=args.run_id,
        repeats=args.repeats,
        switches=dict(args.switch),
        tuning=args.tuning,
    )


def cell_of(cfg: RunConfig, data: str) -> Dict[str, Any]:
    return {
        "framework": cfg.framework,
        "task": cfg.task,
        "variant": cfg.variant,
        "precision": cfg.precision,
        "gpus": cfg.gpus,
        "device": cfg.device,
        "data": data,
        "scale": cfg.scale,
        "tuning": cfg.tuning,
    }


def tail(text: str, lines: int = LOG_TAIL_LINES) -> str:
    return "\n".join(text.rstrip().splitlines()[-lines:])


def run(
    cfg: RunConfig,
    load_task: Callable[[RunConfig], Any],
    framework_info: Callable[[], Dict[str, Any]],
    family: Optional[Callable[[], Any]] = None,
) -> int:
    """Run `load_task(cfg).main(cfg)` and write its record: ok, skipped (Skip raised) or failed (anything else); an
    ok cell is followed by the device's calibration in `family`'s framework (shared/calibration.py) and reports its
    efficiency against it. Returns the process exit code: 0 for ok and skipped, 1 for failed, 2 when no record can
    be written (the message says why, before any work)."""
    started = now()
    unwritable = cannot_write(cfg.out)
    if unwritable:
        print(f"error: {unwritable}", file=sys.stderr, flush=True)
        return 2
    result, status, reason, log_tail, info = {}, "ok", None, None, {}
    try:
        cfg = twins_for_this_call(cfg)
        data = data_source(cfg.data, cfg.task)
    except DataError as e:
        data = "missing"
        status, reason = "failed", str(e)
    before = placement.measure() if status == "ok" and cfg.device == "cpu" else None  # the cores' distance, ...
    if status == "ok":
        timing.between = placement.Between() if before else None  # ... at every window edge (shared/timing.py) ...
        try:
            info = framework_info()
            result = load_task(cfg).main(cfg)
        except Skip as e:
            status, reason = "skipped", str(e)
        except Exception as e:  # the cell fails, the record says why; the matrix goes on
            status, reason, log_tail = "failed", f"{type(e).__name__}: {e}", tail(traceback.format_exc())
        finally:
            if timing.between is not None:
                timing.between.close()
            timing.between = None
    system = system_info({**info, "switches": result.get("switches", {})})
    system["threads"] = threads.applied()  # the thread rule as applied, and the CPU affinity (shared/threads.py)
    if before and status == "ok":  # ... just before and just after the work (shared/placement.py);
        # a cell that skipped or failed did no work for the round trips to be around
        after = placement.measure() or {}
        system["placement"] = {
            "before_ns": before["round_trip_ns"],
            "after_ns": after.get("round_trip_ns"),
            "cpus": before.get("cpus"),
        }
    system["calibration"] = None
    if status == "ok" and family is not None:
        # After the cell, never before: TensorFlow and JAX fix their logical devices when their runtime starts, which
        # a GEMM would do before the cell could split the CPU into devices; the device is warm by now as well.
        try:
            system["calibration"] = calibrate(family(), cfg, system)
            result["metrics"].update(efficiency(cfg, result["metrics"], system["calibration"], system))
        except Exception as e:  # a calibration that breaks must not cost the cell its result: the record says why
            system["calibration"] = {"note": f"calibration failed: {type(e).__name__}: {e}"[:300]}
    system["machine_class"] = machine_class(system, cfg.device, cfg.gpus)  # what verify and the report compare by
    system["params_hash"] = params.params_hash(cfg.task, cfg.scale)  # … with the work the cell did
    record = make_record(
        cell_of(cfg, data),
        status,
        run_id=cfg.run_id,
        reason=reason,
        log_tail=log_tail,
        metrics=result.get("metrics"),
        timing=result.get("timing"),
        system=system,
        started_at=started,
    )
    try:
        write_record(cfg.out, record)
    except OSError as e:  # the folder went away or filled up during the cell: say so, never a traceback
        print(
            f"error: the {status} record of this cell could not be written to {cfg.out}: {e.strerror or e}",
            file=sys.stderr,
            flush=True,
        )
        return 2
    summary = reason or ", ".join(
        f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}"
        for k, v in record["metrics"].items()
        if not isinstance(v, (list, dict))
    )
    print(f"[{cfg.framework} {cfg.task} {cfg.precision}] {status}: {summary}", flush=True)
    return 1 if status == "failed" else 0


def cannot_write(out: Union[str, Path]) -> Optional[str]:
    """Why the record `out` cannot be written (None where it can), found before any work by writing a file beside it.

    In a container the folder is the host's ROSETTA_RESULTS (compose.yaml passes its name as ROSETTA_RESULTS_HOST),
    which Docker creates as root where it is missing, while the service runs as ROSETTA_UID (1000 unless set): the
    message names the user, both folders and the two ways out."""
    folder = Path(out).parent
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as e:
        uid, gid = os.getuid(), os.getgid()
        host = os.environ.get("ROSETTA_RESULTS_HOST")
        where = f"{folder} (on the host: {host}, ROSETTA_RESULTS)" if host else str(folder)
        fix = (
            f"create it as yourself before the first run (`make setup` does, and writes your uid to .env), or "
            f"`sudo chown -R {uid}:{gid} {host}`"
            if host
            else f"`chown -R {uid}:{gid} {folder}` or choose another --out"
        )
        return f"uid {uid} cannot write the results folder {where} ({e.strerror or e}): {fix}; nothing was run"
    return None


def twins_for_this_call(cfg: RunConfig) -> RunConfig:
    """The config with the data root this cell reads. By hand in a container (`docker compose run --rm pytorch-cnn`),
    compose sets ROSETTA_TWINS_SCRATCH: where the data folder of this call lacks the synthetic twin the task needs,
    the twin is made there (the container's own tmpfs; seeded, the same bytes `python -m shared.datasets
    --synthetic` writes) and the cell reads it, while /data stays read-only. Nothing persists between calls, so no
    call can see another call's folder (issue 28: Compose 1.29 restarts a dependency's old container, volumes and
    all). The orchestrator prepares its data itself and sets no scratch: a missing dataset there is an error."""
    scratch = os.environ.get("ROSETTA_TWINS_SCRATCH")
    dataset = params.task_params(cfg.task).get("dataset")
    if (
        not scratch
        or os.environ.get("ROSETTA_DATASET") != "synthetic"
        or dataset not in SYNTHETIC
        or (Path(cfg.data) / dataset / "manifest.json").exists()
    ):
        return cfg
    start = time.perf_counter()
    prepare(scratch, synthetic=True, datasets=(dataset,))
    print(
        f"{dataset}: not in this call's data folder, so its synthetic twin was made in the container for this call "
        f"({time.perf_counter() - start:.0f} s); to keep the twins in the data folder for later calls, run "
        f"`docker compose run --rm data` (or this image's own `twins-FAMILY` service) once",
        flush=True,
    )
    return replace(cfg, data=Path(scratch))


def no_tuned_path(cfg: RunConfig) -> None:
    """A tuned cell of a runner that has no fast path beyond its idiomatic code is skipped, saying so."""
    if cfg.tuning != params.DEFAULT_TUNING:
        raise Skip(
            f"{cfg.framework} {cfg.task}: no tuned path is written for this task: its runner has only the "
            "idiomatic code of the default cell (docs/tuned.md lists the frameworks that have one)"
        )


def resolve_switches(
    defaults: Mapping[str, Any], cfg: RunConfig, tuned: Optional[Mapping[str, Any]] = None
) -> Dict[str, Any]:
    """The module's switch defaults, then (in a tuned cell) its `tuned` ones: the framework's own documented fast path,
    each a named switch with its reason in the module's Config section; then the command line's overrides. An unknown
    name is an error, not ignored; a tuned cell of a module without a fast path is skipped, saying so."""
    if tuned is None:
        no_tuned_path(cfg)
    unknown = (set(cfg.switches) | set(tuned or {})) - set(defaults)
    if unknown:
        raise ValueError(
            f"unknown switch(es) {sorted(unknown)} for {cfg.framework} {cfg.task}; known: {sorted(defaults)}"
        )
    return {**defaults, **((tuned or {}) if cfg.tuning != params.DEFAULT_TUNING else {}), **cfg.switches}
