"""`make setup` (scripts/launch/setup.py): the GPU/CPU decision from a fake Docker engine and a fake nvidia-smi, the
.env it writes (user lines kept, reruns idempotent, --cpu/--gpu), and what the real docker-compose 1.29 makes of that
.env."""

import json
import os
import shutil
import subprocess
import sys

import pytest
import yaml
from conftest import IN_CI, ROOT

from shared.sysinfo import memory_gib, usable_cpus

H200 = "GPU 0: NVIDIA H200 (UUID: GPU-5f1c0e4b-0000-0000-0000-000000000000)"
CDI_SPEC = "cdiVersion: 0.5.0\nkind: nvidia.com/gpu\ndevices:\n  - name: '0'\n"


def fake_host(tmp_path, info=None, gpus=()):
    """A docker that answers `info` with `info` (None: no engine) and an nvidia-smi that lists `gpus` (none: fails).
    Returns the environment a setup run sees them through: ROSETTA_DOCKER and PATH."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    if info is not None:
        (bin_dir / "info.json").write_text(json.dumps(info))
    scripts = {
        "docker": '#!/bin/sh\n[ "$1" = info ] && cat "$(dirname "$0")/info.json" && exit 0\n'
        'echo "Cannot connect to the Docker daemon" >&2\nexit 1\n',
        "nvidia-smi": "#!/bin/sh\n"
        + (
            "".join(f"echo '{g}'\n" for g in gpus)
            if gpus
            else "echo 'NVIDIA-SMI has failed because it could not communicate with the NVIDIA driver.'\nexit 9\n"
        ),
    }
    for name, text in scripts.items():
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ROSETTA_", "COMPOSE_"))}
    return {**env, "ROSETTA_DOCKER": str(bin_dir / "docker"), "PATH": f"{bin_dir}:{env['PATH']}"}


GPU_HOST = {
    "Runtimes": {"nvidia": {"path": "nvidia-container-runtime"}, "runc": {"path": "runc"}},
    "CDISpecDirs": ["/etc/cdi", "/var/run/cdi"],
}
CPU_HOST = {"Runtimes": {"runc": {"path": "runc"}}, "CDISpecDirs": ["/etc/cdi", "/var/run/cdi"]}


def setup(env, env_file, *flags):
    proc = subprocess.run(
        [sys.executable, "-m", "scripts.launch.setup", "--env-file", str(env_file), *flags],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc


def values(env_file):
    return dict(line.split("=", 1) for line in env_file.read_text().splitlines() if line and not line.startswith("#"))


# A cell by hand may use the whole host less 1 GiB of memory (compose.yaml's cpus and mem_limit; the host's facts)
LIMITS = {"ROSETTA_CPUS": f"{usable_cpus():g}", "ROSETTA_MEMORY": f"{int(memory_gib() - 1)}g"}
GPU_VALUES = {
    "COMPOSE_FILE": "compose.yaml:compose.gpu.yaml",
    "ROSETTA_DEVICE": "gpu",
    "ROSETTA_VARIANT": "gpu",
    "ROSETTA_UID": str(os.getuid()),
    "ROSETTA_GID": str(os.getgid()),
    **LIMITS,
}
CPU_VALUES = {**GPU_VALUES, "COMPOSE_FILE": "compose.yaml", "ROSETTA_DEVICE": "cpu", "ROSETTA_VARIANT": "cpu"}


@pytest.mark.unit
def test_nvidia_runtime_and_a_gpu_choose_the_gpu_images(tmp_path):
    proc = setup(fake_host(tmp_path, GPU_HOST, [H200]), tmp_path / ".env")
    assert values(tmp_path / ".env") == GPU_VALUES
    assert "NVIDIA runtime in Docker and 1 GPU(s)" in proc.stdout and "GPU images" in proc.stdout


@pytest.mark.unit
def test_cdi_specs_for_nvidia_count_as_the_runtime(tmp_path):
    (tmp_path / "cdi").mkdir()
    (tmp_path / "cdi" / "nvidia.yaml").write_text(CDI_SPEC)
    info = {**CPU_HOST, "CDISpecDirs": [str(tmp_path / "cdi")]}
    setup(fake_host(tmp_path, info, [H200]), tmp_path / ".env")
    assert values(tmp_path / ".env")["ROSETTA_VARIANT"] == "gpu"


@pytest.mark.parametrize(
    "info, gpus, said",
    [
        (CPU_HOST, [H200], "no NVIDIA runtime in Docker: CPU images"),  # CDI folders alone (every engine lists them)
        (GPU_HOST, [], "`nvidia-smi -L` lists no GPU: CPU images"),
        (None, [H200], "no Docker engine answers: CPU images"),
        ({"ServerErrors": ["Cannot connect to the Docker daemon"]}, [H200], "no Docker engine answers: CPU images"),
    ],
)
@pytest.mark.unit
def test_anything_missing_chooses_the_cpu_images_and_says_why(tmp_path, info, gpus, said):
    proc = setup(fake_host(tmp_path, info, gpus), tmp_path / ".env")
    assert values(tmp_path / ".env") == CPU_VALUES
    assert said in proc.stdout


@pytest.mark.unit
def test_user_lines_survive_and_a_rerun_changes_nothing(tmp_path):
    env_file = tmp_path / ".env"
    env_file.write_text("# my settings\nROSETTA_SCALE=demo\nROSETTA_DEVICE=cpu\n\nROSETTA_DATASET=real\n")
    env = fake_host(tmp_path, GPU_HOST, [H200])
    setup(env, env_file)
    first = env_file.read_text()
    assert first.startswith("# my settings\nROSETTA_SCALE=demo\n\nROSETTA_DATASET=real\n\n# written by `make setup`")
    assert values(env_file) == {"ROSETTA_SCALE": "demo", "ROSETTA_DATASET": "real", **GPU_VALUES}
    setup(env, env_file)
    assert env_file.read_text() == first
    setup(env, env_file, "--cpu")
    assert values(env_file) == {"ROSETTA_SCALE": "demo", "ROSETTA_DATASET": "real", **CPU_VALUES}
    assert env_file.read_text().count("make setup") == 1


@pytest.mark.unit
def test_forced_choices(tmp_path):
    gpu_host = fake_host(tmp_path, GPU_HOST, [H200])
    proc = setup(gpu_host, tmp_path / "cpu.env", "--cpu")
    assert values(tmp_path / "cpu.env") == CPU_VALUES and "--cpu: CPU images" in proc.stdout
    proc = setup(gpu_host, tmp_path / "gpu.env", "--gpu")
    assert values(tmp_path / "gpu.env") == GPU_VALUES and not proc.stderr
    (tmp_path / "bin" / "info.json").write_text(json.dumps(CPU_HOST))
    proc = setup(gpu_host, tmp_path / "forced.env", "--gpu")
    assert values(tmp_path / "forced.env") == GPU_VALUES
    assert "warning: --gpu, but no NVIDIA runtime in Docker" in proc.stderr and "nvidia-ctk" in proc.stderr


def compose_config(tmp_path, info, gpus):
    """`docker-compose config` (Debian's 1.29, what CI installs) in a copy of the compose files with the .env that
    setup wrote for this host, nothing else in the environment: what a plain `docker compose run` would start."""
    docker_compose = shutil.which("docker-compose")
    if not docker_compose:
        message = "docker-compose is not on PATH (Debian: `apt-get install docker-compose`; .ci/docker-setup.sh)"
        pytest.fail(message) if IN_CI else pytest.skip(message)
    project = tmp_path / "project"
    project.mkdir()
    for name in ("compose.yaml", "compose.gpu.yaml"):
        shutil.copy(ROOT / name, project / name)
    shutil.copytree(ROOT / "docker" / "not-built", project / "docker" / "not-built")  # the services' build context
    env = fake_host(tmp_path, info, gpus)
    setup(env, project / ".env")
    # Without --project-directory: docker-compose 1.29 reads .env from the project directory but resolves its
    # COMPOSE_FILE against the working directory, so the config runs where a user would, in the project.
    out = subprocess.run(
        [docker_compose, "config"], cwd=project, env=env, capture_output=True, text=True, timeout=120, check=True
    ).stdout
    return yaml.safe_load(out)["services"]["pytorch-cnn"]


@pytest.mark.integration
def test_docker_compose_reads_the_gpu_env_as_gpu_image_and_reservation(tmp_path):
    service = compose_config(tmp_path, GPU_HOST, [H200])
    assert service["image"] == "rosetta/pytorch:gpu"
    assert service["environment"]["ROSETTA_DEVICE"] == "gpu"
    assert service["user"] == f"{os.getuid()}:{os.getgid()}"
    devices = service["deploy"]["resources"]["reservations"]["devices"]
    assert [d["driver"] for d in devices] == ["nvidia"] and devices[0]["capabilities"] == ["gpu"]


@pytest.mark.integration
def test_docker_compose_reads_the_cpu_env_as_cpu_image_without_reservation(tmp_path):
    service = compose_config(tmp_path, CPU_HOST, [H200])
    assert service["image"] == "rosetta/pytorch:cpu"
    assert service["environment"]["ROSETTA_DEVICE"] == "cpu"
    assert service["user"] == f"{os.getuid()}:{os.getgid()}"
    assert "deploy" not in service
    assert float(service["cpus"]) == usable_cpus() and service["mem_limit"] == service["memswap_limit"]
    assert service["mem_limit"] in (LIMITS["ROSETTA_MEMORY"], int(LIMITS["ROSETTA_MEMORY"][:-1]) * 2**30)


# ---------------------------------------------------------------- pull or build (the published images)


def fake_registry_docker(tmp_path, labels):
    """A docker whose engine answers, whose `pull` succeeds for any name, whose `image inspect` reports `labels`
    ({name pulled: code hash}) as the code-hash label, and which logs every pull and tag to calls.log."""
    env = fake_host(tmp_path, CPU_HOST)
    bin_dir = tmp_path / "bin"
    (bin_dir / "labels").write_text("".join(f"{name} {label}\n" for name, label in labels.items()))
    (bin_dir / "docker").write_text(f'''#!/bin/sh
log="{bin_dir}/calls.log"
case "$1" in
  info) cat "{bin_dir}/info.json";;
  pull|tag) echo "$*" >> "$log";;
  image) for last; do :; done
         grep -q "^$last " "{bin_dir}/labels" || exit 1
         grep "^$last " "{bin_dir}/labels" | cut -d' ' -f2;;
  *) exit 1;;
esac
''')
    return env, bin_dir / "calls.log"


def pytorch_cpu_hash():
    from scripts.launch.compose import code_hash
    from scripts.plan.matrix import load

    return code_hash("pytorch", load().frameworks["pytorch"].variants["cpu"])


@pytest.mark.unit
def test_pull_takes_the_tag_of_this_checkouts_code_and_names_it_locally(tmp_path):
    code = pytorch_cpu_hash()
    source = f"ghcr.io/owner/rosetta/pytorch:cpu-{code}"
    env, calls = fake_registry_docker(tmp_path, {source: code})
    proc = setup(env, tmp_path / ".env", "--cpu", "--pull", "ghcr.io/owner/", "--framework", "pytorch")
    assert calls.read_text().splitlines() == [
        f"pull {source}",
        f"tag {source} ghcr.io/owner/rosetta/pytorch:cpu",
        f"tag {source} rosetta/pytorch:cpu",
    ]
    assert values(tmp_path / ".env")["ROSETTA_REGISTRY"] == "ghcr.io/owner/"
    assert f"rosetta/pytorch:cpu: {source} (code {code})" in proc.stdout


@pytest.mark.unit
def test_pull_goes_by_digest_where_one_is_known(tmp_path):
    digest = "sha256:" + "ab" * 32
    source = f"ghcr.io/owner/rosetta/pytorch@{digest}"
    env, calls = fake_registry_docker(tmp_path, {source: pytorch_cpu_hash()})
    (tmp_path / "images.json").write_text(json.dumps({"rosetta/pytorch:cpu": digest, "rosetta/jax:cuda": digest}))
    setup(
        env,
        tmp_path / ".env",
        "--cpu",
        "--pull",
        "ghcr.io/owner/",
        "--framework",
        "pytorch",
        "--digests",
        str(tmp_path / "images.json"),
    )
    assert calls.read_text().splitlines()[0] == f"pull {source}"  # never the tag where the digest is known


@pytest.mark.unit
def test_an_image_of_other_code_is_refused_and_env_left_alone(tmp_path):
    source = f"ghcr.io/owner/rosetta/pytorch:cpu-{pytorch_cpu_hash()}"
    env, calls = fake_registry_docker(tmp_path, {source: "0123456789abcdef"})
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "scripts.launch.setup",
            "--env-file",
            str(tmp_path / ".env"),
            "--cpu",
            "--pull",
            "ghcr.io/owner/",
            "--framework",
            "pytorch",
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2 and "holds code 0123456789abcdef, this checkout's is" in proc.stderr
    assert "make images FRAMEWORK=pytorch VARIANT=cpu" in proc.stderr
    assert not (tmp_path / ".env").exists() and "tag" not in calls.read_text()


@pytest.mark.unit
def test_without_pull_setup_names_the_missing_images_and_both_ways_to_get_them(tmp_path):
    env, _ = fake_registry_docker(tmp_path, {"rosetta/pytorch:cpu": pytorch_cpu_hash()})
    proc = setup(env, tmp_path / ".env", "--cpu")
    assert "rosetta/pytorch:cpu," not in proc.stdout and "not on this host: rosetta/tensorflow:cpu" in proc.stdout
    assert "`make images FRAMEWORK=keras-tf VARIANT=cpu`" in proc.stdout
    assert "`make setup PULL=ghcr.io/OWNER/`" in proc.stdout
    assert "ROSETTA_REGISTRY" not in values(tmp_path / ".env")
