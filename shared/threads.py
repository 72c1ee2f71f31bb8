"""One thread-count rule for every framework, from the cores this process may use (docs/design.md, "Trust").

A cell's process gets `intra_op` = its usable CPUs (affinity and the container's quota, shared.sysinfo.usable_cpus)
and `inter_op` = 1: every framework's intra-op pool, OpenMP, MKL and OpenBLAS use the cores the cell has and no more,
and independent ops do not run side by side on top of that (intra × inter threads on two cores is oversubscription:
TensorFlow's default inter-op pool is as large as the machine). A framework that splits the CPU into several devices
divides `intra_op` among them (per_device). The rule is applied as environment variables before the framework loads
(runners/__main__.py), so it reaches every library that reads them at start; a variable the user set is kept and
recorded as theirs. The record keeps what was applied and the CPU affinity (`system.threads`). Runs on Python 3.6.
"""

import os
from typing import Any, Dict, List, Mapping, MutableMapping, Optional

from shared import sysinfo

# variable → which count it carries
VARIABLES = (
    ("OMP_NUM_THREADS", "intra_op"),
    ("MKL_NUM_THREADS", "intra_op"),
    ("OPENBLAS_NUM_THREADS", "intra_op"),
    ("TF_NUM_INTRAOP_THREADS", "intra_op"),
    ("TF_NUM_INTEROP_THREADS", "inter_op"),
)
_applied: Dict[str, Any] = {}


def rule(usable: Optional[float]) -> Dict[str, int]:
    """{intra_op, inter_op} for a process that may use `usable` CPUs (a fractional quota rounds down, at least 1)."""
    return {"intra_op": max(1, int(usable or 1)), "inter_op": 1}


def per_device(intra_op: int, devices: int) -> int:
    """Threads each of `devices` CPU devices gets of the process's `intra_op`."""
    return max(1, int(intra_op) // max(1, int(devices)))


def affinity() -> Optional[List[int]]:
    """The CPUs this process may run on, or None where the platform does not say."""
    return sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None


def apply(environ: Optional[MutableMapping[str, str]] = None) -> Dict[str, Any]:
    """Set the rule's variables in `environ` (default os.environ) where the user has not; returns the record's
    `threads` block and keeps it for `applied`."""
    environ = os.environ if environ is None else environ
    usable = sysinfo.usable_cpus()
    counts = rule(usable)
    env, by = {}, {}
    for name, key in VARIABLES:
        if environ.get(name):
            by[name] = "user"
        else:
            environ[name] = str(counts[key])
            by[name] = "rule"
        env[name] = environ[name]
    _applied.clear()
    _applied.update({"usable_cpus": usable, "affinity": affinity(), **counts, "env": env, "set_by": by})
    return dict(_applied)


def applied(environ: Optional[Mapping[str, str]] = None) -> Dict[str, Any]:
    """The `threads` block of this process: what apply set, or (where it never ran: a runner called in-process) the
    variables as they are, with the affinity."""
    if _applied:
        return dict(_applied)
    environ = os.environ if environ is None else environ
    return {
        "usable_cpus": sysinfo.usable_cpus(),
        "affinity": affinity(),
        "intra_op": None,
        "inter_op": None,
        "env": {name: environ.get(name) for name, _ in VARIABLES},
        "set_by": None,
    }
