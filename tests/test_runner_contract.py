"""The runner contract through the real CLI: exactly one record per invocation, also on failure and skip."""

import json
import os
from pathlib import Path

import probe
import pytest
from conftest import run_runner

from runners import FRAMEWORKS
from shared import datasets, flops
from shared.params import params_hash, task_params
from shared.runner import parser
from shared.timing import MIN_SAMPLES


@pytest.mark.framework
def test_missing_data_is_a_failed_record_that_says_what_to_do(tmp_path):
    out = tmp_path / "r.json"
    proc = run_runner("pytorch", "cnn", out, "--scale", "tiny", data=tmp_path / "nowhere")
    record = json.loads(out.read_text())
    assert proc.returncode == 1 and record["status"] == "failed"
    assert "make data" in record["reason"] and record["cell"]["data"] == "missing"


@pytest.mark.framework
def test_an_unwritable_results_folder_is_one_line_before_any_work(tmp_path):
    """No traceback from the record's atomic write at the end (issue 28): the runner tries its folder first and
    says which user, which folder (the host's, in a container) and what fixes it; nothing runs, nothing is written."""
    (tmp_path / "results").write_text("a file where the folder should be")  # refused to root as well
    out = tmp_path / "results" / "pytorch-cnn.json"
    proc = run_runner("pytorch", "cnn", out, "--scale", "tiny", data=tmp_path / "nowhere")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    [line] = proc.stderr.strip().splitlines()
    assert line.startswith(f"error: uid {os.getuid()} cannot write the results folder {out.parent}")
    assert f"chown -R {os.getuid()}:{os.getgid()} {out.parent}" in line and "nothing was run" in line
    assert proc.stdout == ""  # not even the data check ran
    env = {"ROSETTA_RESULTS_HOST": "./results/compose"}  # how compose names the host's folder
    proc = run_runner("pytorch", "cnn", out, "--scale", "tiny", data=tmp_path / "nowhere", env=env)
    assert "(on the host: ./results/compose, ROSETTA_RESULTS)" in proc.stderr and "`make setup` does" in proc.stderr
    assert f"`sudo chown -R {os.getuid()}:{os.getgid()} ./results/compose`" in proc.stderr


@pytest.mark.unit
def test_by_hand_a_missing_twin_is_made_for_this_call_only(tmp_path, monkeypatch):
    """`docker compose run --rm pytorch-cnn` on a folder without twins (compose sets ROSETTA_TWINS_SCRATCH): the task's
    twin is made in the scratch folder and the cell reads it; the data folder is not touched. The orchestrator sets
    the scratch empty, and a real dataset is never made: both keep the failure that says what to do."""
    from dataclasses import replace

    from shared.runner import RunConfig, twins_for_this_call

    data = tmp_path / "data" / "synthetic"
    data.mkdir(parents=True)
    cfg = RunConfig("pytorch", "gru", data, tmp_path / "r.json", scale="tiny")
    monkeypatch.setenv("ROSETTA_TWINS_SCRATCH", str(tmp_path / "scratch"))
    monkeypatch.setenv("ROSETTA_DATASET", "synthetic")
    made = twins_for_this_call(cfg)
    assert made == replace(cfg, data=tmp_path / "scratch") and list(data.iterdir()) == []
    assert {p.name for p in (tmp_path / "scratch").iterdir()} == {"imdb"}  # only what the task reads
    assert json.loads((tmp_path / "scratch" / "imdb" / "manifest.json").read_text())["source"] == "synthetic"
    assert twins_for_this_call(replace(cfg, task="resnet50")).data == data  # random images: nothing to make
    monkeypatch.setenv("ROSETTA_DATASET", "real")
    assert twins_for_this_call(cfg) == cfg
    monkeypatch.setenv("ROSETTA_DATASET", "synthetic")
    monkeypatch.setenv("ROSETTA_TWINS_SCRATCH", "")
    assert twins_for_this_call(cfg) == cfg
    datasets.prepare(data, synthetic=True, datasets=("imdb",))  # present: read where it is
    monkeypatch.setenv("ROSETTA_TWINS_SCRATCH", str(tmp_path / "other"))
    assert twins_for_this_call(cfg) == cfg and not (tmp_path / "other").exists()


