"""The canonical hyperparameters of the four tasks: the one source of truth for every runner.

Values come from the seed notebooks (docs/design.md, "The tasks"). Non-Python runners (R, Julia) read the same values
from `params.json`, which `python -m shared.params` writes and a test keeps in sync.
"""

import hashlib
import json
from pathlib import Path
from typing import Any, Dict

SEED = 42  # one seed for weights, shuffles and synthetic data
PRECISIONS = ("fp32", "tf32", "amp", "bf16")
DEVICES = ("cpu", "gpu")
SCALES = ("full", "demo", "tiny")
TASKS = ("cnn", "gru", "resnet50", "densenet121")
# default: the framework's code as its own tutorials write it; tuned: the same work through the framework's own
# documented fast path (each piece a named switch in the runner's TUNED, recorded), where the runner has one
TUNINGS = ("default", "tuned")
DEFAULT_TUNING = "default"

CNN = {
    "dataset": "cifar10",
    "num_classes": 10,
    "input_shape": [3, 32, 32],  # C, H, W; pixels scaled to [0, 1]
    "epochs": 10,
    "batch_size": 64,
    "lr": 0.01,  # SGD, plain momentum (no unit gain, seed lesson 8)
    "momentum": 0.9,
    "parameters": 3_441_592,
}

GRU = {
    "dataset": "imdb",
    "num_classes": 2,
    "max_features": 30_000,  # vocabulary, Keras index convention (start 1, OOV 2, words from 3)
    "maxlen": 150,  # padded and truncated at the front, so the last step is real text
    "embedding_dim": 125,
    "hidden": 100,
    "epochs": 3,
    "batch_size": 64,
    "lr": 1e-3,  # Adam
    "beta1": 0.9,
    "beta2": 0.999,
    "eps": 1e-8,
    "parameters": 3_818_302,
}

RESNET50 = {
    "dataset": "random images",
    "image_size": 224,
    "batch_size": 32,
    "batches": 40,  # 1,280 images a timed pass
    "features": 2048,  # cut after global average pooling
}

DENSENET121 = {  # type: Dict[str, Any]
    "dataset": "chestxray14",
    "num_classes": 14,
    "stored_size": 264,  # images are resized once to 264, then randomly cropped
    "crop_size": 224,
    "epochs": 5,
    "batch_size": 64,  # per device
    "lr": 1e-4,  # Adam, multiplied by the number of devices
    "beta1": 0.9,
    "beta2": 0.999,
    "eps": 1e-8,  # the canonical ε in every framework (docs/design.md; Keras' default would be 1e-7)
    "split": [0.7, 0.1, 0.2],  # train / valid / test, by patient
    "imagenet_mean": [0.485, 0.456, 0.406],
    "imagenet_std": [0.229, 0.224, 0.225],
    # The input rule (README, "What every cell measures"): crops, flips and normalization run in background workers of
    # the framework's own input pipeline, this many per device in every framework, started once and kept across
    # epochs. Six per device crop 64 images of 264² ahead of one DenseNet-121 step on a current GPU.
    "loader_workers": 6,
}

