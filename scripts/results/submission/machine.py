"""What a run's records say of its machine: the description a submission states, what it lacks, its cell counts."""

import json
from collections import Counter
from collections.abc import Mapping
from typing import Any

from scripts.results.submission.spec import HOST_KEYS, STACK_KEYS, Records, stated_class
from shared.record import STATUSES


def host_value(system: Mapping[str, Any], key: str) -> Any:
    """One HOST_KEYS fact of a record's system block; for `gpus` the models its gpu_facts name (objects, as the
    schema has them), else its framework's names for them."""
    if key == "gpus":  # the host's GPU models (nvidia-smi), else the framework's names for them
        names = [g.get("name") for g in system.get("gpu_facts") or []]
        return sorted({str(n) for n in names or system.get("gpus") or [] if n})
    return system.get(key)


def machine_of(recs: Records) -> tuple[dict[str, Any], list[str]]:
    """(machine fingerprint, [disagreements]) from `recs` ({relative path: record}). Only runner-written records
    describe a machine (a host-written record of a crash names only the host)."""
    described = {path: r.system for path, r in recs.items() if stated_class(r)}
    machine: dict[str, Any] = {"machine_classes": sorted({s["machine_class"] for s in described.values()})}
    disagreements = []
    for key in HOST_KEYS:
        seen: dict[str, str] = {}
        for path, system in sorted(described.items()):
            value = host_value(system, key)
            if value not in (None, "", []):
                seen.setdefault(json.dumps(value, sort_keys=True), path)
        if len(seen) > 1:
            disagreements.append(f"{key}: " + ", ".join(f"{v} ({p})" for v, p in seen.items()))
        machine[key] = json.loads(next(iter(seen))) if seen else None
    stacks: dict[str, dict[str, set[str]]] = {}
    for path, system in sorted(described.items()):
        cell = recs[path].cell
        stack = stacks.setdefault(f"{cell.framework}:{cell.variant}", {key: set() for key in STACK_KEYS})
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


def incomplete(machine: dict[str, Any], recs: Records) -> list[str]:
    """What the machine description lacks for the cells `recs` ({path: record}) hold, one line each."""
    missing = [f"machine.{key}" for key in ("machine_classes", "cpu", "cpu_count") if not machine.get(key)]
    ok = [r for r in recs.values() if r.status == "ok"]  # the schema requires a cell
    if any(r.cell.device == "gpu" for r in ok):
        missing += [f"machine.{key} (the run has GPU cells)" for key in ("gpus", "driver") if not machine.get(key)]
    stacks = machine["stacks"] if isinstance(machine.get("stacks"), dict) else {}
    for r in ok:
        name = f"{r.cell.framework}:{r.cell.variant}"
        stack = stacks[name] if isinstance(stacks.get(name), dict) else {}
        keys = ("framework_version", "python") + (("cuda",) if r.cell.device == "gpu" else ())
        missing += [f"machine.stacks.{name}.{key}" for key in keys if stack.get(key) in (None, "", [])]
    return sorted(set(missing))


def statuses(recs: Records) -> dict[str, int]:
    """{status: how many records have it}, every status named (the manifest's `cells`)."""
    counts = Counter(r.status for r in recs.values())
    return {status: counts[status] for status in STATUSES}
