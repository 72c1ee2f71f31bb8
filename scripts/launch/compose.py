"""The compose executor: a cell is `docker compose run --rm SERVICE …` in its framework's image for its variant.

Before anything launches it checks, in order, and stops with what to do: a docker CLI, an engine that answers,
Compose (v2 plugin, else v1 `docker-compose`), every image the plan needs, and for GPU cells the NVIDIA runtime and
the GPUs themselves. Each cell gets its own GPU set through ROSETTA_GPU_IDS (compose.gpu.yaml reserves them).
"""

import json
import os
import re
import shutil
import subprocess
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from scripts.launch.executors import (
    ExecutorError,
    RunSettings,
    collect_from_own_folder,
    kill_group,
    own_folder,
    popen,
    prepare_own_folder,
    quiet,
    runner_args,
    visible_gpus,
)
from scripts.paths import ROOT, files_hash
from scripts.plan.matrix import Cell, Matrix, Plan, Variant
from shared.record import git_commit
from shared.sysinfo import memory_gib, usable_cpus

COMPOSE_FILES = ("compose.yaml",)
GPU_FILE = "compose.gpu.yaml"


def docker_cli() -> str:
    """The docker CLI: ROSETTA_DOCKER, else Debian's /usr/bin/docker (BuildKit built in), else the one on PATH."""
    for candidate in (os.environ.get("ROSETTA_DOCKER"), "/usr/bin/docker", shutil.which("docker")):
        if candidate and Path(candidate).exists():
            return candidate
    raise ExecutorError(
        "no docker CLI found: install Docker Engine (Debian: `apt-get install docker.io`) "
        "or set ROSETTA_DOCKER to its path"
    )


def check_engine(docker: str) -> dict[str, Any]:
    info = quiet([docker, "info", "--format", "{{json .}}"])
    try:
        facts = json.loads(info.stdout) if info.returncode == 0 else {}
    except ValueError:
        facts = {}
    # Debian's CLI exits 0 without an engine and puts the error in the JSON's ServerErrors.
    errors = facts.get("ServerErrors") or ([] if facts else [(info.stderr or info.stdout).strip()[:200]])
    if errors:
        raise ExecutorError(
            f"no Docker engine answers ({errors[0]}): start it "
            "(`sudo systemctl start docker`; on a machine without systemd, `.ci/docker-setup.sh`)"
        )
    return facts


def cdi_has_nvidia(info: Mapping[str, Any]) -> bool:
    """Docker 28 lists CDI devices (DiscoveredDevices); older engines only name the folders, so read the specs."""
    if any(str(d.get("ID", "")).startswith("nvidia.com/") for d in info.get("DiscoveredDevices") or []):
        return True
    specs = [
        p
        for d in info.get("CDISpecDirs") or []
        for p in sorted(Path(d).glob("*"))
        if p.suffix in (".yaml", ".yml", ".json")
    ]
    for spec in specs:
        try:
            if "nvidia.com/" in spec.read_text(errors="replace"):
                return True
        except OSError:  # a spec we may not read (root-only folder) says nothing either way
            continue
    return False


def compose_cli(docker: str) -> tuple[str, ...]:
    """`docker compose` (v2) where the plugin exists, else Debian's `docker-compose` (v1.29); both read compose.yaml."""
    if quiet([docker, "compose", "version"]).returncode == 0:
        return (docker, "compose")
    if shutil.which("docker-compose"):
        return ("docker-compose",)
    raise ExecutorError("Docker Compose is missing: install the compose plugin (Compose v2) or `docker-compose`")


def missing_images(docker: str, images: Iterable[str]) -> list[str]:
    return [image for image in images if quiet([docker, "image", "inspect", image]).returncode != 0]


CODE_LABEL = "org.rosetta.code-hash"


