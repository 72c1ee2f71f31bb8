"""What a plan needs on this host before any of its cells launches, whichever backend launches them (the local run,
a Slurm submission, one cell of a GitHub Actions job or a Kubernetes pod): its data made or found, and each
framework's environment built or the reason it cannot be.
"""

from pathlib import Path

from scripts.launch.venvs import EnvBuildError, EnvError, ensure, prepare_system
from scripts.plan.matrix import Matrix, Plan
from shared import datasets, params


def check_data(plan: Plan, data_root: str | Path) -> None:
    """Synthetic data is generated when missing; real data must have been prepared (`make data`) before a run."""
    needed = {params.task_params(c.task)["dataset"] for c in plan.cells if c.task != "resnet50"}
    kinds = {c.data for c in plan.cells}
    for kind in kinds:
        root = Path(data_root) / kind
        missing = [d for d in sorted(needed) if not (root / d / "manifest.json").exists()]
        if missing and kind == "synthetic":
            datasets.prepare(root, synthetic=True, datasets=missing)
        elif missing:
            raise datasets.DataError(
                f"real data not prepared under {root}: {', '.join(missing)}; run `make data` first"
            )


def local_environments(
    plan: Plan, matrix: Matrix, refused: str | None = None
) -> tuple[dict[str, Path], dict[str, tuple[str, str]]]:
    """Each framework's venv, built if needed: ({framework: python}, {framework: (status, reason)} for those that
    could not be built). The Debian packages the plan's families need are installed first, in one go, unless
    `refused` says why not (scripts/launch/syspackages.py). Something absent (no python3.6 for CNTK, no OpenMPI where
    nothing may install it) skips that framework's cells with the command that fixes it; a failed pip install fails
    them with pip's last lines (a broken install, retried by --resume); the other frameworks run."""
    frameworks = [matrix.frameworks[fid] for fid in dict.fromkeys(c.framework for c in plan.cells)]
    absent = prepare_system(frameworks, refused)
    pythons, unavailable = {}, {fid: ("skipped", reason) for fid, reason in absent.items()}
    for framework in frameworks:
        if framework.id in absent:
            continue
        try:
            pythons[framework.id] = ensure(framework)
        except EnvError as e:
            unavailable[framework.id] = ("skipped", str(e))
        except EnvBuildError as e:
            unavailable[framework.id] = ("failed", str(e))
    return pythons, unavailable
