"""The merged report: a row per framework, a column per variant·precision·devices, marks that flag problems."""
import json

import pandas as pd
import pytest

from scripts import report
from shared.record import make_record, write_record


def record(framework="pytorch", task="cnn", precision="fp32", status="ok", host="a", unstable=False, warmup=0.1,
           **metrics):
    cell = {"framework": framework, "task": task, "variant": "cpu", "precision": precision, "gpus": 1,
            "device": "cpu", "data": "synthetic", "scale": "demo"}
    r = make_record(cell, status, metrics=metrics or {"train_seconds": 12.34, "accuracy": 0.912},
                    timing={"unstable": unstable, "warmup": warmup}, system={"host": host, "gpus": []},
                    reason=None if status == "ok" else "why")
    return r


def write_run(folder, records):
    for r in records:
        c = r["cell"]
        write_record(folder / "cells" / f"{c['framework']}-{c['task']}-{c['precision']}-{r['system']['host']}.json", r)
    return folder


def test_report_tables_csv_jsonl_and_plot(tmp_path):
    run = write_run(tmp_path / "run", [
        record(), record(precision="bf16", unstable=True, train_seconds=8.0, accuracy=0.9),
        record(framework="tensorflow", status="skipped"),
        record(task="resnet50", seconds_per_1000_images=50.0),
        record(task="densenet121", train_minutes=0.5, auc=0.71, train_seconds=30.0),
        record(framework="jax", task="densenet121", train_minutes=1.0, auc=0.7, train_seconds=60.0, warmup=50.0),
    ])
    paths = report.write_report(run)
    md = paths["markdown"].read_text()
    assert "| pytorch" in md and "| tensorflow" in md
    assert "12.3 (91.2%)" in md and "8† (90.0%)" in md and "SKIPPED" in md and "0.5 (AUC 0.710)" in md
    assert "1* (AUC 0.700)" in md  # 50 s of 60 s was the first step: flagged
    assert len(pd.read_csv(paths["csv"])) == 6
    assert len(paths["jsonl"].read_text().splitlines()) == 6
    assert paths["plot"].read_bytes()[:4] == b"\x89PNG"


def test_columns_mixing_machines_are_flagged(tmp_path):
    a = write_run(tmp_path / "a", [record(host="a")])
    b = write_run(tmp_path / "b", [record(host="b", train_seconds=20.0, accuracy=0.9)])
    md = report.write_report(a, b, out=tmp_path)["markdown"].read_text()
    assert "cpu · fp32 · 1×cpu ‡" in md and "12.3 (91.2%) / 20 (90.0%)" in md  # both shown, never averaged


def test_empty_or_unreadable_runs_are_clear_errors(tmp_path):
    with pytest.raises(report.ReportError, match="no records"):
        report.write_report(tmp_path)
    (tmp_path / "cells").mkdir()
    (tmp_path / "cells" / "x.json").write_text(json.dumps({"schema": 0}))
    with pytest.raises(report.ReportError, match="schema 0"):
        report.write_report(tmp_path)


def test_verify_gives_ratios_and_verdicts(tmp_path, capsys):
    from scripts import verify
    reference = write_run(tmp_path / "ref", [record(), record(task="gru", train_seconds=10.0, accuracy=0.9),
                                             record(task="resnet50", seconds_per_1000_images=50.0)])
    measured = write_run(tmp_path / "run", [record(train_seconds=13.0, accuracy=0.92),
                                            record(task="gru", train_seconds=30.0, accuracy=0.9)])
    assert verify.main(["--reference", str(reference), "--run", str(measured)]) == 1
    out = capsys.readouterr().out
    lines = {line.split()[0]: line for line in out.splitlines()[3:]}
    assert "ok" in lines["pytorch-cnn-fp32-a"] and "1.05" in lines["pytorch-cnn-fp32-a"]
    assert "slower" in lines["pytorch-gru-fp32-a"] and "3" in lines["pytorch-gru-fp32-a"]
    assert "missing" in lines["pytorch-resnet50-fp32-a"]
