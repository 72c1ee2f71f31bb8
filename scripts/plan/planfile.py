"""The plan file: a profile expanded once into its cells, written as JSON, read by every backend.

    python -m scripts.plan --profile full --out plan.json              # what a multi-host run will do, cell by cell
    python -m scripts.plan --profile full --gpu-model h100 --github-output "$GITHUB_OUTPUT"   # GitHub Actions

The local and compose executors (scripts/run.py), a GitHub Actions workflow (one job per cell), a Slurm job array
(scripts/launch/slurm.py) and a Kubernetes Indexed Job (scripts/launch/k8s.py) all read this file; none of them expands
the matrix again, so every host runs exactly the cells the plan names, under the same ids (the records' merge key). A
backend picks a cell by its index in `cells` (SLURM_ARRAY_TASK_ID, JOB_COMPLETION_INDEX) or by its id; scripts/cell.py
runs it.
"""

import argparse
import json
import math
import re
import sys
from collections import Counter
from collections.abc import Collection, Iterable, Sequence
from dataclasses import asdict, dataclass, replace
from datetime import datetime
from pathlib import Path
from typing import Any

import yaml

from scripts.paths import ROOT, safe_id
from scripts.plan.matrix import EXECUTORS, SYSTEM, Cell, Matrix, MatrixError, Plan, expand, load
from shared.params import TUNINGS
from shared.record import RecordError, read_plain, write_atomic

SCHEMA = 1
ACTIONLINT = ROOT / ".github" / "actionlint.yaml"  # the self-hosted runner labels the workflow may ask for
GITHUB_MATRIX_LIMIT = 256  # jobs one GitHub Actions matrix may generate
GITHUB_CHUNKS = 4  # chunk jobs in .github/workflows/matrix.yml (cells-0 … cells-3)


class PlanError(Exception):
    """A plan file that cannot be used, or a plan a backend cannot take; the message says what to change."""


@dataclass(frozen=True)
class PlannedCell:
    """A cell with what a backend needs to start it without the matrix: its image and compose service."""

    cell: Cell
    image: str  # rosetta/FAMILY:VARIANT ("" for the system executor's cells: no image)
    service: str  # the compose service (FRAMEWORK-TASK)
    gpu_archs: tuple = ()  # the architectures the image has kernels for (the pre-flight's input); () = any
    ptx: tuple = ()  # the PTX it carries, which newer GPUs JIT-compile
    cuda: tuple = ()  # its CUDA runtime(s), which decide the oldest driver it runs on

    @property
    def id(self) -> str:
        return self.cell.id


@dataclass(frozen=True)
class PlanFile:
    plan: Plan
    run_id: str
    cells: tuple  # PlannedCell, in the plan's order: index i is array task / completion index i

    def find(self, index: int | None = None, cell_id: str | None = None) -> PlannedCell:
        """The cell at `index` (an array task id) or with `cell_id`; a PlanError naming the valid range or ids."""
        if cell_id is not None:
            for planned in self.cells:
                if planned.id == cell_id:
                    return planned
            raise PlanError(
                f"no cell {cell_id!r} in the plan of run {self.run_id}; its cells: "
                f"{', '.join(c.id for c in self.cells[:5])}{' …' if len(self.cells) > 5 else ''}"
            )
        if index is None or not 0 <= index < len(self.cells):
            raise PlanError(f"cell index {index!r} is outside the plan of run {self.run_id} (0…{len(self.cells) - 1})")
        return self.cells[index]


# An image is the matrix's own name for it, rosetta/FAMILY:VARIANT (matrix.py: Variant.image), never a registry's: the
# registry is the operator's (--image-prefix), so a plan naming `attacker.example/evil:latest` is refused on reading.
IMAGE = re.compile(r"rosetta/[a-z0-9][a-z0-9._-]*:[A-Za-z0-9][A-Za-z0-9._-]*")
# The ranges a plan's numbers must lie in, wherever a plan is made or read (check_values): matrix.yaml's own values are
# far inside them (repeats 1-5, timeouts of 4-180 minutes, 1-8 GPUs); a value outside is an edited plan.
REPEATS = (1, 100)  # timed repeats of a cell
TIMEOUT_S = (1.0, 2 * 24 * 3600.0)  # a cell's timeout in seconds, finite: 1 s to 2 days
GPUS = (1, 64)  # a cell's GPUs (or processes, on the CPU)


