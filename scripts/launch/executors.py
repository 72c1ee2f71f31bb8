"""Executors launch one cell and can stop it; they share this small protocol and nothing deeper (docs/style.md, rule 6).

    launch(cell, out, log, run, devices) -> Popen       start the cell on GPUs `devices` (empty on the CPU); the
                                                        runner writes its record to `out`
    stop(proc)                                          kill it and everything it started (timeouts)
    collect(out)                                        after it ended: bring its record to `out` (a container
                                                        writes into a folder of its own, never into the run)
    gpu_ids                                             the GPUs cells may be placed on (empty: one cell at a time)

The local executor runs `python -m runners …` in the framework's own virtual environment; the compose executor
(scripts/launch/compose.py) runs the same command inside the framework's image.
"""

import os
import shutil
import signal
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from scripts.paths import ROOT
from scripts.plan.matrix import Cell
from shared.params import DEFAULT_TUNING


class ExecutorError(Exception):
    """An executor cannot run here (no engine, image or GPU it needs); the message names what is missing and how to get
    it."""


def quiet(argv: Sequence[str]) -> subprocess.CompletedProcess[str]:
    """`argv`'s completed process, its output captured; one that cannot start or takes over a minute is exit 1."""
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as e:
        return subprocess.CompletedProcess(argv, 1, "", str(e))


def visible_gpus() -> tuple[str, ...]:
    """GPU indices on this host: ROSETTA_GPU_IDS_AVAILABLE (e.g. "0,1") if set, else what nvidia-smi lists."""
    if os.environ.get("ROSETTA_GPU_IDS_AVAILABLE"):
        return tuple(os.environ["ROSETTA_GPU_IDS_AVAILABLE"].split(","))
    if not shutil.which("nvidia-smi"):
        return ()
    out = quiet(["nvidia-smi", "--query-gpu=index", "--format=csv,noheader"])
    return tuple(line.strip() for line in out.stdout.splitlines() if line.strip()) if out.returncode == 0 else ()


@dataclass(frozen=True)
class RunSettings:
    """What every cell of one run shares."""

    run_id: str
    repeats: int
    timeout_s: float
    data_root: Path  # holds synthetic/ and real/


def runner_args(cell: Cell, out: str | Path, run: RunSettings, data_root: str | Path) -> list[str]:
    """The runner contract's arguments for `cell` (docs/design.md, "Runner contract")."""
    return [
        cell.framework,
        cell.task,
        "--data",
        str(Path(data_root) / cell.data),
        "--out",
        str(out),
        "--precision",
        cell.precision,
        "--gpus",
        str(cell.gpus),
        "--device",
        cell.device,
        "--scale",
        cell.scale,
        "--variant",
        cell.variant,
        "--run-id",
        run.run_id,
        "--repeats",
        str(run.repeats),
        *(["--tuning", cell.tuning] if cell.tuning != DEFAULT_TUNING else []),
    ]


def popen(
    argv: Sequence[str], log: Path, env: Mapping[str, str] | None = None, cwd: str | Path = ROOT
) -> subprocess.Popen[bytes]:
    """Start `argv` in its own process group (so a timeout kills its children too), output into `log`."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "w") as f:
        return subprocess.Popen(
            argv, stdout=f, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=cwd, env=env, start_new_session=True
        )


def own_folder(out: str | Path) -> Path:
    """RUN/cells/.ID/: the only folder a container running the cell whose record is `out` may write. Mounting the
    run folder, or anything above it, would let framework code rewrite other cells' records, the reference records
    verify trusts, or (on a CI runner) files the host's later steps run."""
    return Path(out).parent / f".{Path(out).stem}"


def prepare_own_folder(out: str | Path) -> Path:
    folder = own_folder(out)
    shutil.rmtree(folder, ignore_errors=True)  # nothing of an earlier attempt may pass as this one's record
    folder.mkdir(parents=True)
    return folder


def collect_from_own_folder(out: str | Path) -> None:
    """Move the record the container wrote (a plain file, nothing else) to `out`; drop the folder and the rest."""
    folder = own_folder(out)
    record = folder / Path(out).name
    if record.is_file() and not record.is_symlink():
        os.replace(record, out)
    shutil.rmtree(folder, ignore_errors=True)


def cache_env(cache: Path, theano_flags: str = "") -> dict[str, str]:
    """The environment that gives a cell the compile cache `cache` of its own: ROSETTA_CACHE_DIR, under which the
    Theano runners put base_compiledir (runners/lasagne/__init__.py, runners/keras2/__init__.py), and
    THEANO_FLAGS' base_compiledir itself, last, so that it wins over one the host's THEANO_FLAGS set (Theano keeps a
    key's last value). One cache shared by every cell would let any cell write compiled C that later cells load."""
    flag = f"base_compiledir={cache / 'theano'}"
    return {"ROSETTA_CACHE_DIR": str(cache), "THEANO_FLAGS": f"{theano_flags},{flag}" if theano_flags else flag}


