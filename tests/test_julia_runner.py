"""The julia-knet runner where Knet cannot be installed (Julia's package registry is unreachable here): every Julia
file parses with Debian's Julia, the contract part (config, params, data, timing, result) runs in Julia and turns
into a record like every runner's, and a cell without Julia or without Knet ends `skipped` with the reason.

The Julia tests run in a Debian bullseye image with Debian's julia 1.5.3 (bookworm packages no Julia) and the
Python 3.9 + NumPy of bullseye for the contract side, made without a registry: `mmdebstrap … | docker import`
(about 1.5–4 minutes, 530 MB, once per engine). Outside CI a missing engine or mmdebstrap skips them; in CI it fails.
The Knet model code (cnn.jl, gru.jl, resnet50.jl past `using Knet`) never runs here.
"""

import json
import os
import re
import shutil
import subprocess
import sys

import numpy as np
import pytest
from conftest import IN_CI, ROOT

from runners.julia_knet import CONTRACT_TIMES
from scripts.launch import compose
from scripts.launch.executors import ExecutorError
from shared import canonical, datasets, params, timing
from shared.record import read_record

# One pytest-xdist worker runs all of these (`make test` runs two): the Julia image is built once.
pytestmark = pytest.mark.xdist_group("julia")

JULIA_IMAGE = "rosetta/julia-check:bullseye"
JULIA_PACKAGES = "julia,python3,python3-numpy"
JULIA_DIR = ROOT / "runners" / "julia_knet"
JULIA_FILES = sorted(JULIA_DIR.glob("*.jl"))
TASKS = ("cnn", "gru", "resnet50")
KNET_MISSING = (
    "Knet is not installed in this Julia (1.5.3): Julia's package registry was unreachable when this "
    "environment was built; build the julia-knet image on a host that reaches it"
)


def unavailable(message):
    pytest.fail(message) if IN_CI else pytest.skip(message)


@pytest.fixture(scope="module")
def julia_image():
    """The bullseye image with Debian's Julia, built once per engine: `mmdebstrap` writes the root file system to a
    pipe and `docker import` makes it an image (no registry needed)."""
    try:
        docker = compose.docker_cli()
        compose.check_engine(docker)
    except ExecutorError as e:
        unavailable(str(e))
    if subprocess.run([docker, "image", "inspect", JULIA_IMAGE], capture_output=True).returncode != 0:
        if not shutil.which("mmdebstrap"):
            unavailable(f"{JULIA_IMAGE} missing and no mmdebstrap to build it (`apt-get install mmdebstrap`)")
        build = f"mmdebstrap --variant=minbase --include={JULIA_PACKAGES} bullseye - | {docker} import - {JULIA_IMAGE}"
        proc = subprocess.run(["bash", "-o", "pipefail", "-c", build], capture_output=True, text=True, timeout=1200)
        assert proc.returncode == 0, proc.stderr[-3000:]
    return docker