@pytest.mark.framework
@pytest.mark.parametrize("precision", ["tf32", "amp"])
def test_gpu_only_precisions_skip_on_cpu(precision, synthetic_data, tmp_path):
    out = tmp_path / "r.json"
    proc = run_runner("pytorch", "cnn", out, "--scale", "tiny", "--precision", precision, data=synthetic_data)
    record = json.loads(out.read_text())
    assert proc.returncode == 0 and record["status"] == "skipped" and "GPU" in record["reason"]
    assert record["system"]["framework_version"]
    assert "placement" not in record["system"]  # no work: no cores' distance around it (shared/placement.py)


@pytest.mark.framework
def test_gpu_device_without_gpu_fails_with_a_hint(synthetic_data, tmp_path):
    """A missing GPU is a broken install or launch, never an unsupported cell: `failed`, so `--resume` retries it."""
    out = tmp_path / "r.json"
    proc = run_runner("pytorch", "gru", out, "--scale", "tiny", "--device", "gpu", data=synthetic_data)
    record = json.loads(out.read_text())
    assert proc.returncode == 1 and record["status"] == "failed", record["reason"]
    assert "0 visible" in record["reason"] and "nvidia-smi" in record["reason"]


@pytest.mark.unit
@pytest.mark.parametrize(
    "argv, message",
    [
        (["--gpus", "0"], "argument --gpus: must be 1 or more, got 0"),
        (["--gpus", "-2"], "argument --gpus: must be 1 or more, got -2"),
        (["--gpus", "two"], "argument --gpus: expected a whole number of 1 or more, got 'two'"),
        (["--repeats", "0"], "argument --repeats: must be 1 or more, got 0"),
        (["--precision", "fp8"], "argument --precision: invalid choice: 'fp8'"),
        (["--device", "tpu"], "argument --device: invalid choice: 'tpu'"),
        (["--scale", "huge"], "argument --scale: invalid choice: 'huge'"),
        (["--switch", "compile"], "argument --switch: --switch takes NAME=VALUE, got 'compile'"),
        (["--tuning", "fast"], "argument --tuning: invalid choice: 'fast'"),
    ],
)
def test_bad_arguments_are_refused_before_anything_runs(argv, message, tmp_path, capsys):
    """Usage errors stop at argparse (exit 2, one line naming the flag): no framework import, no training, no record."""
    with pytest.raises(SystemExit) as exit_:
        parser(FRAMEWORKS).parse_args(
            ["pytorch", "cnn", "--data", str(tmp_path), "--out", str(tmp_path / "r.json"), *argv]
        )
    assert exit_.value.code == 2 and message in capsys.readouterr().err
    assert not (tmp_path / "r.json").exists()


@pytest.mark.unit
def test_unknown_framework_and_task_list_the_choices(tmp_path, capsys):
    for argv, message in (
        (["pytroch", "cnn"], "argument framework: invalid choice: 'pytroch' (choose from 'caffe2'"),
        (["pytorch", "lstm"], "argument task: invalid choice: 'lstm' (choose from 'cnn'"),
    ):
        with pytest.raises(SystemExit):
            parser(FRAMEWORKS).parse_args([*argv, "--data", str(tmp_path), "--out", str(tmp_path / "r.json")])
        assert message in capsys.readouterr().err


@pytest.mark.unit
@pytest.mark.parametrize(
    "variable, value, message",
    [
        ("ROSETTA_GPUS", "0", "argument --gpus: must be 1 or more, got 0"),
        ("ROSETTA_PRECISION", "fp8", "argument --precision: invalid choice: 'fp8' (choose from fp32, tf32, amp, bf16)"),
        ("ROSETTA_DEVICE", "tpu", "argument --device: invalid choice: 'tpu'"),
        ("ROSETTA_SCALE", "huge", "argument --scale: invalid choice: 'huge'"),
    ],
)
def test_defaults_from_the_environment_are_checked_like_flags(variable, value, message, monkeypatch, tmp_path, capsys):
    monkeypatch.setenv(variable, value)  # compose and hand-run containers set these instead of flags
    with pytest.raises(SystemExit):
        parser(FRAMEWORKS).parse_args(["pytorch", "cnn", "--data", str(tmp_path), "--out", str(tmp_path / "r.json")])
    assert message in capsys.readouterr().err


@pytest.mark.unit
def test_defaults_from_the_environment_are_used(monkeypatch, tmp_path):
    monkeypatch.setenv("ROSETTA_GPUS", "4")
    args = parser(FRAMEWORKS).parse_args(["pytorch", "cnn", "--data", str(tmp_path), "--out", str(tmp_path / "r")])
    assert args.gpus == 4 and args.repeats == 5