def number_in(value: Any, bounds: tuple, whole: bool) -> bool:
    """True for a finite number (an integer where `whole`; never a bool) within `bounds`, both ends included."""
    kinds = (int,) if whole else (int, float)
    return (
        isinstance(value, kinds)
        and not isinstance(value, bool)
        and math.isfinite(value)
        and bounds[0] <= value <= bounds[1]
    )


def check_values(plan_file: PlanFile, where: str = "the plan") -> PlanFile:
    """A PlanError unless the plan's numbers are finite and in range (REPEATS, TIMEOUT_S, GPUS), its executor a known
    one and every image the matrix's form of a name (IMAGE): a plan file is untrusted, and these values become a
    runner's loop count, a scheduler's time limit, a GPU request and the image a node pulls."""
    plan = plan_file.plan
    bad: list[tuple[str, Any, str]] = []
    bad += [] if number_in(plan.repeats, REPEATS, True) else [("repeats", plan.repeats, f"a whole number in {REPEATS}")]
    bad += (
        []
        if number_in(plan.timeout_s, TIMEOUT_S, False)
        else [("timeout_s", plan.timeout_s, f"seconds in {TIMEOUT_S}")]
    )
    bad += [] if plan.executor in EXECUTORS else [("executor", plan.executor, f"one of {', '.join(EXECUTORS)}")]
    bad += [] if safe_id(plan.profile) else [("profile", plan.profile, "a name of the safe alphabet")]
    for planned in plan_file.cells:
        if not number_in(planned.cell.gpus, GPUS, True):
            bad.append((f"cell {planned.id}'s gpus", planned.cell.gpus, f"a whole number in {GPUS}"))
        if not (planned.image == "" and planned.cell.variant == SYSTEM) and not IMAGE.fullmatch(str(planned.image)):
            bad.append((f"cell {planned.id}'s image", planned.image, "rosetta/FAMILY:VARIANT, the matrix's name"))
        for key in ("gpu_archs", "ptx", "cuda"):
            if not all(safe_id(v) for v in getattr(planned, key)):
                bad.append((f"cell {planned.id}'s {key}", getattr(planned, key), "names of the safe alphabet"))
    if bad:
        what, value, wanted = bad[0]
        raise PlanError(
            f"{where}: {what} {value!r} is not {wanted}; write the plan again with `python -m scripts.plan`"
        )
    return plan_file


def check_ids(plan_file: PlanFile, where: str = "the plan") -> PlanFile:
    """A PlanError unless the run id and every cell's axes and service are of the safe alphabet: they become file
    names, Slurm directives, ConfigMap lines, pod arguments and labels, where a newline or a `$(…)` would be a new
    shell line or command (a plan file is untrusted input like a record); then check_values (numbers, images)."""
    if not safe_id(plan_file.run_id):
        raise PlanError(
            f"{where}: run id {plan_file.run_id!r} is not of letters, digits and ._- (at most 128, "
            "starting with a letter or digit); name the run again"
        )
    for planned in plan_file.cells:
        cell = planned.cell
        bad = [(k, v) for k, v in vars(cell).items() if k != "gpus" and not safe_id(v)]
        bad += [("gpus", cell.gpus)] if not isinstance(cell.gpus, int) or isinstance(cell.gpus, bool) else []
        bad += [("tuning", cell.tuning)] if cell.tuning not in TUNINGS else []
        bad += [("service", planned.service)] if not safe_id(planned.service) else []
        if bad:
            raise PlanError(
                f"{where}: a cell's {bad[0][0]} {bad[0][1]!r} is not of the safe alphabet; write the "
                "plan again with `python -m scripts.plan`"
            )
    return check_values(plan_file, where)


def make(matrix: Matrix, profile: str, run_id: str | None = None, executor: str | None = None) -> PlanFile:
    """Expand `profile` once (with `executor` instead of the profile's, if given) and attach each cell's image and
    service."""
    plan = expand(matrix, profile, executor)
    run_id = run_id or f"{profile}-{datetime.now().strftime('%Y%m%d-%H%M%S')}"
    cells = tuple(planned_cell(matrix, c) for c in plan.cells)
    return check_ids(PlanFile(plan, run_id, cells), "the run id given")


def planned_cell(matrix: Matrix, cell: Cell) -> PlannedCell:
    """`cell` with the image, service and architectures the matrix gives it; KeyError for a framework or variant the
    matrix does not hold."""
    fw = matrix.frameworks[cell.framework]
    if cell.variant == SYSTEM:
        return PlannedCell(cell, "", f"{cell.framework}-{cell.task}")
    variant = fw.variants[cell.variant]
    return PlannedCell(
        cell, variant.image(fw.family), f"{cell.framework}-{cell.task}", variant.gpu_archs, variant.ptx, variant.cuda
    )


