"""matrix.yaml → validated spec → cells: a pure expansion with stable order and stable ids (docs/style.md, rule 7).

python -m scripts.plan.matrix [--matrix matrix.yaml] --profile demo     # list the cells a profile would run
"""

import argparse
import itertools
import re
import sys
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from scripts.paths import ROOT
from shared import params

SCHEMA = 1
EXECUTORS = ("local", "compose", "system")
SYSTEM = "system"  # the variant of a cell run by the system executor: an interpreter given, no venv, no image
DATA_KINDS = ("synthetic", "real")
TOP_KEYS = {"schema", "defaults", "frameworks", "profiles", "exclude"}
DEFAULT_KEYS = {"repeats", "timeout_minutes"}
FRAMEWORK_KEYS = {"family", "python", "tasks", "precisions", "variants"}
VARIANT_KEYS = {
    "base_image",
    "requirements",
    "device",
    "python",
    "glibc",
    "gpu_archs",
    "ptx",
    "cuda",
    "cudnn",
    "parent",
    "dockerfile",
}
VARIANT_REQUIRED = ("base_image", "requirements", "device")
PROFILE_KEYS = {
    "executor",
    "device",
    "data",
    "scale",
    "repeats",
    "timeout_minutes",
    "frameworks",
    "variants",
    "tasks",
    "precisions",
    "gpus",
    "tunings",
    "exclude",
}
CELL_AXES = ("framework", "task", "variant", "precision", "gpus", "device", "data", "scale", "tuning")


class MatrixError(Exception):
    """matrix.yaml is malformed or asks for something unknown; the message names the key and the reason."""


@dataclass(frozen=True)
class Variant:
    name: str
    base_image: str
    requirements: str
    device: str
    python: str = "3.11"  # the base image's python3, which the wheelhouse must match (Debian 12: 3.11)
    glibc: str = "2.36"  # the base image's C library, likewise (Debian 12: 2.36; Ubuntu 24.04: 2.39)
    gpu_archs: tuple = ()  # GPU architectures the image's kernels were compiled for ("sm_86"); () = not limited
    ptx: tuple = ()  # PTX it carries ("compute_90"), which the driver JIT-compiles for newer GPUs
    cuda: tuple = ()  # CUDA runtime version(s) the image carries ("13.0"); () = none (a CPU variant)
    cudnn: tuple = ()  # cuDNN version(s) likewise ("9.24")
    parent: str | None = None  # the variant whose image this one extends with `requirements` (one library swapped)
    dockerfile: str | None = None  # its Dockerfile, where not the family's usual one (scripts/launch/images.py)

    def image(self, family: str) -> str:
        return f"rosetta/{family}:{self.name}"


@dataclass(frozen=True)
class Framework:
    id: str
    family: str
    python: str
    tasks: tuple
    precisions: tuple
    variants: dict = field(hash=False)


@dataclass(frozen=True)
class Cell:
    framework: str
    task: str
    variant: str
    precision: str
    gpus: int
    device: str
    data: str
    scale: str
    tuning: str = params.DEFAULT_TUNING  # the framework's code as its tutorials write it, or its own fast path

    @property
    def id(self) -> str:
        """Stable, filename-safe, unique within a run: also the record's file name (the merge key). A tuned cell's id
        ends in -tuned; a default cell's is what it was before the axis existed, so references stay comparable."""
        base = f"{self.framework}-{self.task}-{self.variant}-{self.precision}-{self.gpus}{self.device}"
        return base if self.tuning == params.DEFAULT_TUNING else f"{base}-{self.tuning}"


@dataclass(frozen=True)
class Plan:
    profile: str
    executor: str
    repeats: int
    timeout_s: float
    cells: tuple


@dataclass(frozen=True)
class Matrix:
    frameworks: dict
    profiles: dict
    exclude: tuple
    defaults: dict


# ---------------------------------------------------------------- loading and validation