@pytest.mark.framework
def test_unknown_switch_fails_naming_it(synthetic_data, tmp_path):
    out = tmp_path / "r.json"
    proc = run_runner("pytorch", "cnn", out, "--scale", "tiny", "--switch", "turbo=on", data=synthetic_data)
    record = json.loads(out.read_text())
    assert proc.returncode == 1 and "turbo" in record["reason"] and "known:" in record["reason"]


@pytest.mark.framework
def test_record_has_the_whole_schema(synthetic_data, tmp_path):
    out = tmp_path / "r.json"
    run_runner(
        "pytorch",
        "resnet50",
        out,
        "--scale",
        "tiny",
        "--repeats",
        "3",
        "--switch",
        "channels_last=on",
        data=synthetic_data,
    )
    record = json.loads(out.read_text())
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
    assert record["status"] == "ok", record["log_tail"]
    # --repeats 3 asks for fewer passes than a spread needs: MIN_SAMPLES are timed, after a warm-up that settled
    assert record["timing"]["repeats"] == MIN_SAMPLES == len(record["timing"]["values"])
    assert record["timing"]["unit"] == "seconds per pass" and record["timing"]["spread"] is not None
    assert record["system"]["switches"]["channels_last"] is True and record["metrics"]["weights"] == "random"
    assert record["metrics"]["data_placement"] == "host" and record["metrics"]["differences"] == []  # report fields
    assert {"python", "cpu", "framework_version", "cuda", "cudnn", "driver", "gpus", "host"} <= set(record["system"])
    # the machine fingerprint, and the key that verify and the report compare by (never the host name)
    system = record["system"]
    assert {"cpu_flags", "cpu_physical_cores", "cpu_usable", "memory_gib", "gpu_facts"} <= set(system)
    assert system["machine_class"].startswith("cpu:") and system["host"] not in system["machine_class"]
    assert system["params_hash"] == params_hash("resnet50", "tiny")
    # the thread rule as applied before the framework loaded, with the CPU affinity (shared/threads.py)
    rule = system["threads"]
    assert rule["affinity"] and rule["inter_op"] == 1 and rule["intra_op"] == max(1, int(system["cpu_usable"]))
    assert all(
        value == str(rule["intra_op"] if "INTEROP" not in name else 1)
        for name, value in rule["env"].items()
        if rule["set_by"][name] == "rule"
    )
    # how far apart the first two cores were just before and just after the cell's work (shared/placement.py)
    if len(os.sched_getaffinity(0)) >= 2:
        where = system["placement"]
        assert where["before_ns"] > 10 and where["after_ns"] > 10
        assert where["cpus"] == sorted(os.sched_getaffinity(0))[:2]
        # … and at every edge of its timed passes, outside the clock (shared/timing.py): one more than the passes
        trips = record["timing"]["round_trips_ns"]
        assert len(trips) == MIN_SAMPLES + 1 and all(10 < t < 1e6 for t in trips)
    # the device's calibration in the cell's framework, and the cell's share of it
    assert system["calibration"]["gemm_fp32_flops"] > 1e9 and system["calibration"]["host_copy_bytes_per_s"] > 0
    metrics = record["metrics"]
    assert metrics["model_flops_per_sample"] == flops.resnet50(task_params("resnet50", "tiny"))
    assert metrics["achieved_flops"] > 0 and metrics["efficiency_of_gemm"] > 0 and metrics["peak_flops"] > 0


@pytest.mark.framework
def test_a_tuned_cell_runs_its_runners_tuned_switches_or_is_skipped_saying_so(synthetic_data, tmp_path):
    """PyTorch's CNN has TUNED switches, applied before the command line's; Chainer's has none: its tuned cell is
    skipped, never a default run wearing the tuned id."""
    out = tmp_path / "r.json"
    proc = run_runner(
        "pytorch", "cnn", out, "--scale", "tiny", "--tuning", "tuned", "--switch", "compile=off", data=synthetic_data
    )
    record = json.loads(out.read_text())
    assert proc.returncode == 0 and record["status"] == "ok", record["log_tail"]
    assert record["cell"]["tuning"] == "tuned"
    switches = record["system"]["switches"]
    # the tuned switches as applied (compile turned off again on the command line: flags win), CUDA-only ones off
    assert (
        switches["fused_optimizer"] is True
        and switches["channels_last"] is True
        and switches["memory_format"] == "NHWC"
        and switches["compile"] is False
        and switches["compile_mode"] is None
        and switches["prefetch"] is False
    )
    assert record["metrics"]["differences"] == []
    from shared.record import Skip
    from shared.runner import RunConfig, resolve_switches

    cfg = RunConfig("chainer", "cnn", tmp_path, out, tuning="tuned")
    with pytest.raises(Skip, match="chainer cnn: no tuned path is written for this task"):
        resolve_switches({"dropout": True}, cfg)
    assert resolve_switches({"dropout": True}, RunConfig("chainer", "cnn", tmp_path, out)) == {"dropout": True}
    with pytest.raises(ValueError, match="unknown switch"):
        resolve_switches({"dropout": True}, cfg, {"turbo": True})


