"""The demo path end to end, at the tiny scale: matrix -> local executor -> records -> merged table and plot."""

from argparse import Namespace

import pandas as pd
import pytest
from conftest import framework_python

from scripts import run
from scripts.plan.matrix import expand, load
from scripts.results import records


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
    assert f"{len(cells)} cells: {len(cells)} ok · 0 skipped · 0 failed" in out and "make verify RUN=latest" in out

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
        resume=None,
        results=tmp_path,
        profile="demo",
        python=None,
        plan=None,
        only=["pytorch-cnn", "jax-gru"],
        framework=None,
    )
    plan_file, _ = run.plan_for(args, load())
    assert {c.id for c in plan_file.cells} == {
        "pytorch-cnn-cpu-fp32-1cpu",
        "jax-gru-cpu-fp32-1cpu",
        "keras-jax-gru-cpu-fp32-1cpu",
    }
    assert set(plan_file.plan.cells) == {c.cell for c in plan_file.cells}
    args.only = ["no-such", "cell"]
    with pytest.raises(run.RunError, match="--only 'no-such' --only 'cell' matches no cell of profile demo"):
        run.plan_for(args, load())


@pytest.mark.unit
def test_framework_keeps_that_frameworks_cells_alone_and_names_the_profiles_frameworks_when_none_match(tmp_path):
    args = Namespace(resume=None, results=tmp_path, profile="demo", python=None, plan=None, only=None)
    args.framework = ["pytorch"]
    plan_file, _ = run.plan_for(args, load())
    assert plan_file.cells and {c.cell.framework for c in plan_file.cells} == {"pytorch"}
    args.only, args.framework = ["gru"], ["pytorch", "jax"]
    assert {c.id for c in run.plan_for(args, load())[0].cells} == {"pytorch-gru-cpu-fp32-1cpu", "jax-gru-cpu-fp32-1cpu"}
    args.only, args.framework = None, ["no-such"]
    with pytest.raises(
        run.RunError, match=r"--framework no-such matches no cell of profile demo \(its frameworks: .*pytorch"
    ):
        run.plan_for(args, load())


@pytest.mark.unit
def test_a_run_ends_with_its_count_its_files_and_the_next_commands(tmp_path):
    outputs = {k: tmp_path / f"results.{k}" for k in ("markdown", "csv", "plot")}
    text = run.ending(["ok", "ok", "skipped", None, "timeout"], tmp_path, outputs, 12.0, 340.0)
    first, *rest = text.splitlines()
    assert first == "5 cells: 2 ok · 1 skipped · 0 failed · 1 missing · 1 timeout"
    assert any("make verify RUN=latest" in line for line in rest)
    assert any("make site RUN=latest" in line for line in rest)
    assert f"records: {tmp_path / 'cells'}" in text and "cells 340 s" in text


@pytest.mark.unit
def test_a_cells_line_leads_with_the_tables_number_and_names_the_time_waited():
    metrics = {"train_seconds": 49.7, "steady_state_seconds": 7.87, "accuracy": 0.5}
    record = {"status": "ok", "reason": None, "cell": {"task": "cnn"}, "metrics": metrics}
    assert run.describe(record) == "steady state 7.87 s (waited 49.7 s), accuracy 0.500"
    record = {
        "status": "ok",
        "reason": None,
        "cell": {"task": "resnet50"},
        "metrics": {"seconds_per_1000_images": 12.5},
    }
    assert run.describe(record) == "12.5 s per 1,000 images"
    record = {
        "status": "ok",
        "reason": None,
        "cell": {"task": "densenet121"},
        "metrics": {"train_minutes": 2.0, "steady_state_seconds": 90.0, "auc": 0.5},
    }
    assert run.describe(record) == "steady state 1.5 min (waited 2 min), auc 0.500"


@pytest.mark.unit
def test_the_progress_estimate_weighs_each_cell_by_the_reference_of_this_machine_class(monkeypatch):
    """The reference of this host's class gives each cell's seconds (start to finish); another class gives none."""
    from scripts.paths import RESULTS

    cpu = max((RESULTS / "reference").glob("cpu-*/cells"), key=lambda cells: len(list(cells.glob("*.json"))))
    klass = records.load(next(cpu.glob("*.json"))).machine_class
    plan = expand(load(), "demo")
    monkeypatch.setattr(run, "machine_class", lambda system, device: klass)
    expected = run.expected_seconds(plan)
    pytorch_cnn = records.load(cpu / "pytorch-cnn-cpu-fp32-1cpu.json")
    start, end = records.started(pytorch_cnn.data)
    assert expected["pytorch-cnn-cpu-fp32-1cpu"] == (end - start).total_seconds() > 0
    assert len(expected) >= len(plan.cells) - 5
    monkeypatch.setattr(run, "machine_class", lambda system, device: "cpu:another:f1-m1-s1:avx2:2c")
    assert run.expected_seconds(plan) == {}