def kill_group(proc: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()


@dataclass(frozen=True)
class LocalExecutor:
    """A subprocess per cell in the framework's virtual environment (`pythons`: framework id -> interpreter), with
    `root` (the checkout holding runners/ and shared/) as working directory and import path. A GPU cell sees only
    its own devices (CUDA_VISIBLE_DEVICES). `name` is what the records say ran them (system.executor): `local` (the
    frameworks' venvs) or `system` (one interpreter given as it is, scripts/run.py --python)."""

    pythons: dict
    root: Path = ROOT
    gpu_ids: tuple = ()
    name: str = "local"
    site: tuple = ()  # folders of packages installed beside the interpreter's own (make gpu-check: Keras)

    def launch(
        self, cell: Cell, out: Path, log: Path, run: RunSettings, devices: Sequence[str] = ()
    ) -> subprocess.Popen[bytes]:
        cache = prepare_own_folder(out) / "cache"  # this cell's own, new and empty (as compose's tmpfs at /cache)
        cache.mkdir()
        env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join([str(self.root), *map(str, self.site)]),
            "PYTHONUNBUFFERED": "1",
            "ROSETTA_EXECUTOR": self.name,
            **cache_env(cache, os.environ.get("THEANO_FLAGS", "")),
        }
        if devices:
            env["CUDA_VISIBLE_DEVICES"] = ",".join(devices)
        argv = [str(self.pythons[cell.framework]), "-m", "runners", *runner_args(cell, out, run, run.data_root)]
        return popen(argv, log, env, cwd=self.root)

    def stop(self, proc: subprocess.Popen[bytes]) -> None:
        kill_group(proc)

    def collect(self, out: Path) -> None:
        """The runner wrote `out` itself; its compile cache goes (own_folder)."""
        shutil.rmtree(own_folder(out), ignore_errors=True)


@dataclass(frozen=True)
class SlurmContainerExecutor:
    """A cell inside a Slurm allocation, in its image through the site's container runtime (scripts/launch/slurm.py):

        pyxis      srun --container-image=PREFIXrosetta/FAMILY:VARIANT --container-mounts=DATA:/data:ro,…
                   (PREFIX: where enroot finds the images, e.g. `registry.example.org#`, or empty for Docker Hub)
        apptainer  apptainer run --nv --bind … PREFIX/rosetta_FAMILY_VARIANT.sif
                   (PREFIX: a folder of .sif files, e.g. made with `apptainer build X.sif docker-daemon://IMAGE`)

    Slurm has already given the job its GPUs (CUDA_VISIBLE_DEVICES); both runtimes pass them into the container.
    Apptainer runs with --containall: no home, no host /tmp or /var/tmp, no working directory, a clean environment
    (only what the cell needs is passed in), its own PID and IPC namespaces; the only host paths the container sees
    are the data (read-only) and the cell's own folder.
    `images`: {cell id: image} from the plan file; `code_hashes`: {cell id: the code hash its image must hold}
    (scripts/launch/compose.py's code_hash of this checkout), checked against the record by scripts.run.run_cell."""

    runtime: str
    images: dict
    prefix: str = ""
    gpu_ids: tuple = ()
    code_hashes: dict | None = None

    def expected_code_hash(self, cell: Cell) -> str | None:
        return (self.code_hashes or {}).get(cell.id)

    def command(self, cell: Cell, out: Path, run: RunSettings) -> list[str]:
        inside = Path("/results") / Path(out).name  # the cell's own folder (own_folder) at /results
        data = f"{run.data_root}:/data:ro,{own_folder(out)}:/results"
        args = runner_args(cell, inside, run, "/data")
        image = self.images[cell.id]
        if self.runtime == "pyxis":
            return [
                "srun",
                "--ntasks=1",
                f"--container-image={self.prefix}{image}",
                f"--container-mounts={data}",
                "--container-workdir=/app",
                "--no-container-mount-home",
                "python",
                "-m",
                "runners",
                *args,
            ]
        if self.runtime == "apptainer":
            sif = Path(self.prefix or ".") / (image.replace("/", "_").replace(":", "_") + ".sif")
            passed = [
                f"{k}={os.environ[k]}"
                for k in ("CUDA_VISIBLE_DEVICES", "ROSETTA_HOST", "ROSETTA_GIT_COMMIT")
                if os.environ.get(k)
            ] + ["PYTHONUNBUFFERED=1"]
            return [
                "apptainer",
                "run",
                "--nv",
                "--containall",
                "--no-home",
                "--pwd",
                "/app",
                "--bind",
                data,
                *(word for pair in passed for word in ("--env", pair)),
                str(sif),
                *args,
            ]
        raise ValueError(f"unknown container runtime {self.runtime!r}; known: pyxis, apptainer")

    def launch(
        self, cell: Cell, out: Path, log: Path, run: RunSettings, devices: Sequence[str] = ()
    ) -> subprocess.Popen[bytes]:
        prepare_own_folder(out)
        return popen(self.command(cell, out, run), log, {**os.environ, "PYTHONUNBUFFERED": "1"})

    def stop(self, proc: subprocess.Popen[bytes]) -> None:
        kill_group(proc)

    def collect(self, out: Path) -> None:
        collect_from_own_folder(out)
