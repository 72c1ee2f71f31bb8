"""Pre-flight: which cells' images cannot run on this host's GPUs, decided before anything launches.

A legacy wheel carries compiled kernels for a fixed list of GPU architectures and no PTX to JIT from (MXNet 1.9.1:
sm_50…sm_86), so on a newer GPU (H100/H200 are sm_90) its first kernel launch fails with "no kernel image is available".
matrix.yaml declares such a variant's `gpu_archs`; a cell whose image lacks the host GPU's architecture is recorded
`skipped` with the reason, and the rest of the matrix runs, instead of crashing in the middle of a long run.
"""
import shutil
from dataclasses import dataclass

from scripts.compose import quiet


@dataclass(frozen=True)
class HostGpu:
    index: str
    name: str
    compute_capability: str   # "9.0", as nvidia-smi prints it

    @property
    def arch(self):
        return "sm_" + self.compute_capability.replace(".", "")


def host_gpus():
    """The host's GPUs from nvidia-smi (compute_cap needs driver 510+); () where there is no nvidia-smi or it cannot
    say, in which case nothing is skipped here and a mismatched image fails at run time with the driver's message."""
    if not shutil.which("nvidia-smi"):
        return ()
    out = quiet(["nvidia-smi", "--query-gpu=index,name,compute_cap", "--format=csv,noheader"])
    if out.returncode:
        return ()
    rows = [[part.strip() for part in line.split(",")] for line in out.stdout.splitlines() if line.strip()]
    return tuple(HostGpu(*row) for row in rows if len(row) == 3 and row[2].replace(".", "").isdigit())


def unfit_reason(cell, matrix, gpus):
    """Why `cell`'s image cannot run on any of `gpus`, or None (see `reason`)."""
    fw = matrix.frameworks[cell.framework]
    variant = fw.variants[cell.variant]
    return reason(cell, variant.image(fw.family), variant.gpu_archs, gpus)


def reason(cell, image, gpu_archs, gpus):
    """Why `image` cannot run `cell` on any of `gpus`, or None. Only GPU cells of variants that declare gpu_archs are
    limited; a host with several GPU models needs kernels for each, because a cell may be placed on any of them."""
    if cell.device != "gpu" or not gpu_archs:
        return None
    missing = [g for g in gpus if g.arch not in gpu_archs]
    if not missing:
        return None
    gpu = missing[0]
    return (f"{image} carries GPU kernels for {', '.join(gpu_archs)} only, and no PTX to "
            f"compile for newer GPUs; this host's GPU {gpu.index} ({gpu.name}) is {gpu.arch} (compute capability "
            f"{gpu.compute_capability}). Run this cell on an older GPU (matrix.yaml: frameworks.{cell.framework}."
            f"variants.{cell.variant}.gpu_archs)")


def unfit_cells(plan, matrix, gpus):
    """{cell id: reason} for every cell of `plan` that cannot run on `gpus`."""
    reasons = {c.id: unfit_reason(c, matrix, gpus) for c in plan.cells}
    return {cid: reason for cid, reason in reasons.items() if reason}