def code_hash(family: str, variant: Variant, parent: Variant | None = None) -> str:
    """What an image of `family`'s `variant` (built on `parent`, where it has one) holds of this checkout: 16 hex
    digits of a SHA-256 over runners/, shared/, the shared Dockerfiles, docker/FAMILY/ and the variant's pins (its
    parent's too). `make images` writes it into the image (label CODE_LABEL, and ROSETTA_CODE_HASH for the
    records); an image whose label differs was built from other code and is refused, so a record never claims code
    its image does not hold."""
    paths = [
        *(ROOT / "runners").rglob("*"),
        *(ROOT / "shared").rglob("*"),
        *(ROOT / "docker").glob("*Dockerfile"),
        *(ROOT / "docker" / family).rglob("*"),
        ROOT / variant.requirements,
    ]
    if parent is not None:
        paths.append(ROOT / parent.requirements)
    return files_hash(
        (str(path.relative_to(ROOT)), path.read_bytes())
        for path in sorted({p for p in paths if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc"})
    )


def image_code_hash(docker: str, image: str) -> str | None:
    """The code-hash label of a local image; None where it has none (built before labels, or by hand)."""
    out = quiet([docker, "image", "inspect", "-f", f'{{{{ index .Config.Labels "{CODE_LABEL}" }}}}', image])
    label = out.stdout.strip() if out.returncode == 0 else ""
    return label if label and label not in ("<no value>", "unknown") else None


def stale_images(docker: str, wanted: Mapping[str, str]) -> dict[str, tuple[str | None, str]]:
    """{image: (its label, the checkout's hash)} for the images of `wanted` ({image: hash}) built from other code."""
    labels = {image: image_code_hash(docker, image) for image in wanted}
    return {image: (labels[image], expected) for image, expected in wanted.items() if labels[image] != expected}


def rebuild(images: Iterable[str], plan: Plan, matrix: Matrix) -> str:
    """The commands that build `images`, named by a framework id of the plan that runs in each (keras-tf, not the
    family keras, which `make images` would not know)."""
    framework_of: dict[str, str] = {}
    for cell in plan.cells:
        fw = matrix.frameworks[cell.framework]
        framework_of.setdefault(fw.variants[cell.variant].image(fw.family), cell.framework)
    return "; ".join(f"`make images FRAMEWORK={framework_of[image]} VARIANT={image.split(':')[1]}`" for image in images)


def wanted_hashes(plan: Plan, matrix: Matrix) -> dict[str, str]:
    """{image: code hash} of the images `plan`'s cells run in (each image hashed once, however many cells run in it)."""
    wanted = {}
    for cell in plan.cells:
        fw = matrix.frameworks[cell.framework]
        variant = fw.variants[cell.variant]
        image = variant.image(fw.family)
        if image not in wanted:
            wanted[image] = code_hash(fw.family, variant, fw.variants.get(variant.parent))
    return wanted


def cell_limits(gpus: int, gpu_count: int, cores: float | None = None, memory: float | None = None) -> tuple[str, str]:
    """(ROSETTA_CPUS, ROSETTA_MEMORY) of a cell: a CPU cell runs alone and gets the host's usable cores and all but
    1 GiB of its memory; a GPU cell, which shares the host with cells on other GPUs, the share of both its GPUs hold."""
    cores = cores or usable_cpus() or 1
    memory = memory or memory_gib() or 9
    share = min(gpus, gpu_count) / gpu_count if gpu_count else 1
    return f"{max(cores * share, 1):g}", f"{max(int((memory - 1) * share), 1)}g"


def images_of(plan: Plan, matrix: Matrix) -> list[str]:
    return sorted(
        {
            matrix.frameworks[c.framework].variants[c.variant].image(matrix.frameworks[c.framework].family)
            for c in plan.cells
        }
    )


@dataclass(frozen=True)
class ComposeExecutor:
    compose: tuple  # the compose command: ("docker", "compose") or ("docker-compose",)
    docker: str
    files: tuple = COMPOSE_FILES
    gpu_ids: tuple = ()  # GPUs cells are placed on; empty = CPU cells, one at a time
    root: Path = ROOT
    env: dict = field(default_factory=dict)
    project: str | None = None  # compose's project name (-p); None: compose's default, the checkout's folder name

    @classmethod
    def for_plan(cls, plan: Plan, matrix: Matrix) -> "ComposeExecutor":
        """Check everything the plan needs before launching any cell."""
        docker = docker_cli()
        info = check_engine(docker)
        compose = compose_cli(docker)
        missing = missing_images(docker, images_of(plan, matrix))
        if missing:
            raise ExecutorError(
                f"image(s) not built: {', '.join(missing)}; build with {rebuild(missing, plan, matrix)}"
            )
        stale = stale_images(docker, wanted_hashes(plan, matrix))
        if stale:
            found = ", ".join(
                f"{image} (holds code {label or 'of no known hash'}, this checkout's is {expected})"
                for image, (label, expected) in stale.items()
            )
            raise ExecutorError(
                f"image(s) built from other code than this checkout: {found}; their records would "
                f"claim code they do not run. Rebuild with {rebuild(stale, plan, matrix)}"
            )
        gpu_ids: tuple[str, ...] = ()
        files: tuple[str, ...] = COMPOSE_FILES
        if any(c.device == "gpu" for c in plan.cells):
            if "nvidia" not in (info.get("Runtimes") or {}) and not cdi_has_nvidia(info):
                raise ExecutorError(
                    "the Docker engine has no NVIDIA runtime: install the NVIDIA Container Toolkit "
                    "(`nvidia-ctk runtime configure --runtime=docker`, then restart Docker)"
                )
            gpu_ids = visible_gpus()
            if not gpu_ids:
                raise ExecutorError(
                    "no GPU visible: `nvidia-smi` lists none (install the NVIDIA driver), or set "
                    "ROSETTA_GPU_IDS_AVAILABLE=0,1,…"
                )
            files = COMPOSE_FILES + (GPU_FILE,)
        env = {
            "ROSETTA_UID": str(os.getuid()),
            "ROSETTA_GID": str(os.getgid()),
            "ROSETTA_GIT_COMMIT": git_commit(ROOT) or "",
        }
        return cls(compose, docker, files, gpu_ids, ROOT, env)

    def command(
        self, cell: Cell, out: Path, run: RunSettings, devices: Sequence[str] = ()
    ) -> tuple[list[str], dict[str, str]]:
        """The argv and environment of one cell: the results volume is the cell's own folder (own_folder), where the
        runner writes /results/ID.json; collect() moves it into the run afterwards."""
        inside = Path("/results") / Path(out).name
        cpus, memory = cell_limits(cell.gpus if cell.device == "gpu" else 0, len(self.gpu_ids))
        env = {
            **os.environ,
            **self.env,
            "ROSETTA_VARIANT": cell.variant,
            "ROSETTA_DATA": str(run.data_root),
            "ROSETTA_RESULTS": str(own_folder(out)),
            "ROSETTA_GPU_IDS": ",".join(devices),
            "ROSETTA_CPUS": cpus,
            "ROSETTA_MEMORY": memory,
            "COMPOSE_DOCKER_CLI_BUILD": "1",
            "DOCKER_BUILDKIT": "1",
            "ROSETTA_REGISTRY": "",  # the local rosetta/… names for_plan checked, whatever .env prefixes
            "ROSETTA_TWINS_SCRATCH": "",
        }  # the run prepared its data: a missing dataset is a failure, not made
        # --no-deps: a cell's container is the only one it starts (compose.yaml's services have no dependencies today;
        # this keeps it so if one is ever added).
        files = [arg for f in self.files for arg in ("-f", str(self.root / f))]
        project = ["-p", self.project] if self.project else []
        argv = [
            *self.compose,
            *files,
            *project,
            "run",
            "--rm",
            "--no-deps",
            "--name",
            container_name(run.run_id, cell.id),
            f"{cell.framework}-{cell.task}",
            *runner_args(cell, inside, run, "/data"),
        ]
        return argv, env

    def launch(
        self, cell: Cell, out: Path, log: Path, run: RunSettings, devices: Sequence[str] = ()
    ) -> subprocess.Popen[bytes]:
        prepare_own_folder(out)  # ours, before Docker would create it as root
        argv, env = self.command(cell, out, run, devices)
        proc: Any = popen(argv, log, env, cwd=self.root)  # carries its container's name for stop()
        proc.container = container_name(run.run_id, cell.id)
        return proc

    def stop(self, proc: Any) -> None:
        """Killing the compose client leaves the container running: remove the container itself."""
        quiet([self.docker, "rm", "-f", proc.container])
        kill_group(proc)

    def collect(self, out: Path) -> None:
        collect_from_own_folder(out)


def container_name(run_id: str, cell_id: str) -> str:
    return re.sub(r"[^a-zA-Z0-9_.-]", "-", f"rosetta-{run_id}-{cell_id}")
