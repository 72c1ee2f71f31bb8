"""Run the demo profile's cells through scripts.run.execute with the fake runners (a separate process, so the
resume test can kill it). Usage: python tests/fake_run.py RUN_DIR DATA_ROOT"""

import sys
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from scripts.launch.executors import LocalExecutor, RunSettings  # noqa: E402
from scripts.plan.matrix import expand, load  # noqa: E402
from scripts.run import execute  # noqa: E402


def pytorch_demo():
    """The demo profile's PyTorch cells: eight cells, all four tasks, two precisions."""
    plan = expand(load(), "demo")
    return replace(plan, cells=tuple(c for c in plan.cells if c.framework == "pytorch"))


def main(run_dir, data_root, timeout_s=60.0):
    plan = pytorch_demo()
    executor = LocalExecutor({c.framework: sys.executable for c in plan.cells}, root=ROOT / "tests" / "fake")
    run = RunSettings(Path(run_dir).name, 1, float(timeout_s), Path(data_root))
    execute(plan, executor, Path(run_dir), run)


if __name__ == "__main__":
    main(*sys.argv[1:])
