"""`python -m runners …` as a test double. FAKE_BEHAVIOUR maps tasks to what happens, e.g. "cnn=ok,gru=crash":
ok     write an ok record through the real harness (shared.runner.run)
raise  the task raises: the real harness writes a failed record
crash  the process dies by a signal without writing anything
hang   sleep until the orchestrator's timeout kills the process
slow   sleep FAKE_SLOW_SECONDS, then ok (for killing a run mid-cell)
impostor  write an ok record that claims the other framework's identity (pytorch ↔ jax) in this cell's slot
`--barrier-check FRAMEWORK` answers as shared/barrier_check.py does: FAKE_BARRIER=ok (default) or leak.
"""

import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))  # the real project, for shared/
import numpy as np

from shared import sysinfo
from shared.params import TASKS
from shared.runner import config_from_args, parser, run
from shared.timing import extraction_metrics, summarize, train_metrics, train_timing

FAKE_GPU = {"name": "NVIDIA H100 80GB HBM3", "memory_mib": 81559, "compute_capability": "9.0", "driver": "550.54.15"}


class Family:
    """The calibration a real runner package gives (shared/calibration.py): here NumPy's GEMM on the CPU."""

    @staticmethod
    def gemm(cfg, n, dtype):
        if cfg.device != "cpu":  # a fake GPU machine has no GPU to multiply on: the record says the GEMM failed
            raise RuntimeError("the fake runners have no GPU GEMM")
        a = np.ones((n, n), dtype=dtype)
        return (lambda: a @ a), (lambda: None)


def figures(cfg, started):
    """(metrics, timing) as a real cell of `cfg.task` publishes them, from made-up samples (each task its own: the
    submission checker refuses copied ones), every figure following from them as the runners compute it."""
    p, scale = cfg.params, 1 + TASKS.index(cfg.task) / 100
    extra = {"started": started, "ended": time.time(), "visible_gpus": os.environ.get("CUDA_VISIBLE_DEVICES")}
    if cfg.task == "resnet50":
        timing = summarize([v * scale for v in (0.4, 0.42, 0.41, 0.43, 0.405)], warmup=0.9, unit="seconds per pass")
        images = p["batch_size"] * p["batches"]
        return extraction_metrics(timing, images, p["batch_size"], p["image_size"], feature_mean=1.0, **extra), timing
    batch = p["batch_size"] * (cfg.gpus if cfg.task == "densenet121" else 1)
    train_samples = p.get("train_samples") or 50 * batch  # full scale: the whole data set, not a parameter
    steps = max(1, train_samples // batch)
    # each task its own shape too (one sample moved), not only its own scale: a copy scaled by one factor is refused
    windows = [v * scale / 10 for v in (3.0, 1.4, 1.5, 1.6 + TASKS.index(cfg.task) / 50, 1.5, 1.45)]
    epoch = float(sum(windows[1:]) / len(windows[1:]) * steps + 0.02)
    epochs = [epoch + 0.2] + [epoch] * (p.get("epochs", 1) - 1)
    metrics = train_metrics(
        epochs,
        steps * batch,
        warmup=0.2,
        steps=steps,
        windows=windows,
        train_samples=train_samples,
        global_batch=batch,
        **({"auc": 0.7} if cfg.task == "densenet121" else {"accuracy": 0.9}),
        **extra,
    )
    if cfg.task == "densenet121":
        metrics["train_minutes"] = metrics["train_seconds"] / 60
    return metrics, train_timing(windows)


class Task:
    def __init__(self, behaviour):
        self.behaviour = behaviour

    def main(self, cfg):
        if self.behaviour == "raise":
            raise RuntimeError("the model diverged (on purpose)")
        if self.behaviour == "crash":
            print("about to crash", flush=True)
            os.abort()
        if self.behaviour == "hang":
            print("hanging", flush=True)
            time.sleep(3600)
        started = time.time()
        if self.behaviour == "slow":
            time.sleep(float(os.environ.get("FAKE_SLOW_SECONDS", "30")))
        metrics, timing = figures(cfg, started)
        return {"metrics": metrics, "timing": timing, "switches": {"fake": True}}


def barrier_check(framework, *_):
    leak = os.environ.get("FAKE_BARRIER") == "leak"
    print(
        json.dumps(
            {
                "framework": framework,
                "status": "failed" if leak else "ok",
                "reason": "the barrier returns early (on purpose)" if leak else None,
                "barrier_seconds": 0.2,
                "after_seconds": 0.15 if leak else 1e-5,
                "control_seconds": 0.2,
            }
        )
    )
    return 1 if leak else 0


def main():
    if sys.argv[1:2] == ["--barrier-check"]:
        return barrier_check(*sys.argv[2:])
    behaviours = dict(item.split("=") for item in os.environ.get("FAKE_BEHAVIOUR", "").split(",") if item)
    if len(sys.argv) > 2 and behaviours.get(sys.argv[2]) == "impostor":
        sys.argv[1] = "jax" if sys.argv[1] != "jax" else "pytorch"
    cfg = config_from_args(parser(["pytorch", "jax", "keras-jax", "keras-torch", "chainer"]).parse_args(sys.argv[1:]))
    if cfg.device == "gpu" and not sysinfo.gpu_facts():
        # a fake GPU machine has no nvidia-smi: the facts an ok GPU record must carry (records.GPU_FACTS_REQUIRED)
        sysinfo.gpu_facts = lambda: [FAKE_GPU]
    return run(cfg, lambda c: Task(behaviours.get(c.task, "ok")), lambda: {"framework_version": "fake"}, Family)


if __name__ == "__main__":
    sys.exit(main())
