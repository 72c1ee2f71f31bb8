"""The container path: compose.yaml agrees with matrix.yaml, GPU reservations are right (read from `compose config`),
preflight errors say what to do, and — where a Docker engine runs (always in CI) — cells run in the images."""

import dataclasses
import json
import os
import re
import shutil
import subprocess

import pytest
import yaml
from conftest import IN_CI, ROOT

from scripts.launch import compose
from scripts.launch.compose import ComposeExecutor
from scripts.launch.executors import ExecutorError, RunSettings
from scripts.plan.matrix import Cell, expand, load
from scripts.run import execute
from shared.record import read_record

# One worker runs this file's tests in order, so its last test sees what the others left under the default project.
pytestmark = pytest.mark.xdist_group("compose")

COMPOSE = yaml.safe_load((ROOT / "compose.yaml").read_text())
TWINS_SERVICES = {name: s for name, s in COMPOSE["services"].items() if name.startswith("twins-")}
BENCHMARK_SERVICES = {
    name: s for name, s in COMPOSE["services"].items() if name != "data" and name not in TWINS_SERVICES
}


@pytest.mark.unit
def test_compose_services_and_matrix_agree_both_ways():
    matrix = load()
    declared = {f"{fid}-{task}" for fid, fw in matrix.frameworks.items() for task in fw.tasks}
    assert set(BENCHMARK_SERVICES) == declared
    for name, service in BENCHMARK_SERVICES.items():
        framework, task = service["command"]
        assert name == f"{framework}-{task}"
        family = matrix.frameworks[framework].family
        assert service["image"] == f"${{ROSETTA_REGISTRY:-}}rosetta/{family}:${{ROSETTA_VARIANT:-cpu}}"
        # no dependency Compose 1.29 could restart with another call's volumes; the family's twins service (for
        # keeping twins in the data folder) in the same image; the build that only names a missing image
        assert "depends_on" not in service
        assert TWINS_SERVICES[f"twins-{family}"]["image"] == service["image"]
        assert service["pull_policy"] == "never" and service["build"]["context"] == "docker/not-built"
        assert service["build"]["args"]["FAMILY"] == family
        assert matrix.frameworks[service["build"]["args"]["FRAMEWORK"]].family == family  # a `make images` id
    families = {matrix.frameworks[s["command"][0]].family for s in BENCHMARK_SERVICES.values()}
    assert {f"twins-{family}" for family in families} == set(TWINS_SERVICES)


@pytest.mark.unit
def test_benchmark_services_are_offline_with_read_only_data():
    for service in BENCHMARK_SERVICES.values():
        assert service["network_mode"] == "none"
        assert "${ROSETTA_DATA:-./data}:/data:ro" in service["volumes"]
        assert "${ROSETTA_RESULTS:-./results/compose}:/results" in service["volumes"]  # never results/ itself
        assert service["environment"]["ROSETTA_OUT_DIR"] == "/results"
    gpu = yaml.safe_load((ROOT / "compose.gpu.yaml").read_text())
    assert set(gpu["services"]) == set(BENCHMARK_SERVICES)
    for service in TWINS_SERVICES.values():  # the one writable /data a benchmark waits for: no network, no results
        assert service["network_mode"] == "none" and service["volumes"] == ["${ROSETTA_DATA:-./data}:/data"]
        assert service["command"] == ["${ROSETTA_DATASET:-synthetic}"] and "depends_on" not in service


def compose_command():
    if shutil.which("docker-compose"):
        return ["docker-compose"]
    if shutil.which("docker") and subprocess.run(["docker", "compose", "version"], capture_output=True).returncode == 0:
        return ["docker", "compose"]
    if IN_CI:
        pytest.fail("CI must have Docker Compose (.ci/docker-setup.sh installs it)")
    pytest.skip("no Docker Compose here")