def check_against(plan_file: PlanFile, matrix: Matrix, where: str = "the plan") -> PlanFile:
    """A PlanError unless everything the matrix decides is the matrix's: the profile's repeats and timeout under the
    plan's executor, and each cell's image, service and architectures (planned_cell). What a launcher checks before
    it starts anything (scripts.cell, Slurm, Kubernetes): a plan may hold fewer cells than its profile (`--only`, a
    retry), or a cell of the matrix's frameworks and variants outside it, but no value the matrix does not give.
    The submission checker compares the whole plan, cells included (submission/derived.py: check_plan)."""
    plan = plan_file.plan
    fix = (
        f"write the plan again from this checkout's matrix.yaml with `python -m scripts.plan --profile {plan.profile}`"
    )
    try:
        derived = expand(matrix, plan.profile, plan.executor)
    except MatrixError as e:
        raise PlanError(f"{where}: matrix.yaml cannot re-derive it ({e}); {fix}") from None
    for key in ("executor", "repeats", "timeout_s"):
        if getattr(plan, key) != getattr(derived, key):
            raise PlanError(
                f"{where}: {key} {getattr(plan, key)!r} is not profile {plan.profile}'s in matrix.yaml "
                f"({getattr(derived, key)!r}); {fix}"
            )
    for planned in plan_file.cells:
        try:
            wanted = planned_cell(matrix, planned.cell)
        except KeyError:
            raise PlanError(
                f"{where}: cell {planned.id} is of no framework and variant of matrix.yaml; {fix}"
            ) from None
        if planned != wanted:
            raise PlanError(
                f"{where}: cell {planned.id} names image {planned.image!r}, service {planned.service!r}, "
                f"architectures {planned.gpu_archs + planned.ptx + planned.cuda}; matrix.yaml gives {wanted.image!r}, "
                f"{wanted.service!r}, {wanted.gpu_archs + wanted.ptx + wanted.cuda}; {fix}"
            )
    return plan_file


def to_json(plan_file: PlanFile) -> str:
    p = plan_file.plan
    return (
        json.dumps(
            {
                "schema": SCHEMA,
                "run_id": plan_file.run_id,
                "profile": p.profile,
                "executor": p.executor,
                "repeats": p.repeats,
                "timeout_s": p.timeout_s,
                "cells": [
                    {
                        "id": c.id,
                        **asdict(c.cell),
                        "image": c.image,
                        "service": c.service,
                        "gpu_archs": list(c.gpu_archs),
                        "ptx": list(c.ptx),
                        "cuda": list(c.cuda),
                    }
                    for c in plan_file.cells
                ],
            },
            indent=2,
        )
        + "\n"
    )


def write(path: str | Path, plan_file: PlanFile) -> None:
    write_atomic(path, to_json(plan_file))


def document(path: str | Path) -> Any:
    """The JSON of a plan file, read as untrusted input (shared.record.read_plain: a plain file, never a link, FIFO or
    device, at most 8 MiB); RecordError or ValueError for anything else (JSON nested too deeply to parse included)."""
    try:
        return json.loads(read_plain(Path(path)).decode())
    except RecursionError:
        raise ValueError(f"{path}: nested too deeply to be a plan") from None


def read(path: str | Path) -> PlanFile:
    """Load a plan file; anything missing or malformed is a PlanError naming the file and the key."""
    try:
        doc = document(path)
    except (RecordError, ValueError) as e:
        raise PlanError(f"{path}: not a readable plan file ({e}); write one with `python -m scripts.plan`") from e
    return parse(doc, path)


