"""The runner contract through the real CLI: exactly one record per invocation, also on failure and skip."""
import json

import pytest

from conftest import run_runner


def test_missing_data_is_a_failed_record_that_says_what_to_do(tmp_path):
    out = tmp_path / "r.json"
    proc = run_runner("pytorch", "cnn", out, "--scale", "tiny", data=tmp_path / "nowhere")
    record = json.loads(out.read_text())
    assert proc.returncode == 1 and record["status"] == "failed"
    assert "make data" in record["reason"] and record["cell"]["data"] == "missing"


@pytest.mark.parametrize("precision", ["tf32", "amp"])
def test_gpu_only_precisions_skip_on_cpu(precision, synthetic_data, tmp_path):
    out = tmp_path / "r.json"
    proc = run_runner("pytorch", "cnn", out, "--scale", "tiny", "--precision", precision, data=synthetic_data)
    record = json.loads(out.read_text())
    assert proc.returncode == 0 and record["status"] == "skipped" and "GPU" in record["reason"]
    assert record["system"]["framework_version"]


def test_gpu_device_without_gpu_skips(synthetic_data, tmp_path):
    out = tmp_path / "r.json"
    proc = run_runner("pytorch", "gru", out, "--scale", "tiny", "--device", "gpu", data=synthetic_data)
    record = json.loads(out.read_text())
    assert proc.returncode == 0 and record["status"] == "skipped" and "GPU" in record["reason"]


def test_unknown_switch_fails_naming_it(synthetic_data, tmp_path):
    out = tmp_path / "r.json"
    proc = run_runner("pytorch", "cnn", out, "--scale", "tiny", "--switch", "turbo=on", data=synthetic_data)
    record = json.loads(out.read_text())
    assert proc.returncode == 1 and "turbo" in record["reason"] and "known:" in record["reason"]


def test_record_has_the_whole_schema(synthetic_data, tmp_path):
    out = tmp_path / "r.json"
    run_runner("pytorch", "resnet50", out, "--scale", "tiny", "--repeats", "3", "--switch", "channels_last=on",
               data=synthetic_data)
    record = json.loads(out.read_text())
    assert set(record) == {"schema", "run_id", "cell", "status", "reason", "log_tail", "metrics", "timing", "system",
                           "started_at", "finished_at", "git_commit"}
    assert record["status"] == "ok", record["log_tail"]
    assert record["timing"]["repeats"] == 3 and len(record["timing"]["values"]) == 3
    assert record["system"]["switches"]["channels_last"] is True and record["metrics"]["weights"] == "random"
    assert {"python", "cpu", "framework_version", "cuda", "cudnn", "driver", "gpus", "host"} <= set(record["system"])