class UniqueKeyLoader(yaml.SafeLoader):
    """PyYAML keeps the last of two equal keys silently; a matrix with a duplicated framework or profile is an error.
    A merge key (`<<: *demo`) is not a duplicate: the keys written beside it override the merged ones, as YAML says."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen = set()
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = self.construct_object(key_node, deep=deep)
            if key in seen:
                raise MatrixError(f"duplicate key {key!r} at line {key_node.start_mark.line + 1}")
            seen.add(key)
        return super().construct_mapping(node, deep)


def check_keys(mapping: Any, allowed: Iterable[str], where: str, required: Sequence[str] = ()) -> None:
    if not isinstance(mapping, dict):
        raise MatrixError(f"{where}: expected a mapping, got {type(mapping).__name__}")
    unknown = sorted(set(mapping) - set(allowed))
    if unknown:
        raise MatrixError(f"{where}: unknown key {unknown[0]!r}; allowed: {', '.join(sorted(allowed))}")
    missing = [k for k in required if k not in mapping]
    if missing:
        raise MatrixError(f"{where}: missing key {missing[0]!r}")


def check_list(value: Any, known: Collection[Any] | None, where: str, kind: type = str) -> tuple[Any, ...]:
    """A list of known values with no repeats (a repeat would run the same cell twice)."""
    if not isinstance(value, list) or not value:
        raise MatrixError(f"{where}: expected a non-empty list")
    for item in value:
        if not isinstance(item, kind) or isinstance(item, bool):
            raise MatrixError(f"{where}: {item!r} is not a {kind.__name__}")
        if known is not None and item not in known:
            raise MatrixError(f"{where}: unknown value {item!r}; known: {', '.join(map(str, known))}")
        if value.count(item) > 1:
            raise MatrixError(f"{where}: {item!r} is listed twice, which would duplicate cells")
    return tuple(value)


def check_positive(value: Any, where: str) -> float:
    if not isinstance(value, (int, float)) or isinstance(value, bool) or value <= 0:
        raise MatrixError(f"{where}: expected a positive number, got {value!r}")
    return value


def parse_framework(fid: str, spec: Any) -> Framework:
    where = f"frameworks.{fid}"
    check_keys(spec, FRAMEWORK_KEYS, where, required=("family", "python", "tasks", "precisions", "variants"))
    variants = {}
    check_keys(spec["variants"], spec["variants"] or {}, f"{where}.variants")
    for name, v in spec["variants"].items():
        check_keys(v, VARIANT_KEYS, f"{where}.variants.{name}", required=VARIANT_REQUIRED)
        if v["device"] not in params.DEVICES:
            raise MatrixError(f"{where}.variants.{name}.device: {v['device']!r} is not one of {params.DEVICES}")
        for key in ("requirements", "dockerfile"):
            if key in v and not (ROOT / str(v[key])).exists():
                raise MatrixError(f"{where}.variants.{name}.{key}: {v[key]} does not exist")
        archs = arch_list(v, "gpu_archs", r"sm_\d{2,3}", "sm_86", f"{where}.variants.{name}")
        ptx = arch_list(v, "ptx", r"compute_\d{2,3}", "compute_90", f"{where}.variants.{name}")
        cuda, cudnn = (versions(v.get(key), f"{where}.variants.{name}.{key}") for key in ("cuda", "cudnn"))
        if v["device"] == "gpu" and not cuda:
            raise MatrixError(
                f"{where}.variants.{name}: a GPU variant declares the CUDA runtime its image carries "
                f'(cuda: "13.0"); `docker run --rm IMAGE --inspect` reports it'
            )
        variants[name] = Variant(
            name,
            v["base_image"],
            v["requirements"],
            v["device"],
            str(v.get("python", "3.11")),
            str(v.get("glibc", "2.36")),
            archs,
            ptx,
            cuda,
            cudnn,
            v.get("parent"),
            v.get("dockerfile"),
        )
    for name, variant in variants.items():
        if variant.parent and variant.dockerfile:
            raise MatrixError(
                f"{where}.variants.{name}.dockerfile: a variant with a parent is built by "
                f"docker/overrides.Dockerfile; drop its `dockerfile` or its `parent`"
            )
        if variant.parent is not None and (variant.parent not in variants or variants[variant.parent].parent):
            raise MatrixError(
                f"{where}.variants.{name}.parent: {variant.parent!r} is not a variant of {fid} built "
                f"from requirements (declared: {', '.join(v for v in variants if v != name)})"
            )
    if not variants:
        raise MatrixError(f"{where}.variants: declare at least one variant")
    return Framework(
        fid,
        str(spec["family"]),
        str(spec["python"]),
        check_list(spec["tasks"], params.TASKS, f"{where}.tasks"),
        check_list(spec["precisions"], params.PRECISIONS, f"{where}.precisions"),
        variants,
    )


def arch_list(spec: Mapping[str, Any], key: str, pattern: str, example: str, where: str) -> tuple[str, ...]:
    """An optional list of architecture names such as sm_86 (gpu_archs) or compute_90 (ptx)."""
    archs = check_list(spec[key], None, f"{where}.{key}") if spec.get(key) else ()
    bad = [a for a in archs if not re.fullmatch(pattern, a)]
    if bad:
        raise MatrixError(f"{where}.{key}: {bad[0]!r} is not an architecture like {example}")
    return archs


def versions(value: Any, where: str) -> tuple[str, ...]:
    """An optional version ("13.0") or list of versions (["13.0", "12.9"]), as strings."""
    if value is None:
        return ()
    items = value if isinstance(value, list) else [value]
    bad = [v for v in items if not re.fullmatch(r"\d+(\.\d+)*", str(v))]
    if bad or not items:
        raise MatrixError(f'{where}: expected a version like "13.0" or a list of them, got {value!r}')
    return tuple(str(v) for v in items)


def parse_profile(
    name: str, spec: Any, frameworks: Mapping[str, Framework], defaults: Mapping[str, Any]
) -> dict[str, Any]:
    where = f"profiles.{name}"
    check_keys(
        spec, PROFILE_KEYS, where, required=("executor", "device", "data", "scale", "frameworks", "tasks", "precisions")
    )
    for key, known in (
        ("executor", EXECUTORS),
        ("device", params.DEVICES),
        ("data", DATA_KINDS),
        ("scale", params.SCALES),
    ):
        if spec[key] not in known:
            raise MatrixError(f"{where}.{key}: unknown value {spec[key]!r}; known: {', '.join(known)}")
    fws = check_list(spec["frameworks"], list(frameworks), f"{where}.frameworks")
    all_variants = sorted({v for f in fws for v in frameworks[f].variants})
    profile = dict(spec)
    profile["frameworks"] = fws
    if spec["executor"] == SYSTEM:  # an interpreter the user gives carries whatever it carries: no image variants
        if spec.get("variants", [SYSTEM]) != [SYSTEM]:
            raise MatrixError(
                f"{where}.variants: the system executor runs cells in an interpreter, not an image; "
                f"drop `variants` (its cells' variant is {SYSTEM!r})"
            )
        all_variants = [SYSTEM]
    profile["variants"] = check_list(spec.get("variants", all_variants), all_variants, f"{where}.variants")
    profile["tasks"] = check_list(spec["tasks"], params.TASKS, f"{where}.tasks")
    profile["precisions"] = check_list(spec["precisions"], params.PRECISIONS, f"{where}.precisions")
    profile["tunings"] = check_list(spec.get("tunings", [params.DEFAULT_TUNING]), params.TUNINGS, f"{where}.tunings")
    profile["gpus"] = check_list(spec.get("gpus", [1]), None, f"{where}.gpus", kind=int)
    for g in profile["gpus"]:
        check_positive(g, f"{where}.gpus")
    profile["repeats"] = int(check_positive(spec.get("repeats", defaults["repeats"]), f"{where}.repeats"))
    profile["exclude"] = check_exclude(spec.get("exclude"), f"{where}.exclude")
    profile["timeout_minutes"] = check_positive(
        spec.get("timeout_minutes", defaults["timeout_minutes"]), f"{where}.timeout_minutes"
    )
    return profile


def parse(doc: Any) -> Matrix:
    """Validate a loaded matrix document; every problem is a MatrixError naming the key."""
    check_keys(doc, TOP_KEYS, "matrix.yaml", required=("schema", "frameworks", "profiles"))
    if doc["schema"] != SCHEMA:
        raise MatrixError(f"schema: this code reads schema {SCHEMA}, the file says {doc['schema']!r}")
    defaults = {"repeats": 5, "timeout_minutes": 180, **(doc.get("defaults") or {})}
    check_keys(defaults, DEFAULT_KEYS, "defaults")
    check_keys(doc["frameworks"], doc["frameworks"] or {}, "frameworks")
    frameworks = {fid: parse_framework(fid, spec) for fid, spec in doc["frameworks"].items()}
    check_keys(doc["profiles"], doc["profiles"] or {}, "profiles")
    profiles = {name: parse_profile(name, spec, frameworks, defaults) for name, spec in doc["profiles"].items()}
    return Matrix(frameworks, profiles, check_exclude(doc.get("exclude"), "exclude"), defaults)


def check_exclude(rules: Any, where: str) -> tuple[dict[str, Any], ...]:
    """Exclusion rules, top-level (every profile) or a profile's own: each names cell axes and says why."""
    rules = rules or []
    if not isinstance(rules, list):
        raise MatrixError(f"{where}: expected a list of {{key: value, reason: text}} entries")
    for i, rule in enumerate(rules):
        check_keys(rule, set(CELL_AXES) | {"reason"}, f"{where}[{i}]", required=("reason",))
        if len(rule) < 2:
            raise MatrixError(f"{where}[{i}]: name at least one of {', '.join(CELL_AXES)} besides the reason")
    return tuple(rules)


