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
from shared.runner import config_from_args, parser, run  # noqa: E402
from shared.params import TASKS  # noqa: E402
from shared.timing import summarize  # noqa: E402


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
        return {"metrics": {"train_seconds": 1.5, "accuracy": 0.9, "seconds_per_1000_images": 2.0,
                            "train_minutes": 0.1, "auc": 0.7, "started": started, "ended": time.time(),
                            "visible_gpus": os.environ.get("CUDA_VISIBLE_DEVICES")},
                # each task its own samples, as real cells have (the submission checker refuses copied ones)
                "timing": summarize([v * (1 + TASKS.index(cfg.task) / 100) for v in (1.4, 1.5, 1.6, 1.5, 1.45)],
                                    warmup=0.2, unit="seconds per step"),
                "switches": {"fake": True}}


def barrier_check(framework, *_):
    leak = os.environ.get("FAKE_BARRIER") == "leak"
    print(json.dumps({"framework": framework, "status": "failed" if leak else "ok",
                      "reason": "the barrier returns early (on purpose)" if leak else None, "barrier_seconds": 0.2,
                      "after_seconds": 0.15 if leak else 1e-5, "control_seconds": 0.2}))
    return 1 if leak else 0


def main():
    if sys.argv[1:2] == ["--barrier-check"]:
        return barrier_check(*sys.argv[2:])
    behaviours = dict(item.split("=") for item in os.environ.get("FAKE_BEHAVIOUR", "").split(",") if item)
    if len(sys.argv) > 2 and behaviours.get(sys.argv[2]) == "impostor":
        sys.argv[1] = "jax" if sys.argv[1] != "jax" else "pytorch"
    cfg = config_from_args(parser(["pytorch", "jax", "keras-jax", "keras-torch", "chainer"]).parse_args(sys.argv[1:]))
    return run(cfg, lambda c: Task(behaviours.get(c.task, "ok")), lambda: {"framework_version": "fake"})


if __name__ == "__main__":
    sys.exit(main())
