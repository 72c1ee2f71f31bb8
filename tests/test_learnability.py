"""Each runner learns the learnable synthetic data, and the test has teeth: the twins are hard enough that the seed's
classic mistakes fail it (the mutation check in the note of issue 7 confirmed each for every framework):

- dropout left on in evaluation (seed lesson 4): the CIFAR twin's test images blend their class's pattern with
  another's, so margins are small and evaluation-time dropout costs accuracy (2.7-32 points; TensorFlow's cnn loses
  the least, so its bar is higher: MIN_ACCURACY_OF);
- labels shuffled against images: nothing generalises, accuracy falls to chance (.08 for cnn, .53-.59 for gru);
- the GRU reading the padded end (go_backwards, a reversed scan, a flipped sequence): only the last words of each
  synthetic review carry its sentiment, so the wrong end is noise (.46-.55).

Thresholds are set from measurements at tiny scale, with margin (see the constants).
"""

import functools
import json
from pathlib import Path

import probe
import pytest
from conftest import framework_tasks, run_runner
from reference import resnet50_forward

from shared import canonical, datasets, params, timing

# Measured at tiny scale (issue 7's mutation check). Correct runners: cnn 1.00 (jax .98), gru .99-1.00. Mutated: cnn
# with dropout on in evaluation .68 (jax), .88-.92 (pytorch, keras-*), .973 (tensorflow: its trained net shrugs the
# noise off, hence its own bar below); labels shuffled .08; gru shuffled .53-.59, reading backwards .46-.55.
MIN_ACCURACY = {"cnn": 0.95, "gru": 0.9}
# TensorFlow's cnn reaches 1.00 and with dropout left on in evaluation still .97 (the noise barely moves its margins),
# so only a stricter bar catches lesson 4 there; measured correct runs: 1.00 at tiny scale.
MIN_ACCURACY_OF = {("tensorflow", "cnn"): 0.99}
# DenseNet-121 at tiny scale trains 2-4 steps from the shared seeded init; the twin's co-occurring findings are learnt
# that fast: mean AUC measured .65-.71 in every framework (one device and two), where chance is .5 (± .03 over 32
# test images and 14 labels).
MIN_AUC = 0.6


@pytest.mark.framework
@pytest.mark.parametrize("framework, task", framework_tasks(["cnn", "gru"]))
@probe.job("run")
def test_runner_learns(framework, task, probes):
    """The whole cell through the runner's main, at the tiny scale, in the framework's probe (tests/probe.py)."""
    job = probe.Job("run", task)
    out = probe.outcome(probes.result(framework, job), framework, job)
    record, code = json.loads(out.read_text()), int(Path(f"{out}.rc").read_text())
    assert code == 0 and record["status"] == "ok", (record["reason"], record["log_tail"])
    assert record["metrics"]["accuracy"] >= MIN_ACCURACY_OF.get((framework, task), MIN_ACCURACY[task]), record[
        "metrics"
    ]
    assert record["cell"]["data"] == "synthetic"
    assert record["metrics"]["parameters"] > 3_000_000


# Documented gaps: (framework, task, gpus) -> text the skip reason must contain.
KNOWN_SKIPS = {("keras-torch", "densenet121", 2): "keras.distribution"}


@functools.cache
def tiny_feature_mean(data):
    """The mean feature of ResNet-50 at tiny scale as a runner's timed path must compute it: the NumPy reference
    forward (tests/reference.py) of the weights and images the runner loads (shared.canonical, shared.datasets)."""
    p = params.task_params("resnet50", "tiny")
    images = datasets.random_images(p["batch_size"] * p["batches"], p["image_size"])
    return float(resnet50_forward(canonical.load(data, "resnet50")[0], images).mean())


@pytest.mark.framework
@pytest.mark.parametrize("framework, task", framework_tasks(["resnet50", "densenet121"]))
def test_feature_and_multi_device_tasks_run(framework, task, synthetic_data, tmp_path):
    """ResNet-50 extraction, its features the reference's, and DenseNet-121 data-parallel over N CPU
    processes/devices learning the twin (a framework without data-parallel training shows its skip, then learns on
    one device)."""
    gpus = 2 if task == "densenet121" else 1
    out = tmp_path / "record.json"
    proc = run_runner(
        framework, task, out, "--scale", "tiny", "--gpus", str(gpus), "--repeats", "2", data=synthetic_data
    )
    record = json.loads(out.read_text())
    if (framework, task, gpus) in KNOWN_SKIPS:
        assert record["status"] == "skipped" and KNOWN_SKIPS[framework, task, gpus] in record["reason"], record
        gpus = 1
        proc = run_runner(framework, task, out, "--scale", "tiny", "--gpus", "1", data=synthetic_data)
        record = json.loads(out.read_text())
    assert proc.returncode == 0 and record["status"] == "ok", (record["reason"], record["log_tail"], proc.stdout)
    m = record["metrics"]
    if task == "resnet50":
        assert m["seconds_per_1000_images"] > 0 and record["timing"]["repeats"] == timing.MIN_SAMPLES
        # the features of the timed passes (each runner's extract: its batching, layout and weight loading) are the
        # reference's (test_equivalence checks each network alone, on other images)
        assert m["feature_mean"] == pytest.approx(tiny_feature_mean(synthetic_data), rel=1e-4), m
    else:
        assert m["devices"] == gpus and m["train_minutes"] > 0
        assert m["auc"] >= MIN_AUC, m
        # The input rule (README): the framework's background workers, params' count per device, and the loop's wait
        # for them as a share of the timed training.
        assert m["loader_workers"] == params.task_params(task, "tiny")["loader_workers"], m
        assert isinstance(m["input_pipeline"], str) and str(m["loader_workers"]) in m["input_pipeline"], m
        assert 0 <= m["input_wait_seconds"] <= m["train_seconds"], m
        assert m["input_wait_fraction"] == pytest.approx(m["input_wait_seconds"] / m["train_seconds"]), m