def load(path: str | Path = ROOT / "matrix.yaml") -> Matrix:
    try:
        text = Path(path).read_text()
    except OSError as e:
        raise MatrixError(f"cannot read {path}: {e}") from e
    try:
        doc = yaml.load(text, Loader=UniqueKeyLoader)
    except yaml.YAMLError as e:
        raise MatrixError(f"{path} is not valid YAML: {e}") from e
    try:
        return parse(doc)
    except MatrixError as e:
        raise MatrixError(f"{path}: {e}") from None


# ---------------------------------------------------------------- expansion


def excluded(cell: Cell, rules: Iterable[Mapping[str, Any]]) -> bool:
    return any(all(getattr(cell, k) == v for k, v in rule.items() if k != "reason") for rule in rules)


def expand(matrix: Matrix, profile_name: str, executor: str | None = None) -> Plan:
    """The profile's cells: product of its axes, minus what a framework lacks and what `exclude` names. `executor`
    overrides the profile's; the system executor's cells have the one variant `system` (the interpreter given)."""
    if profile_name not in matrix.profiles:
        raise MatrixError(f"unknown profile {profile_name!r}; defined: {', '.join(matrix.profiles)}")
    p = matrix.profiles[profile_name]
    executor = executor or p["executor"]
    if executor not in EXECUTORS:
        raise MatrixError(f"unknown executor {executor!r}; known: {', '.join(EXECUTORS)}")
    rules = matrix.exclude + p["exclude"]
    cells: dict[
        Cell, None
    ] = {}  # a dict as an ordered set: membership in O(1) (a list made expansion quadratic in the cells)
    variants = (SYSTEM,) if executor == SYSTEM else p["variants"]
    for fid, task, variant, precision, gpus, tuning in itertools.product(
        p["frameworks"], p["tasks"], variants, p["precisions"], p["gpus"], p["tunings"]
    ):
        fw = matrix.frameworks[fid]
        if task not in fw.tasks or precision not in fw.precisions:
            continue
        if variant != SYSTEM and (variant not in fw.variants or fw.variants[variant].device != p["device"]):
            continue  # a CPU image in a GPU profile (or the reverse) measures nothing useful
        if task not in params.MULTI_DEVICE_TASKS:
            gpus = 1  # single-device tasks run once per other axes, whatever the GPU counts
        cell = Cell(fid, task, variant, precision, gpus, p["device"], p["data"], p["scale"], tuning)
        if cell not in cells and not excluded(cell, rules):
            cells[cell] = None
    if not cells:
        raise MatrixError(
            f"profiles.{profile_name}: expands to no cell (check its frameworks' tasks, precisions, "
            f"variants and device against the frameworks section, and the exclude rules)"
        )
    return Plan(profile_name, executor, p["repeats"], p["timeout_minutes"] * 60.0, tuple(cells))


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m scripts.plan.matrix", description="Validate matrix.yaml, list cells.")
    ap.add_argument("--matrix", default=ROOT / "matrix.yaml", type=Path, help="the matrix file (default: matrix.yaml)")
    ap.add_argument("--profile", default="demo", help="the profile to expand (default: demo)")
    args = ap.parse_args(argv)
    try:
        plan = expand(load(args.matrix), args.profile)
    except MatrixError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(f"profile {plan.profile}: {len(plan.cells)} cells via {plan.executor}")
    for cell in plan.cells:
        print(f"  {cell.id}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