def in_julia_image(docker, argv, *, data=None, out=None, env=()):
    """Run `argv` in the Julia image with the repository read-only at /repo (the working directory), `data` at /data
    (read-only) and `out` at /out, as the calling user."""
    mounts = ["-v", f"{ROOT}:/repo:ro"]
    mounts += ["-v", f"{data}:/data:ro"] if data else []
    mounts += ["-v", f"{out}:/out"] if out else []
    envs = [a for name in ("PYTHONDONTWRITEBYTECODE=1", *env) for a in ("-e", name)]
    return subprocess.run(
        [
            docker,
            "run",
            "--rm",
            "--network",
            "none",
            "-u",
            f"{os.getuid()}:{os.getgid()}",
            *mounts,
            *envs,
            "-w",
            "/repo",
            JULIA_IMAGE,
            *argv,
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )


# ---------------------------------------------------------------- without an engine

SECTIONS = ["Config", "Data", "Model", "Train step", "Evaluate", "Main"]


@pytest.mark.integration
@pytest.mark.parametrize("task", TASKS)
def test_julia_task_files_have_the_runner_skeleton(task):
    """The Julia task files carry the skeleton every runner has (tests/test_skeleton.py checks the Python ones): a
    header, the six sections in order, SWITCHES before the data, the same function names."""
    text = (JULIA_DIR / f"{task}.jl").read_text()
    assert text.startswith(f"# Knet 1.4 (Julia 1.5) · {task} · ")
    assert re.findall(r"^# ==== (.+) ====$", text, flags=re.M) == SECTIONS
    assert text.index("const SWITCHES") < text.index("# ==== Data ====")
    defined = set(re.findall(r"^(?:function )?([a-z_!]+)\(", text, flags=re.M))
    assert {"load_data", "build_model", "evaluate", "main"} <= defined
    assert defined & {"train_step", "extract"}
    assert re.search(r"^using Knet$", text, flags=re.M) and text.rstrip().endswith("run_task(main)")


@pytest.mark.unit
@pytest.mark.parametrize("task", TASKS)
def test_without_julia_the_cell_is_skipped_with_the_reason(task, synthetic_data, tmp_path):
    out = tmp_path / "r.json"
    env = {k: v for k, v in os.environ.items() if k != "ROSETTA_JULIA"}
    env.update(PATH=os.path.dirname(sys.executable), PYTHONPATH=str(ROOT))  # a PATH with no julia on it
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "runners",
            "julia-knet",
            task,
            "--data",
            str(synthetic_data),
            "--out",
            str(out),
            "--device",
            "cpu",
            "--scale",
            "tiny",
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    record = read_record(out)
    assert proc.returncode == 0 and record["status"] == "skipped", proc.stdout + proc.stderr
    assert record["reason"].startswith("julia is not installed on this host")
    assert record["system"]["julia_version"] is None and record["system"]["knet_version"] is None


# ---------------------------------------------------------------- in Debian's Julia


@pytest.mark.integration
def test_every_julia_file_parses_with_debians_julia(julia_image):
    files = [str(p.relative_to(ROOT)) for p in JULIA_FILES]
    proc = in_julia_image(julia_image, ["julia", "--startup-file=no", "tests/julia/parse_check.jl", *files])
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.splitlines() == [f"ok {f}" for f in files], proc.stdout


@pytest.mark.integration
def test_the_parse_check_catches_a_syntax_error(julia_image, tmp_path):
    """The check above would pass vacuously if Julia's parser errors never reached it."""
    (tmp_path / "bad.jl").write_text("x = (1,\nfunction f()\n")
    proc = in_julia_image(
        julia_image, ["julia", "--startup-file=no", "tests/julia/parse_check.jl", "/out/bad.jl"], out=tmp_path
    )
    assert proc.stdout.startswith("error /out/bad.jl"), proc.stdout + proc.stderr


def numpy_arrays(task, root):
    """What the Python side hands Julia, loaded here the same way (shared/), to compare with what Julia read."""
    p = params.task_params(task, "tiny")
    if task == "cnn":
        names, arrays = (
            ("x_train", "y_train", "x_test", "y_test"),
            datasets.load_cifar10(root, p["train_samples"], p["test_samples"]),
        )
    elif task == "gru":
        names, arrays = (
            ("x_train", "y_train", "x_test", "y_test"),
            datasets.load_imdb(root, p["max_features"], p["maxlen"], p["train_samples"], p["test_samples"]),
        )
    else:
        return canonical.load(root, "resnet50")[0]
    return {**dict(zip(names, arrays, strict=False)), **canonical.init_weights(task)}  # the data and the shared start


@pytest.mark.integration
@pytest.mark.parametrize("task", TASKS)
def test_the_contract_part_runs_in_julia_and_makes_a_valid_record(task, julia_image, synthetic_data, tmp_path):
    """`python -m runners julia-knet TASK` in Debian's Julia with the contract check on: Julia parses the config and
    shared/params.json, reads every array, computes metrics and timing with its copy of shared/timing.py and writes
    the result; shared.runner makes the record. Everything must equal what the Python side computes."""
    out = tmp_path / "out"
    out.mkdir()
    proc = in_julia_image(
        julia_image,
        [
            "python3",
            "-m",
            "runners",
            "julia-knet",
            task,
            "--data",
            "/data/synthetic",
            "--out",
            f"/out/{task}.json",
            "--device",
            "cpu",
            "--scale",
            "tiny",
            "--run-id",
            "julia-check",
        ],
        data=synthetic_data.parent,
        out=out,
        env=("ROSETTA_JULIA_CONTRACT_CHECK=1",),
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    record = read_record(out / f"{task}.json")
    assert set(record) == {
        "schema",
        "run_id",
        "cell",
        "status",
        "reason",
        "log_tail",
        "metrics",
        "timing",
        "system",
        "started_at",
        "finished_at",
        "git_commit",
    }
    assert record["status"] == "ok" and record["run_id"] == "julia-check"
    assert record["cell"] == {
        "framework": "julia-knet",
        "task": task,
        "variant": "local",
        "precision": "fp32",
        "gpus": 1,
        "device": "cpu",
        "data": "synthetic",
        "scale": "tiny",
        "tuning": "default",
    }
    assert {"python", "cpu", "framework_version", "cuda", "cudnn", "driver", "gpus", "host"} <= set(record["system"])
    assert record["system"]["julia_version"] == "1.5.3" and record["system"]["knet_version"] is None

    # the timing vocabulary: Julia's numbers are shared/timing.py's for the same epoch times
    seconds, warmup, steps = CONTRACT_TIMES["epoch_seconds"], CONTRACT_TIMES["warmup"], CONTRACT_TIMES["steps"]
    windows = CONTRACT_TIMES["windows"]
    p = params.task_params(task, "tiny")
    expected = timing.train_metrics(seconds, steps * p["batch_size"], warmup=warmup, steps=steps, windows=windows)
    metrics = record["metrics"]
    for key, value in expected.items():
        assert metrics[key] == pytest.approx(value), key  # floats and the list of epoch seconds
    summary = timing.train_timing(windows, warmup=warmup)
    assert set(record["timing"]) == set(summary)
    for key, value in summary.items():
        exact = isinstance(value, (bool, str, type(None)))
        assert record["timing"][key] == (value if exact else pytest.approx(value)), key

    # the params Julia read from shared/params.json, and the arrays it read from the .npy files
    read = metrics["contract_check"]
    assert read["params"] == p
    arrays = numpy_arrays(task, synthetic_data)
    names = set(arrays) | ({"orders"} if task != "resnet50" else set())
    assert set(read["arrays"]) == names
    for name, array in arrays.items():
        got = read["arrays"][name]
        assert got["shape"] == list(array.shape), name
        assert got["sum"] == pytest.approx(float(np.sum(array, dtype=np.float64)), rel=1e-9), name
    if task != "resnet50":
        steps_per_epoch = p["train_samples"] // p["batch_size"]
        assert read["arrays"]["orders"]["shape"] == [p["epochs"], steps_per_epoch * p["batch_size"]]


@pytest.mark.integration
def test_without_knet_the_cell_is_skipped_with_the_reason(julia_image, synthetic_data, tmp_path):
    """Debian's Julia without Knet, as on every machine of this project: `skipped`, exit 0, the exact reason."""
    proc = in_julia_image(
        julia_image,
        [
            "python3",
            "-m",
            "runners",
            "julia-knet",
            "cnn",
            "--data",
            "/data/synthetic",
            "--out",
            "/out/cnn.json",
            "--device",
            "gpu",
            "--scale",
            "tiny",
        ],
        data=synthetic_data.parent,
        out=tmp_path,
    )
    record = read_record(tmp_path / "cnn.json")
    assert proc.returncode == 0 and record["status"] == "skipped", proc.stdout + proc.stderr
    assert record["reason"] == KNET_MISSING
    assert record["system"]["julia_version"] == "1.5.3" and record["system"]["framework_version"] is None
    assert json.dumps(record)  # plain JSON all through
