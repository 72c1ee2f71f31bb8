"""Pre-flight: which cells' images cannot run on this host's GPUs, decided before anything launches.

An image carries compiled kernels (cubins) for a fixed list of GPU architectures and maybe PTX, which the driver can
JIT-compile for newer GPUs; its CUDA runtime needs a minimum driver. matrix.yaml declares each GPU variant's
`gpu_archs`, `ptx` and `cuda` (and `make images` refuses an image whose own report differs), so a cell that cannot run
here is recorded `skipped` with the reason, and the rest of the matrix runs, instead of crashing in the middle of a
long run with "no kernel image is available" or "CUDA driver version is insufficient":
- no cubin of the GPU's major version at or below its minor (sm_80 runs on sm_86, not on sm_90), and no PTX at or
  below its architecture;
- a driver older than the image's CUDA runtime needs (minor-version compatibility), or, where only PTX fits, older
  than the exact release that wrote the PTX.
"""

import shutil
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from scripts.launch.executors import quiet
from scripts.plan.matrix import Cell, Matrix, Plan
from shared.buildinfo import min_driver, runs

# The driver that shipped with each CUDA release: JIT-compiling PTX needs at least this one (CUDA's release notes).
JIT_DRIVER = {
    "10.0": "410.48",
    "10.2": "440.33",
    "11.2": "460.27.03",
    "11.7": "515.43.04",
    "11.8": "520.61.05",
    "12.8": "570.26",
    "12.9": "575.51.03",
    "13.0": "580.65.06",
}


@dataclass(frozen=True)
class HostGpu:
    index: str
    name: str
    compute_capability: str  # "9.0", as nvidia-smi prints it
    driver: str | None = None  # "570.86.15"; None where unknown (then no driver check)

    @property
    def arch(self) -> str:
        return "sm_" + self.compute_capability.replace(".", "")


def host_gpus() -> tuple[HostGpu, ...]:
    """The host's GPUs from nvidia-smi (compute_cap needs driver 510+); () where there is no nvidia-smi or it cannot
    say, in which case nothing is skipped here and a mismatched image fails at run time with the driver's message."""
    if not shutil.which("nvidia-smi"):
        return ()
    out = quiet(["nvidia-smi", "--query-gpu=index,name,compute_cap,driver_version", "--format=csv,noheader"])
    if out.returncode:
        return ()
    rows = [[part.strip() for part in line.split(",")] for line in out.stdout.splitlines() if line.strip()]
    return tuple(HostGpu(*row) for row in rows if len(row) == 4 and row[2].replace(".", "").isdigit())


def version(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split(".") if part.isdigit())


def unfit_reason(cell: Cell, matrix: Matrix, gpus: Iterable[HostGpu]) -> str | None:
    """Why `cell`'s image cannot run on any of `gpus`, or None (see `reason`)."""
    fw = matrix.frameworks[cell.framework]
    if cell.variant not in fw.variants:  # the system executor's cells: no image whose kernels could be known
        return None
    variant = fw.variants[cell.variant]
    return reason(cell, variant.image(fw.family), variant.gpu_archs, gpus, variant.ptx, variant.cuda)


def reason(
    cell: Cell,
    image: str,
    gpu_archs: Sequence[str],
    gpus: Iterable[HostGpu],
    ptx: Sequence[str] = (),
    cuda: Sequence[str] = (),
) -> str | None:
    """Why `image` cannot run `cell` on any of `gpus`, or None. Only GPU cells are limited, by the kernels where the
    variant declares them and by the driver where it declares its CUDA; a host with several GPU models must fit each,
    because a cell may be placed on any of them."""
    if cell.device != "gpu":
        return None
    where = f"matrix.yaml: frameworks.{cell.framework}.variants.{cell.variant}"
    for gpu in gpus:
        native = not gpu_archs or runs(gpu_archs, (), gpu.arch)
        if not native and not runs((), ptx, gpu.arch):
            return (
                f"{image} carries GPU kernels for {', '.join(gpu_archs)} only"
                f"{f' and PTX for {ptx[-1]}' if ptx else ', and no PTX to compile for newer GPUs'}; this "
                f"host's GPU {gpu.index} ({gpu.name}) is {gpu.arch} (compute capability {gpu.compute_capability})."
                f" Run this cell on a GPU its kernels cover ({where}.gpu_archs)"
            )
        for runtime in cuda if gpu.driver else ():
            needed = (JIT_DRIVER.get(".".join(runtime.split(".")[:2])) if not native else None) or min_driver(runtime)
            if needed and gpu.driver and version(gpu.driver) < version(needed):
                how = "to JIT-compile its PTX for" if not native else "for CUDA"
                return (
                    f"{image} needs NVIDIA driver {needed} or newer {how} {runtime if native else gpu.arch} "
                    f"(its CUDA runtime is {runtime}); this host's GPU {gpu.index} ({gpu.name}) has driver "
                    f"{gpu.driver}. Update the driver, or run a variant with an older CUDA ({where}.cuda)"
                )
    return None


def unfit_cells(plan: Plan, matrix: Matrix, gpus: Iterable[HostGpu]) -> dict[str, str]:
    """{cell id: reason} for every cell of `plan` that cannot run on `gpus`."""
    reasons = {c.id: unfit_reason(c, matrix, gpus) for c in plan.cells}
    return {cid: reason for cid, reason in reasons.items() if reason}
