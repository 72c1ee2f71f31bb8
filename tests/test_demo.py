"""The demo path end to end, at the tiny scale: matrix -> local executor -> records -> merged table and plot."""

from argparse import Namespace

import pandas as pd
import pytest
from conftest import framework_python

from scripts import run
from scripts.plan.matrix import expand, load


@pytest.mark.framework
def test_smoke_profile_end_to_end(tmp_path, synthetic_data, capsys):
    framework_python("pytorch")
    code = run.main(["--profile", "smoke", "--results", str(tmp_path), "--data-root", str(synthetic_data.parent)])
    out = capsys.readouterr().out
    assert code == 0, out
    run_dir = next(tmp_path.glob("smoke-*"))
    cells = expand(load(), "smoke").cells
    table = pd.read_csv(run_dir / "results.csv")
    assert sorted(table["cell.framework"] + "-" + table["cell.task"]) == sorted(
        f"{c.framework}-{c.task}" for c in cells
    )
    assert (table["status"] == "ok").all()
    md = (run_dir / "results.md").read_text()
    for title in ("CNN (VGG-style)", "GRU on IMDB", "ResNet-50", "DenseNet-121"):
        assert title in md and title in out
    assert (run_dir / "results.png").stat().st_size > 1000

    # Resuming the finished run launches nothing and leaves the records as they were.
    before = {p.name: p.stat().st_mtime_ns for p in (run_dir / "cells").iterdir()}
    assert (
        run.main(
            [
                "--profile",
                "smoke",
                "--results",
                str(tmp_path),
                "--data-root",
                str(synthetic_data.parent),
                "--resume",
                "latest",
            ]
        )
        == 0
    )
    assert {p.name: p.stat().st_mtime_ns for p in (run_dir / "cells").iterdir()} == before


@pytest.mark.unit
def test_missing_real_data_stops_before_launching(tmp_path, capsys):
    assert run.main(["--profile", "full", "--results", str(tmp_path), "--data-root", str(tmp_path)]) == 2
    assert "run `make data` first" in capsys.readouterr().err
    assert not list(tmp_path.glob("full-*"))


@pytest.mark.unit
def test_only_keeps_the_cells_that_contain_any_of_its_texts_and_names_them_when_none_does(tmp_path):
    args = Namespace(
        resume=None, results=tmp_path, profile="demo", python=None, plan=None, only=["pytorch-cnn", "jax-gru"]
    )
    plan_file, _ = run.plan_for(args, load())
    assert {c.id for c in plan_file.cells} == {
        "pytorch-cnn-cpu-fp32-1cpu",
        "jax-gru-cpu-fp32-1cpu",
        "keras-jax-gru-cpu-fp32-1cpu",
    }
    assert set(plan_file.plan.cells) == {c.cell for c in plan_file.cells}
    args.only = ["no-such", "cell"]
    with pytest.raises(run.RunError, match="--only 'no-such' 'cell' matches no cell of profile demo"):
        run.plan_for(args, load())