def parse(doc: Any, path: str | Path) -> PlanFile:
    """The PlanFile of a plan file's JSON (document()), checked as read() checks it; `path` names it in errors."""
    if not isinstance(doc, dict) or doc.get("schema") != SCHEMA:
        raise PlanError(
            f"{path}: plan schema {doc.get('schema') if isinstance(doc, dict) else None!r}, this code "
            f"reads schema {SCHEMA}; write the plan again with this version (`python -m scripts.plan`)"
        )
    try:
        # a plan written before the tuning axis has no "tuning": its cells are default cells (Cell's own default)
        cells = tuple(
            PlannedCell(
                Cell(**{k: c[k] for k in Cell.__dataclass_fields__ if k != "tuning" or k in c}),
                c["image"],
                c["service"],
                tuple(c.get("gpu_archs", ())),
                tuple(c.get("ptx", ())),
                tuple(c.get("cuda", ())),
            )
            for c in doc["cells"]
        )
        # the numbers as written (no int() or float() first: "5", 5.9 or true is no count), checked by check_ids
        plan = Plan(doc["profile"], doc["executor"], doc["repeats"], doc["timeout_s"], tuple(c.cell for c in cells))
        bad = [c for c, planned in zip(doc["cells"], cells, strict=False) if c["id"] != planned.id]
        if bad:
            raise PlanError(
                f"{path}: cell id {bad[0]['id']!r} does not match its axes (expected "
                f"{cells[doc['cells'].index(bad[0])].id!r}); the plan was edited by hand"
            )
        twice = sorted(cell_id for cell_id, n in Counter(c.id for c in cells).items() if n > 1)
        if twice:  # records are files named by cell id: two such cells would overwrite each other's result
            raise PlanError(
                f"{path}: cells {', '.join(twice)} appear more than once (a cell id names no data kind or "
                f"scale, so a plan holds one of each); the plan was edited by hand"
            )
        check_ids(PlanFile(plan, doc["run_id"], cells), str(path))
        return PlanFile(replace(plan, timeout_s=float(plan.timeout_s)), doc["run_id"], cells)
    except (KeyError, TypeError, ValueError) as e:
        raise PlanError(
            f"{path}: malformed plan ({type(e).__name__}: {e}); write it again with `python -m scripts.plan`"
        ) from e


def planned_profile(folder: str | Path) -> str | None:
    """The profile a run folder's plan.json names, or None without a readable one."""
    try:
        return str(document(Path(folder) / "plan.json")["profile"])
    except (RecordError, ValueError, KeyError, TypeError):
        return None


def planned_ids(folder: str | Path) -> list[str] | None:
    """The cell ids a run folder's plan.json names, or None without a readable one (a merged or hand-made folder).
    Tolerant on purpose: reports and verify read plans written by earlier versions too, which listed bare ids; an
    entry that is neither (a list, a number) is no id."""
    try:
        cells = document(Path(folder) / "plan.json")["cells"]
        ids = [c.get("id") if isinstance(c, dict) else c for c in cells]
        return [i for i in ids if isinstance(i, str)]
    except (RecordError, ValueError, KeyError, TypeError, AttributeError):
        return None


def planned_run(folder: str | Path) -> str | None:
    """The run id a run folder's plan.json names, or None without a readable one."""
    try:
        run_id = document(Path(folder) / "plan.json")["run_id"]
        return run_id if isinstance(run_id, str) else None
    except (RecordError, ValueError, KeyError, TypeError):
        return None


# ---------------------------------------------------------------- GitHub Actions: one job per cell, by label


def runner_labels(path: str | Path = ACTIONLINT) -> tuple[str, ...]:
    """The self-hosted runner labels declared for actionlint: the only labels a cell's job may ask for."""
    try:
        return tuple(yaml.safe_load(Path(path).read_text())["self-hosted-runner"]["labels"])
    except (OSError, KeyError, TypeError, yaml.YAMLError) as e:
        raise PlanError(f"{path}: no self-hosted runner labels ({e})") from e


def runs_on(cell: Cell, gpu_model: str | None, labels: Collection[str]) -> list[str]:
    """The labels of a runner that can run `cell`: a CPU runner, or one holding `cell.gpus` GPUs of `gpu_model`."""
    wanted = ["self-hosted", "linux", "rosetta"]
    wanted += ["cpu"] if cell.device == "cpu" else [f"gpu-{gpu_model}", f"gpus-{cell.gpus}"]
    missing = [label for label in wanted[2:] if label not in labels]
    if missing:
        counts = sorted(int(label[5:]) for label in labels if label.startswith("gpus-"))
        raise PlanError(
            f"cell {cell.id} needs a runner labelled {', '.join(missing)}, which .github/actionlint.yaml "
            f"does not declare (GPU counts offered: {counts or 'none'}; models: "
            f"{', '.join(label[4:] for label in labels if label.startswith('gpu-')) or 'none'}); register "
            f"such a runner and declare its labels, or drop the cell from the profile"
        )
    return wanted