@pytest.mark.integration
def test_gpu_host_selects_the_cuda_image_and_reserves_the_cells_gpus():
    env = {**os.environ, "ROSETTA_VARIANT": "cu130", "ROSETTA_GPU_IDS": "2,3", "ROSETTA_DEVICE": "gpu"}
    out = subprocess.run(
        [*compose_command(), "-f", "compose.yaml", "-f", "compose.gpu.yaml", "config"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    service = yaml.safe_load(out)["services"]["pytorch-densenet121"]
    assert service["image"] == "rosetta/pytorch:cu130"
    device = service["deploy"]["resources"]["reservations"]["devices"][0]
    assert device["driver"] == "nvidia" and device["capabilities"] == ["gpu"] and device["device_ids"] == ["2,3"]
    assert service["environment"]["ROSETTA_DEVICE"] == "gpu" and service["network_mode"] == "none"


@pytest.mark.unit
def test_cell_command_translates_paths_and_gpus(tmp_path):
    executor = ComposeExecutor(("docker", "compose"), "docker", ("compose.yaml", "compose.gpu.yaml"), ("0", "1"))
    cell = Cell("pytorch", "densenet121", "cu130", "bf16", 2, "gpu", "real", "full")
    out = tmp_path / "results" / "full-1" / "cells" / f"{cell.id}.json"
    argv, env = executor.command(cell, out, RunSettings("full-1", 5, 60.0, tmp_path / "data"), ("0", "1"))
    assert argv[argv.index("run") : argv.index("run") + 6] == [
        "run",
        "--rm",
        "--no-deps",
        "--name",
        "rosetta-full-1-" + cell.id,
        "pytorch-densenet121",
    ]
    args = argv[argv.index("pytorch-densenet121") + 1 :]
    assert args[:2] == ["pytorch", "densenet121"]
    assert args[args.index("--out") + 1] == f"/results/{cell.id}.json"
    assert args[args.index("--data") + 1] == "/data/real" and args[args.index("--gpus") + 1] == "2"
    assert env["ROSETTA_GPU_IDS"] == "0,1" and env["ROSETTA_VARIANT"] == "cu130"
    assert env["ROSETTA_RESULTS"] == str(out.parent / f".{cell.id}")  # the cell's own folder, not the run's
    assert env["ROSETTA_DATA"] == str(tmp_path / "data")
    assert env["ROSETTA_REGISTRY"] == ""  # the local names for_plan checked, whatever .env says
    assert env["ROSETTA_TWINS_SCRATCH"] == ""  # the run prepared its data: never made on the way
    assert "-p" not in argv[: argv.index("run")]
    named = ComposeExecutor(("docker", "compose"), "docker", project="rosetta-test-x")
    argv, _ = named.command(cell, out, RunSettings("full-1", 5, 60.0, tmp_path / "data"))
    assert argv[argv.index("-p") : argv.index("-p") + 2] == ["-p", "rosetta-test-x"] and argv.index("-p") < argv.index(
        "run"
    )


@pytest.mark.integration
def test_each_cell_gets_its_share_of_the_host(tmp_path, monkeypatch):
    """A CPU cell runs alone: all usable cores, all memory but 1 GiB. A GPU cell shares the host with cells on the
    other GPUs: its GPUs' share of both. compose.yaml turns them into cpus, mem_limit and memswap_limit."""
    monkeypatch.setattr(compose, "usable_cpus", lambda: 16)
    monkeypatch.setattr(compose, "memory_gib", lambda: 129.0)
    run = RunSettings("full-1", 5, 60.0, tmp_path / "data")
    out = tmp_path / "results" / "full-1" / "cells" / "x.json"
    cpu = ComposeExecutor(("docker", "compose"), "docker")
    _, env = cpu.command(Cell("pytorch", "cnn", "cpu", "fp32", 1, "cpu", "synthetic", "demo"), out, run)
    assert (env["ROSETTA_CPUS"], env["ROSETTA_MEMORY"]) == ("16", "128g")
    gpu = ComposeExecutor(("docker", "compose"), "docker", ("compose.yaml", "compose.gpu.yaml"), ("0", "1", "2", "3"))
    _, env = gpu.command(
        Cell("pytorch", "densenet121", "cu130", "fp32", 2, "gpu", "real", "full"), out, run, ("0", "1")
    )
    assert (env["ROSETTA_CPUS"], env["ROSETTA_MEMORY"]) == ("8", "64g")
    config = subprocess.run(
        [*compose_command(), "-f", "compose.yaml", "config"],
        cwd=ROOT,
        capture_output=True,
        env={**os.environ, **env},
        text=True,
        check=True,
    ).stdout
    for name, service in yaml.safe_load(config)["services"].items():
        if name != "data":
            assert float(service["cpus"]) == 8 and service["mem_limit"] in ("64g", 64 * 2**30), name
            assert service["memswap_limit"] == service["mem_limit"], name


@pytest.mark.unit
def test_no_engine_is_a_clear_error_before_launching(tmp_path, monkeypatch):
    fake = tmp_path / "docker"
    fake.write_text("#!/bin/sh\necho 'Cannot connect to the Docker daemon' >&2\nexit 1\n")
    fake.chmod(0o755)
    monkeypatch.setenv("ROSETTA_DOCKER", str(fake))
    with pytest.raises(ExecutorError, match="no Docker engine answers.*start it"):
        ComposeExecutor.for_plan(expand(load(), "containers"), load())


@pytest.mark.unit
def test_missing_image_and_missing_nvidia_runtime_are_named(monkeypatch):
    monkeypatch.setattr(compose, "docker_cli", lambda: "docker")
    monkeypatch.setattr(compose, "check_engine", lambda docker: {"Runtimes": {"runc": {}}})
    monkeypatch.setattr(compose, "compose_cli", lambda docker: ("docker-compose",))
    matrix = load()
    plan = expand(matrix, "full")
    monkeypatch.setattr(compose, "missing_images", lambda docker, images: [i for i in images if "cu128" in i])
    with pytest.raises(ExecutorError, match=r"rosetta/pytorch:cu128.*make images FRAMEWORK=pytorch VARIANT=cu128"):
        ComposeExecutor.for_plan(plan, matrix)
    monkeypatch.setattr(compose, "missing_images", lambda docker, images: [])
    monkeypatch.setattr(compose, "image_code_hash", lambda docker, image: "0123456789abcdef")  # built elsewhen
    with pytest.raises(
        ExecutorError,
        match=r"built from other code than this checkout: rosetta/pytorch:cu130 \(holds "
        r"code 0123456789abcdef.*make images FRAMEWORK=keras-tf VARIANT=cuda",
    ):
        ComposeExecutor.for_plan(plan, matrix)
    wanted = compose.wanted_hashes(plan, matrix)
    monkeypatch.setattr(compose, "image_code_hash", lambda docker, image: wanted[image])
    with pytest.raises(ExecutorError, match="no NVIDIA runtime: install the NVIDIA Container Toolkit"):
        ComposeExecutor.for_plan(plan, matrix)
    monkeypatch.setattr(compose, "check_engine", lambda docker: {"Runtimes": {"nvidia": {}}})
    monkeypatch.setattr(compose, "visible_gpus", lambda: ())
    with pytest.raises(ExecutorError, match="no GPU visible"):
        ComposeExecutor.for_plan(plan, matrix)


# ---------------------------------------------------------------- with an engine (CI always has one)


@pytest.fixture(scope="module")
def engine():
    try:
        docker = compose.docker_cli()
        compose.check_engine(docker)
        missing = compose.missing_images(docker, compose.images_of(expand(load(), "containers"), load()))
    except ExecutorError as e:
        if IN_CI:
            pytest.fail(f"CI must run the container tests: {e}")
        pytest.skip(str(e))
    if missing:
        message = f"images missing: {missing}; `make images PROFILE=containers`"
        pytest.fail(message) if IN_CI else pytest.skip(message)
    return docker


@pytest.mark.integration
def test_docker_compose_run_pytorch_cnn_alone(engine, by_hand, synthetic_data, tmp_path):
    results = tmp_path / "results"
    results.mkdir()
    env = {
        **os.environ,
        "ROSETTA_DATA": str(synthetic_data.parent),
        "ROSETTA_RESULTS": str(results),
        "ROSETTA_UID": str(os.getuid()),
        "ROSETTA_GID": str(os.getgid()),
        # the CPU path whatever a developer's `make setup` put in .env (shell variables win over it)
        "COMPOSE_FILE": "compose.yaml",
        "ROSETTA_VARIANT": "cpu",
        "ROSETTA_DEVICE": "cpu",
        "ROSETTA_CPUS": "1.5",
        "ROSETTA_MEMORY": "6g",
    }  # a limit the record must read back
    proc = subprocess.run(
        [*by_hand, "run", "--rm", "pytorch-cnn"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=900
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    record = read_record(results / "pytorch-cnn.json")
    assert record["status"] == "ok" and record["cell"]["scale"] == "tiny" and record["cell"]["data"] == "synthetic"
    assert record["system"]["image"] == "rosetta/pytorch:cpu"
    assert record["system"]["cpu_usable"] == 1.5 and record["system"]["memory_gib"] == 6.0
    assert record["system"]["build"]["frameworks"]["torch"] and record["system"]["build"]["cuda"]  # what it carries
    assert (results / "pytorch-cnn.json").stat().st_uid == os.getuid()


@pytest.mark.integration
def test_chainermn_runs_two_mpi_processes_inside_its_container(engine, by_hand, synthetic_data, tmp_path):
    """Data-parallel Chainer is `mpiexec -n 2` inside the container: MPI's shared-memory transport must work there
    (offline, as the service's user, with the capabilities compose.yaml grants it)."""
    results = tmp_path / "results"
    results.mkdir()
    env = {
        **os.environ,
        "ROSETTA_DATA": str(synthetic_data.parent),
        "ROSETTA_RESULTS": str(results),
        "ROSETTA_UID": str(os.getuid()),
        "ROSETTA_GID": str(os.getgid()),
    }
    proc = subprocess.run(
        [*by_hand, "run", "--rm", "-T", "chainer-densenet121", "chainer", "densenet121", "--gpus", "2"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    record = read_record(results / "chainer-densenet121.json")
    assert record["status"] == "ok", record["reason"]
    switches = record["system"]["switches"]
    assert record["metrics"]["devices"] == 2 and switches["processes"] == 2
    assert switches["data_parallel"] == "ChainerMN" and switches["communicator"] == "naive"


@pytest.mark.integration
def test_container_profile_through_the_compose_executor(engine, project, synthetic_data, tmp_path):
    matrix = load()
    plan = expand(matrix, "containers")
    run_dir = tmp_path / "containers-1"
    executor = dataclasses.replace(ComposeExecutor.for_plan(plan, matrix), project=project)
    execute(plan, executor, run_dir, RunSettings(run_dir.name, 1, 900.0, synthetic_data.parent))
    records = [read_record(run_dir / "cells" / f"{c.id}.json") for c in plan.cells]
    assert [r["status"] for r in records] == ["ok"] * len(plan.cells), [r["reason"] for r in records]
    assert {r["system"]["image"] for r in records} == {
        f"rosetta/{matrix.frameworks[c.framework].family}:cpu" for c in plan.cells
    }
    assert all(r["run_id"] == run_dir.name for r in records)


@pytest.mark.integration
def test_a_container_can_write_only_its_own_cells_folder(engine, project, synthetic_data, tmp_path):
    """The executor mounts RUN/cells/.ID/ at /results, never the run or results/: code in the container that tries
    to rewrite another cell's record, the reference records or a file beside the run reaches none of them."""
    results = tmp_path / "results"
    run_dir = results / "full-1"
    other = run_dir / "cells" / "other-cell.json"
    other.parent.mkdir(parents=True)
    other.write_text("{}")
    (results / "reference").mkdir()
    before = {p: p.read_bytes() for p in results.rglob("*") if p.is_file()}
    executor = ComposeExecutor(
        tuple(compose.compose_cli(engine)),
        engine,
        ("compose.yaml",),
        env={"ROSETTA_UID": str(os.getuid()), "ROSETTA_GID": str(os.getgid())},
        project=project,
    )
    cell = Cell("pytorch", "cnn", "cpu", "fp32", 1, "cpu", "synthetic", "tiny")
    out = run_dir / "cells" / f"{cell.id}.json"
    from scripts.launch.executors import prepare_own_folder

    prepare_own_folder(out)
    argv, env = executor.command(cell, out, RunSettings("full-1", 1, 60.0, synthetic_data.parent))
    attempts = (
        "echo x > /results/../cells/other-cell.json; echo x > /results/../../reference/forged.json; "
        "echo x > /results/../escape; mkdir -p /results/../x; ls -la /results/..; echo mine > /results/" + out.name
    )
    service = argv.index(f"{cell.framework}-{cell.task}")
    argv = argv[:service] + ["-T", "--entrypoint", "sh", argv[service], "-c", attempts]
    proc = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    executor.collect(out)
    assert out.read_text() == "mine\n"  # its own record came back
    after = {p: p.read_bytes() for p in results.rglob("*") if p.is_file() and p != out}
    assert after == before  # nothing else changed or appeared
    assert not (out.parent / f".{cell.id}").exists()


@pytest.mark.unit
def test_benchmark_services_are_hardened():
    """No capability (Chainer's SYS_PTRACE, for MPICH's pidfd_getfd, is the one exception), no privilege gain, the
    image read-only with a tmpfs for what frameworks write, a pid limit; nothing shared between cells but the
    read-only data (Theano's compile cache is a tmpfs of each cell's own, no named volume exists)."""
    assert "volumes" not in COMPOSE
    for name, service in BENCHMARK_SERVICES.items():
        assert all(v.startswith("${ROSETTA_") for v in service["volumes"]), name
        assert service["cap_drop"] == ["ALL"], name
        assert service.get("cap_add", []) == (["SYS_PTRACE"] if name.startswith("chainer-") else []), name
        assert "no-new-privileges:true" in service["security_opt"] and service["read_only"] is True, name
        assert any(t.startswith("/tmp:") for t in service["tmpfs"]) and service["pids_limit"] > 0, name


@pytest.mark.unit
def test_an_image_built_before_a_runner_change_is_refused(tmp_path, monkeypatch):
    """The code hash covers the runners, shared/, the Dockerfiles and the family's pins: change one runner line and
    every image of that checkout is stale (scripts.launch.images --if-stale rebuilds it, the executor refuses it)."""
    for folder in ("runners", "shared", "docker"):
        shutil.copytree(ROOT / folder, tmp_path / folder, ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(compose, "ROOT", tmp_path)
    fw = load().frameworks["pytorch"]
    cpu = fw.variants["cpu"]
    before = compose.code_hash("pytorch", cpu)
    assert before == compose.code_hash("pytorch", cpu) and len(before) == 16
    runner = tmp_path / "runners" / "pytorch" / "cnn.py"
    runner.write_text(runner.read_text() + "\n# changed\n")
    assert compose.code_hash("pytorch", cpu) != before
    (tmp_path / "runners" / "pytorch" / "__pycache__").mkdir(exist_ok=True)
    changed = compose.code_hash("pytorch", cpu)
    (tmp_path / "runners" / "pytorch" / "__pycache__" / "x.pyc").write_bytes(b"compiled")
    assert compose.code_hash("pytorch", cpu) == changed  # byte code is not code


# ---------------------------------------------------------------- `docker compose run SERVICE` by hand, on first use


@pytest.mark.integration
@pytest.mark.parametrize("registry", ["", "ghcr.io/owner/"])
def test_compose_config_names_images_with_and_without_a_registry(registry):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ROSETTA_", "COMPOSE_"))}
    env.update({"ROSETTA_VARIANT": "cu130", **({"ROSETTA_REGISTRY": registry} if registry else {})})
    out = subprocess.run(
        [*compose_command(), "-f", "compose.yaml", "config"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    services = yaml.safe_load(out)["services"]
    assert services["pytorch-cnn"]["image"] == f"{registry}rosetta/pytorch:cu130"
    assert services["twins-pytorch"]["image"] == f"{registry}rosetta/pytorch:cu130"
    assert services["keras-jax-gru"]["image"] == f"{registry}rosetta/keras:cu130"
    assert services["pytorch-cnn"]["build"]["args"] == {
        "FAMILY": "pytorch",
        "FRAMEWORK": "pytorch",
        "VARIANT": "cu130",
        "REGISTRY": registry,
    }


def project_env(data, results, **more):
    """A by-hand run: the CPU path whatever a developer's `make setup` put in .env (shell variables win over it)."""
    return {
        **os.environ,
        "ROSETTA_DATA": str(data),
        "ROSETTA_RESULTS": str(results),
        "ROSETTA_UID": str(os.getuid()),
        "ROSETTA_GID": str(os.getgid()),
        "COMPOSE_FILE": "compose.yaml",
        "ROSETTA_VARIANT": "cpu",
        "ROSETTA_DEVICE": "cpu",
        "ROSETTA_REGISTRY": "",
        "ROSETTA_CPUS": "2",
        "ROSETTA_MEMORY": "6g",
        **more,
    }


def default_project():
    """The project name compose gives a plain `docker compose run` in this checkout: COMPOSE_PROJECT_NAME, else the
    folder's name as Compose normalises it (1.29: lower case, only a-z 0-9 _ -)."""
    return os.environ.get("COMPOSE_PROJECT_NAME") or re.sub(r"[^-_a-z0-9]", "", ROOT.name.lower())


def left_under(project):
    """What exists of `project` (containers, also stopped ones; networks; volumes), by compose's own label."""
    docker, label = compose.docker_cli(), f"label=com.docker.compose.project={project}"
    found = {}
    for kind, argv in (
        ("containers", ["ps", "-a", "--format", "{{.Names}} ({{.Status}})"]),
        ("networks", ["network", "ls", "--format", "{{.Name}}"]),
        ("volumes", ["volume", "ls", "--format", "{{.Name}}"]),
    ):
        out = subprocess.run([docker, *argv, "--filter", label], capture_output=True, text=True, timeout=60)
        found[kind] = sorted(out.stdout.split("\n")[:-1]) if out.returncode == 0 else [f"?: {out.stderr.strip()}"]
    return found


@pytest.fixture
def project(tmp_path):
    """A compose project name of the test's own, taken down afterwards whatever the test did (containers of any of
    its services, orphans, networks, volumes), so that no test leaves anything a user's later call could reuse."""
    name = re.sub(r"[^-_a-z0-9]", "", f"rosetta-test-{os.getpid()}-{tmp_path.name}".lower())[:60]
    yield name
    down = [*compose_command(), "-f", "compose.yaml", "-p", name, "down", "--volumes", "--remove-orphans"]
    subprocess.run(down, cwd=ROOT, capture_output=True, timeout=300)


@pytest.fixture
def by_hand(project):
    """The compose command a user types, under the test's own project name."""
    try:
        compose.check_engine(compose.docker_cli())
    except ExecutorError as e:
        pytest.fail(str(e)) if IN_CI else pytest.skip(str(e))
    return [*compose_command(), "-p", project]


def pytorch_image_or_skip():
    if compose.missing_images(compose.docker_cli(), ["rosetta/pytorch:cpu"]):
        message = "rosetta/pytorch:cpu is not built: `make images FRAMEWORK=pytorch VARIANT=cpu`"
        pytest.fail(message) if IN_CI else pytest.skip(message)


@pytest.mark.integration
def test_an_image_that_is_not_built_is_named_with_the_command_that_builds_it(by_hand, tmp_path):
    """No pull from Docker Hub (whose rosetta/… is not ours): the image, its variant, and `make images`."""
    (tmp_path / "data").mkdir()
    env = project_env(tmp_path / "data", tmp_path, ROSETTA_VARIANT="cu999")
    proc = subprocess.run(
        [*by_hand, "run", "--rm", "pytorch-cnn"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
    )
    said = proc.stdout + proc.stderr
    assert proc.returncode != 0
    assert "rosetta/pytorch:cu999 is not on this host" in said, said[-3000:]
    assert "`make images FRAMEWORK=pytorch VARIANT=cu999`" in said and "make setup PULL=" in said
    assert "Pulling" not in said and "registry-1.docker.io" not in said and "pull access denied" not in said
    assert not (tmp_path / "data" / "synthetic").exists()


@pytest.mark.integration
def test_every_call_works_on_its_own_data_folder(by_hand, tmp_path):
    """Issue 28's sequences: two calls, each on a new empty data folder, both `ok` (the twin the task needs is made
    in that call's container, the data folder stays untouched and read-only); real data asked for and absent says
    what to do; the family's twins service keeps twins in the folder, and the next call reads them from there."""
    pytorch_image_or_skip()
    results = tmp_path / "results"
    results.mkdir()
    for name in ("first", "second"):
        data = tmp_path / name
        data.mkdir()
        proc = subprocess.run(
            [*by_hand, "run", "--rm", "pytorch-cnn"],
            cwd=ROOT,
            env=project_env(data, results),
            capture_output=True,
            text=True,
            timeout=900,
        )
        assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
        assert "] ok:" in proc.stdout and "made in the container for this call" in proc.stdout
        assert read_record(results / "pytorch-cnn.json")["status"] == "ok"
        assert list(data.iterdir()) == []  # /data stayed read-only
    assert not subprocess.run(
        [compose.docker_cli(), "ps", "-aq", "--filter", f"label=com.docker.compose.project={by_hand[-1]}"],
        capture_output=True,
        text=True,
    ).stdout.strip()  # nothing left to restart
    # asked for real data that is absent: nothing is made, the cell says what to do
    proc = subprocess.run(
        [*by_hand, "run", "--rm", "pytorch-cnn"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env=project_env(data, results, ROSETTA_DATASET="real"),
        timeout=600,
    )
    assert proc.returncode != 0
    assert "not prepared under /data/real" in proc.stdout + proc.stderr and "make data" in proc.stdout + proc.stderr
    assert list(data.iterdir()) == []
    # kept in the data folder by the family's twins service, then read from there
    proc = subprocess.run(
        [*by_hand, "run", "--rm", "twins-pytorch"],
        cwd=ROOT,
        env=project_env(data, results),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert {p.name for p in (data / "synthetic").iterdir()} == {"cifar10", "imdb", "chestxray14"}
    proc = subprocess.run(
        [*by_hand, "run", "--rm", "pytorch-cnn"],
        cwd=ROOT,
        env=project_env(data, results),
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert proc.returncode == 0 and "made in the container" not in proc.stdout, proc.stdout[-2000:]


@pytest.mark.integration
def test_an_unwritable_results_folder_is_named_before_any_work(by_hand, tmp_path):
    """Docker creates a missing ROSETTA_RESULTS as root while the service runs as ROSETTA_UID: one line naming the
    uid, the folder inside and on the host, and the fix; no traceback. (Mode 555 stops the owner too: the service
    has no capability, so not even uid 0 may override it.)"""
    pytorch_image_or_skip()
    data, results = tmp_path / "data", tmp_path / "results"
    data.mkdir()
    results.mkdir(mode=0o555)
    try:
        proc = subprocess.run(
            [*by_hand, "run", "--rm", "-T", "pytorch-cnn"],
            cwd=ROOT,
            env=project_env(data, results),
            capture_output=True,
            text=True,
            timeout=600,
        )
    finally:
        results.chmod(0o755)
    said = proc.stdout + proc.stderr
    assert proc.returncode != 0 and "Traceback" not in said, said[-3000:]
    assert (
        f"error: uid {os.getuid()} cannot write the results folder /results (on the host: {results}, ROSETTA_RESULTS)"
    ) in said, said[-3000:]
    assert "`make setup` does" in said and f"sudo chown -R {os.getuid()}:{os.getgid()} {results}" in said
    assert list(results.iterdir()) == [] and "cifar10" not in said  # nothing ran


# ---------------------------------------------------------------- last: what the suite left behind


@pytest.mark.integration
def test_after_the_compose_tests_the_users_own_call_works_and_nothing_is_left(engine, tmp_path):
    """Every compose test above ran under a project of its own and took it down: the checkout's default project
    holds no container, network or volume, so the user's plain `docker compose run --rm pytorch-cnn` (no -p) on a
    new data folder starts from nothing and ends `ok` — and leaves nothing either. (Last in this file, which one
    worker runs in order: xdist_group "compose".)"""
    pytorch_image_or_skip()
    before = left_under(default_project())
    assert before == {"containers": [], "networks": [], "volumes": before["volumes"]}, before
    if IN_CI:
        assert before["volumes"] == [], before  # a fresh machine: nothing of ours at all
    data, results = tmp_path / "data", tmp_path / "results"
    data.mkdir()
    results.mkdir()
    proc = subprocess.run(
        [*compose_command(), "run", "--rm", "pytorch-cnn"],
        cwd=ROOT,
        env=project_env(data, results),
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert json.loads((results / "pytorch-cnn.json").read_text())["status"] == "ok"
    assert left_under(default_project()) == before  # compose.yaml declares no named volume to make either