@pytest.mark.framework
def test_a_tuned_feature_extractor_compiles_and_extracts_the_same_features(synthetic_data, tmp_path):
    """PyTorch's tuned ResNet-50 (NHWC, Inductor) on the CPU: it compiles, its passes are timed after the warm-up that
    absorbs the compile, and its features are the default cell's (the same mean over the same images and weights)."""
    records = {}
    for tuning in ("default", "tuned"):
        out = tmp_path / f"{tuning}.json"
        proc = run_runner(
            "pytorch", "resnet50", out, "--scale", "tiny", "--tuning", tuning, data=synthetic_data, timeout=900
        )
        records[tuning] = json.loads(out.read_text())
        assert proc.returncode == 0 and records[tuning]["status"] == "ok", records[tuning]["log_tail"]
    switches = records["tuned"]["system"]["switches"]
    assert switches["compile"] is True and switches["memory_format"] == "NHWC"
    assert records["tuned"]["metrics"]["feature_mean"] == pytest.approx(
        records["default"]["metrics"]["feature_mean"], rel=1e-4
    )


@pytest.mark.unit
def test_a_framework_that_cannot_be_imported_is_a_failed_record_with_the_import_error(synthetic_data, tmp_path):
    """A broken environment (here: the host's Python, which has no CNTK; in a real one a missing libmpi.so.12) ends
    the cell `failed` with the import's own message and how to rebuild, never `skipped`."""
    import subprocess
    import sys

    from conftest import ROOT

    out = tmp_path / "r.json"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "runners",
            "cntk",
            "cnn",
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
        capture_output=True,
        text=True,
    )
    record = json.loads(out.read_text())
    assert proc.returncode == 1 and record["status"] == "failed"
    assert "No module named 'cntk'" in record["reason"] and "scripts.launch.venvs cntk" in record["reason"]


# Every training runner with a tuned path but the one above: its tuned cell must run, whole, through the CLI. The
# training-equivalence test calls each one's train_steps, one step a call, so a switch that only `main` applies (Keras'
# steps_per_execution, which its torch backend refuses; JAX's chunked steps) is proven here.
TUNED_MAINS = [
    ("pytorch", "gru"),
    ("lightning", "cnn"),  # torch.compile'd LightningModule through Trainer.fit
    ("tensorflow", "cnn"),
    ("jax", "cnn"),
    ("jax", "gru"),
    ("keras-tf", "gru"),
    ("keras-jax", "cnn"),
    ("keras-torch", "cnn"),
    ("keras-torch", "gru"),
    ("paddle", "cnn"),
    ("paddle", "gru"),
]


@pytest.mark.framework
@pytest.mark.parametrize("framework, task, tuning", [(f, t, "tuned") for f, t in TUNED_MAINS])
@probe.job("run")
def test_every_tuned_training_cell_runs_whole(probes, framework, task, tuning):
    """Through the runner's main in the framework's probe (tests/probe.py), after its default jobs."""
    job = probe.Job("run", task, tuning)
    out = probe.outcome(probes.result(framework, job), framework, job)
    record, code = json.loads(out.read_text()), int(Path(f"{out}.rc").read_text())
    assert code == 0 and record["status"] == "ok", record.get("reason") or record["log_tail"]
    assert record["cell"]["tuning"] == "tuned" and len(record["timing"]["values"]) >= 2
    switches = record["system"]["switches"]
    if framework.startswith("keras"):  # the backend's own limit, recorded as it ran
        assert switches["jit_compile"] is True
        assert switches["steps_per_execution"] == (1 if framework == "keras-torch" else 5)
    if framework == "jax":
        assert switches["steps_per_dispatch"] == 5