# How each scale shrinks a task. `None` = the canonical value. Demo runs on two CPU cores in seconds per cell; tiny is
# for tests. Runners read the merged result through `task_params`.
SCALE_OVERRIDES = {
    "full": {},
    "demo": {
        # Sized for the budget (cells ≤ 20 minutes on two AVX2 cores) with enough samples for a spread: the first
        # step, a warm-up of two to WARMUP_CAP windows (shared.timing.warm_windows), then at least five more windows
        # of shared.timing.window_steps(task) steps: 1 + 5 + 5 windows at the least, whatever the warm-up takes.
        "cnn": {"epochs": 1, "train_samples": 1792, "test_samples": 256, "batch_size": 32},  # 56 steps: 11 windows
        "gru": {"epochs": 1, "train_samples": 3584, "test_samples": 512},  # 56 steps: 11 windows
        "resnet50": {"batches": 1, "batch_size": 8},  # 8 images of 224² a pass: warm-up until settled, 5 timed passes
        "densenet121": {
            "epochs": 1,
            "train_samples": 352,
            "test_samples": 128,
            "batch_size": 16,
            "crop_size": 64,
            "stored_size": 80,
            "loader_workers": 1,
        },  # two cores: one worker per device beside the two
        # training devices; 11 steps of 2 × 16 crops of 64² (windows of one step: 1 + 10 windows)
    },
    "tiny": {
        "cnn": {"epochs": 2, "train_samples": 320, "test_samples": 256, "batch_size": 16},
        "gru": {"epochs": 2, "train_samples": 640, "test_samples": 256, "maxlen": 40, "batch_size": 16},
        "resnet50": {"batches": 1, "batch_size": 4, "image_size": 64},
        "densenet121": {
            "epochs": 1,
            "train_samples": 88,
            "test_samples": 32,
            "crop_size": 32,
            "stored_size": 40,
            "batch_size": 4,
            "loader_workers": 1,
        },  # 11 steps on two devices, 22 on one
    },
}

# What is inside the training clock, the same in every framework (docs/design.md, "Runner contract"): the data set sits
# in host memory and each step's batch is gathered there in the shared order and copied to the device inside the clock
# (overlapped where the framework can: pinned memory, prefetching). That is the seed's setup (lesson 1: NumPy arrays in
# memory, one shuffle per epoch, a batch generator) and what any real input pipeline does. Frameworks that can also keep
# the whole set on the device offer `data_placement=device` as a switch; the record says which ran.
DATA_PLACEMENT = "host"
DATA_PLACEMENTS = ("host", "device")

TASK_PARAMS = {"cnn": CNN, "gru": GRU, "resnet50": RESNET50, "densenet121": DENSENET121}
MULTI_DEVICE_TASKS = ("densenet121",)  # the only task that runs data-parallel over several devices

# What each task measures, in one place for the runners' timing, the report, verify, submissions and the site:
TRAINING_TASKS = ("cnn", "gru", "densenet121")  # resnet50 times inference passes
TIME_METRIC = {  # the metric of a record that holds the task's time, as a user waits for it
    "cnn": "train_seconds",
    "gru": "train_seconds",
    "resnet50": "seconds_per_1000_images",
    "densenet121": "train_minutes",
}
QUALITY_METRIC = {"cnn": "accuracy", "gru": "accuracy", "densenet121": "auc"}  # resnet50 extracts features only
STEP_UNIT, PASS_UNIT = "seconds per step", "seconds per pass"  # what one timing sample measures (`timing.unit`)
SAMPLE_UNIT = {task: STEP_UNIT if task in TRAINING_TASKS else PASS_UNIT for task in TASKS}


def task_params(task: str, scale: str = "full") -> Dict[str, Any]:
    """The hyperparameters of `task` at `scale`: canonical values with that scale's overrides applied."""
    if task not in TASK_PARAMS:
        raise ValueError(f"unknown task {task!r}; known: {', '.join(TASKS)}")
    if scale not in SCALES:
        raise ValueError(f"unknown scale {scale!r}; known: {', '.join(SCALES)}")
    return {**TASK_PARAMS[task], **SCALE_OVERRIDES[scale].get(task, {})}


def params_hash(task: str, scale: str = "full") -> str:
    """A short digest of `task`'s effective hyperparameters at `scale`: records with different digests did different
    work (another crop size, more passes) and are never compared as if they had not."""
    text = json.dumps(task_params(task, scale), sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def as_json() -> str:
    return (
        json.dumps(
            {"seed": SEED, "precisions": PRECISIONS, "tasks": TASK_PARAMS, "scales": SCALE_OVERRIDES},
            indent=2,
            sort_keys=True,
        )
        + "\n"
    )


JSON_PATH = Path(__file__).with_name("params.json")

if __name__ == "__main__":
    JSON_PATH.write_text(as_json())
    print(f"wrote {JSON_PATH}")
