"""The demo path end to end, at the tiny scale: matrix -> local executor -> records -> merged table and plot."""
import pandas as pd
import pytest

from conftest import framework_python
from scripts import run
from scripts.matrix import expand, load


@pytest.mark.slow
def test_smoke_profile_end_to_end(tmp_path, synthetic_data, capsys):
    framework_python("pytorch")
    code = run.main(["--profile", "smoke", "--results", str(tmp_path), "--data-root", str(synthetic_data.parent)])
    out = capsys.readouterr().out
    assert code == 0, out
    run_dir = next(tmp_path.glob("smoke-*"))
    cells = expand(load(), "smoke").cells
    table = pd.read_csv(run_dir / "results.csv")
    assert sorted(table["cell.framework"] + "-" + table["cell.task"]) == sorted(f"{c.framework}-{c.task}"
                                                                                 for c in cells)
    assert (table["status"] == "ok").all()
    md = (run_dir / "results.md").read_text()
    for title in ("CNN (VGG-style)", "GRU on IMDB", "ResNet-50", "DenseNet-121"):
        assert title in md and title in out
    assert (run_dir / "results.png").stat().st_size > 1000

    # Resuming the finished run launches nothing and leaves the records as they were.
    before = {p.name: p.stat().st_mtime_ns for p in (run_dir / "cells").iterdir()}
    assert run.main(["--profile", "smoke", "--results", str(tmp_path), "--data-root", str(synthetic_data.parent),
                     "--resume", "latest"]) == 0
    assert {p.name: p.stat().st_mtime_ns for p in (run_dir / "cells").iterdir()} == before


def test_missing_real_data_stops_before_launching(tmp_path, capsys):
    assert run.main(["--profile", "full", "--results", str(tmp_path), "--data-root", str(tmp_path)]) == 2
    assert "run `make data` first" in capsys.readouterr().err
    assert not list(tmp_path.glob("full-*"))