def github_chunks(
    plan_file: PlanFile,
    gpu_model: str | None,
    labels: Collection[str],
    size: int = GITHUB_MATRIX_LIMIT,
    chunks: int = GITHUB_CHUNKS,
) -> list[list[dict[str, Any]]]:
    """The plan as `chunks` job matrices of at most `size` cells each (GitHub's limit per matrix); empty ones are []."""
    if len(plan_file.cells) > size * chunks:
        raise PlanError(
            f"the plan has {len(plan_file.cells)} cells; the workflow runs at most {size * chunks} "
            f"({chunks} matrices of {size}, GitHub's limit): split the profile (fewer frameworks, "
            f"variants or precisions per run)"
        )
    models = sorted(label[4:] for label in labels if label.startswith("gpu-"))
    if any(c.cell.device == "gpu" for c in plan_file.cells) and gpu_model not in models:
        raise PlanError(
            f"unknown GPU model {gpu_model!r}: the runners' labels (.github/actionlint.yaml) declare "
            f"{', '.join(models) or 'none'}; pick one, or declare gpu-{gpu_model} for runners that have it"
        )
    jobs = [
        {
            "id": c.id,
            "runs-on": runs_on(c.cell, gpu_model, labels),
            "image": c.image,
            "framework": c.cell.framework,
            "variant": c.cell.variant,
            "executor": plan_file.plan.executor,
        }
        for c in plan_file.cells
    ]
    return [jobs[i * size : (i + 1) * size] for i in range(chunks)]


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m scripts.plan", description=__doc__.split("\n")[0])
    ap.add_argument("--profile", default="full", help="the profile of matrix.yaml to plan (default: full)")
    ap.add_argument("--matrix", type=Path, default=ROOT / "matrix.yaml", help="the matrix file (default: matrix.yaml)")
    ap.add_argument("--run-id", help="the run's id (default: PROFILE-YYYYmmdd-HHMMSS)")
    ap.add_argument("--out", type=Path, default=Path("plan.json"), help="the plan file to write (default: plan.json)")
    ap.add_argument("--gpu-model", help="GitHub Actions: the GPU label of the runners (gpu-MODEL), e.g. h100")
    ap.add_argument("--github-output", type=Path, help="GitHub Actions: append run_id and chunk-0… to this file")
    args = ap.parse_args(argv)
    try:
        plan_file = make(load(args.matrix), args.profile, args.run_id)
        if args.github_output:
            if not args.gpu_model and any(c.device == "gpu" for c in plan_file.plan.cells):
                raise PlanError(f"profile {args.profile} has GPU cells: name the runners' GPU model (--gpu-model)")
            chunks = github_chunks(plan_file, args.gpu_model, runner_labels())
    except (MatrixError, PlanError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    write(args.out, plan_file)
    if args.github_output:  # after the plan file: the jobs these outputs start will download it
        with open(args.github_output, "a") as out:
            out.write(f"run_id={plan_file.run_id}\n")
            out.writelines(f"chunk-{i}={json.dumps(jobs)}\n" for i, jobs in enumerate(chunks))
    print(
        f"{args.out}: run {plan_file.run_id}, profile {args.profile}, {len(plan_file.cells)} cells "
        f"via {plan_file.plan.executor}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())


# Slots: the name a scheduler gives the place where one planned cell runs, so that a record coming back from there
# can be told apart from a record of another cell (scripts/results/merge.py: slot_cells). Slurm's is the array task
# (the cell's index in the plan); Kubernetes' is k8s-GROUP-INDEX: one Indexed Job per (image, GPUs) group in plan
# order, one completion index per cell (scripts/launch/k8s.py lays the jobs out by these).
SLOT_PATTERN = r"k8s-(\d{1,4})-(\d{1,6})"


def slot_name(group: int, index: int) -> str:
    return f"k8s-{group}-{index}"


def groups_of(cells: Iterable[PlannedCell]) -> list[tuple[str, int, list[PlannedCell]]]:
    """[(image, GPUs, [PlannedCell])] in plan order; GPUs is 0 for CPU cells, whose `gpus` counts processes."""
    by_key: dict[tuple[str, int], list[PlannedCell]] = {}
    for planned in cells:
        gpus = planned.cell.gpus if planned.cell.device == "gpu" else 0
        by_key.setdefault((planned.image, gpus), []).append(planned)
    return [(image, gpus, cells) for (image, gpus), cells in by_key.items()]


def slot_map(cells: Iterable[PlannedCell]) -> dict[str, str]:
    """{slot name: cell id} of the planned cells (in plan order), as the Kubernetes jobs lay them out."""
    return {slot_name(g, i): c.id for g, (_, _, group) in enumerate(groups_of(cells)) for i, c in enumerate(group)}
