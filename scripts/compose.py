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
from dataclasses import dataclass, field
from pathlib import Path

from scripts.executors import kill_group, popen, runner_args
from scripts.matrix import ROOT
from shared.record import git_commit

COMPOSE_FILES = ("compose.yaml",)
GPU_FILE = "compose.gpu.yaml"


class ExecutorError(Exception):
    """The container path cannot run here; the message names what is missing and how to get it."""


def docker_cli():
    """The docker CLI: ROSETTA_DOCKER, else Debian's /usr/bin/docker (BuildKit built in), else the one on PATH."""
    for candidate in (os.environ.get("ROSETTA_DOCKER"), "/usr/bin/docker", shutil.which("docker")):
        if candidate and Path(candidate).exists():
            return candidate
    raise ExecutorError("no docker CLI found: install Docker Engine (Debian: `apt-get install docker.io`) "
                        "or set ROSETTA_DOCKER to its path")


def quiet(argv):
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as e:
        return subprocess.CompletedProcess(argv, 1, "", str(e))


def check_engine(docker):
    info = quiet([docker, "info", "--format", "{{json .}}"])
    try:
        facts = json.loads(info.stdout) if info.returncode == 0 else {}
    except ValueError:
        facts = {}
    # Debian's CLI exits 0 without an engine and puts the error in the JSON's ServerErrors.
    errors = facts.get("ServerErrors") or ([] if facts else [(info.stderr or info.stdout).strip()[:200]])
    if errors:
        raise ExecutorError(f"no Docker engine answers ({errors[0]}): start it "
                            "(`sudo systemctl start docker`; on a machine without systemd, `.ci/docker-setup.sh`)")
    return facts


def cdi_has_nvidia(info):
    """Docker 28 lists CDI devices (DiscoveredDevices); older engines only name the folders, so read the specs."""
    if any(str(d.get("ID", "")).startswith("nvidia.com/") for d in info.get("DiscoveredDevices") or []):
        return True
    specs = [p for d in info.get("CDISpecDirs") or [] for p in sorted(Path(d).glob("*"))
             if p.suffix in (".yaml", ".yml", ".json")]
    for spec in specs:
        try:
            if "nvidia.com/" in spec.read_text(errors="replace"):
                return True
        except OSError:    # a spec we may not read (root-only folder) says nothing either way
            continue
    return False


def compose_cli(docker):
    """`docker compose` (v2) where the plugin exists, else Debian's `docker-compose` (v1.29); both read compose.yaml."""
    if quiet([docker, "compose", "version"]).returncode == 0:
        return (docker, "compose")
    if shutil.which("docker-compose"):
        return ("docker-compose",)
    raise ExecutorError("Docker Compose is missing: install the compose plugin (Compose v2) or `docker-compose`")


def missing_images(docker, images):
    return [image for image in images if quiet([docker, "image", "inspect", image]).returncode != 0]


def visible_gpus():
    """GPU indices on this host: ROSETTA_GPU_IDS_AVAILABLE (e.g. "0,1") if set, else what nvidia-smi lists."""
    if os.environ.get("ROSETTA_GPU_IDS_AVAILABLE"):
        return tuple(os.environ["ROSETTA_GPU_IDS_AVAILABLE"].split(","))
    if not shutil.which("nvidia-smi"):
        return ()
    out = quiet(["nvidia-smi", "--query-gpu=index", "--format=csv,noheader"])
    return tuple(line.strip() for line in out.stdout.splitlines() if line.strip()) if out.returncode == 0 else ()


def images_of(plan, matrix):
    return sorted({matrix.frameworks[c.framework].variants[c.variant].image(matrix.frameworks[c.framework].family)
                   for c in plan.cells})


@dataclass(frozen=True)
class ComposeExecutor:
    compose: tuple                 # the compose command: ("docker", "compose") or ("docker-compose",)
    docker: str
    files: tuple = COMPOSE_FILES
    gpu_ids: tuple = ()            # GPUs cells are placed on; empty = CPU cells, one at a time
    root: Path = ROOT
    env: dict = field(default_factory=dict)

    @classmethod
    def for_plan(cls, plan, matrix):
        """Check everything the plan needs before launching any cell."""
        docker = docker_cli()
        info = check_engine(docker)
        compose = compose_cli(docker)
        missing = missing_images(docker, images_of(plan, matrix))
        if missing:
            hints = "; ".join(f"`make images FRAMEWORK={m.split('/')[1].split(':')[0]} VARIANT={m.split(':')[1]}`"
                              for m in missing)
            raise ExecutorError(f"image(s) not built: {', '.join(missing)}; build with {hints}")
        gpu_ids, files = (), COMPOSE_FILES
        if any(c.device == "gpu" for c in plan.cells):
            if "nvidia" not in (info.get("Runtimes") or {}) and not cdi_has_nvidia(info):
                raise ExecutorError("the Docker engine has no NVIDIA runtime: install the NVIDIA Container Toolkit "
                                    "(`nvidia-ctk runtime configure --runtime=docker`, then restart Docker)")
            gpu_ids = visible_gpus()
            if not gpu_ids:
                raise ExecutorError("no GPU visible: `nvidia-smi` lists none (install the NVIDIA driver), or set "
                                    "ROSETTA_GPU_IDS_AVAILABLE=0,1,…")
            files = COMPOSE_FILES + (GPU_FILE,)
        env = {"ROSETTA_UID": str(os.getuid()), "ROSETTA_GID": str(os.getgid()),
               "ROSETTA_GIT_COMMIT": git_commit(ROOT) or ""}
        return cls(compose, docker, files, gpu_ids, ROOT, env)

    def command(self, cell, out, run, devices=()):
        """The argv and environment of one cell: the record path is translated into the container's /results."""
        results = Path(out).parents[2]   # results/RUN/cells/ID.json: the results volume is results/
        inside = Path("/results") / Path(out).relative_to(results)
        env = {**os.environ, **self.env, "ROSETTA_VARIANT": cell.variant, "ROSETTA_DATA": str(run.data_root),
               "ROSETTA_RESULTS": str(results), "ROSETTA_GPU_IDS": ",".join(devices),
               "COMPOSE_DOCKER_CLI_BUILD": "1", "DOCKER_BUILDKIT": "1"}
        files = [arg for f in self.files for arg in ("-f", str(self.root / f))]
        argv = [*self.compose, *files, "run", "--rm", "--name", container_name(run.run_id, cell.id),
                f"{cell.framework}-{cell.task}", *runner_args(cell, inside, run, "/data")]
        return argv, env

    def launch(self, cell, out, log, run, devices=()):
        Path(out).parent.mkdir(parents=True, exist_ok=True)  # ours, before Docker would create it as root
        argv, env = self.command(cell, out, run, devices)
        proc = popen(argv, log, env, cwd=self.root)
        proc.container = container_name(run.run_id, cell.id)
        return proc

    def stop(self, proc):
        """Killing the compose client leaves the container running: remove the container itself."""
        quiet([self.docker, "rm", "-f", proc.container])
        kill_group(proc)


def container_name(run_id, cell_id):
    return re.sub(r"[^a-zA-Z0-9_.-]", "-", f"rosetta-{run_id}-{cell_id}")
