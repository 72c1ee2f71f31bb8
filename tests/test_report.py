"""The merged report and `verify`: tables that say what was measured, marks that flag problems, a plot that shows
every cell, and a verification whose verdict and exit code a person (or CI) can act on. Fabricated records only."""

import json
import re

import matplotlib.pyplot as plt
import pandas as pd
import pytest
from matplotlib.colors import to_rgba

from scripts.plan.matrix import Cell
from scripts.results import report, verify
from shared.params import params_hash
from shared.record import make_record, write_atomic, write_record

pytestmark = pytest.mark.unit

CPU = {
    "host": "a",
    "cpu": "AMD EPYC 9B14",
    "cpu_count": 2,
    "gpus": [],
    "driver": None,
    "cuda": None,
    "cudnn": None,
    "framework_version": "2.14.1",
    "cpu_flags": ["avx2", "fma"],
    "machine_class": "cpu:amd-epyc-9b14:avx2:2c",
}


def record(
    framework="pytorch",
    task="cnn",
    precision="fp32",
    status="ok",
    host="a",
    unstable=False,
    warmup=0.1,
    gpus=1,
    system=None,
    reason=None,
    tuning=None,
    **metrics,
):
    cell = {
        "framework": framework,
        "task": task,
        "variant": "cpu",
        "precision": precision,
        "gpus": gpus,
        "device": "cpu",
        "data": "synthetic",
        "scale": "demo",
        **({"tuning": tuning} if tuning else {}),
    }
    return make_record(
        cell,
        status,
        metrics=metrics or {"train_seconds": 12.34, "accuracy": 0.912},
        timing={"unstable": unstable, "warmup": warmup},
        system={**CPU, "host": host, "params_hash": params_hash(task, "demo"), **(system or {})}
        if system != {}
        else {},
        reason=reason if reason or status == "ok" else "why",
    )


def cell_id(r):
    return Cell(**r["cell"]).id  # a record's file name is its cell's id (verify refuses another)


def write_run(folder, records, plan=None):
    for r in records:
        write_record(folder / "cells" / f"{cell_id(r)}.json", r)
    if plan is not None:
        write_atomic(folder / "plan.json", json.dumps({"profile": "demo", "cells": plan}))
    return folder


# ---------------------------------------------------------------- report


def test_report_tables_csv_jsonl_and_plot(tmp_path):
    run = write_run(
        tmp_path / "run",
        [
            record(),
            record(precision="bf16", unstable=True, train_seconds=8.0, accuracy=0.9),
            record(framework="tensorflow", status="skipped", reason="bf16 needs avx512_bf16"),
            record(task="resnet50", seconds_per_1000_images=50.0),
            record(task="densenet121", train_minutes=0.5, auc=0.71, train_seconds=30.0),
            record(framework="jax", task="densenet121", train_minutes=1.0, auc=0.7, train_seconds=60.0, warmup=50.0),
        ],
    )
    paths = report.write_report(run)
    md = paths["markdown"].read_text()
    assert "| pytorch" in md and "| tensorflow" in md
    assert "12.3 (91.2%)" in md and "8† (90.0%)" in md and "0.5 (AUC 0.710)" in md
    assert "1* (AUC 0.700)" in md  # 50 s of 60 s was the first step: flagged
    assert "SKIPPED [1]" in md and "[1] bf16 needs avx512_bf16" in md  # the reason, not just the word
    assert len(pd.read_csv(paths["csv"])) == 6
    assert len(paths["jsonl"].read_text().splitlines()) == 6
    assert paths["plot"].read_bytes()[:4] == b"\x89PNG"
    assert "losses" not in paths  # no record has a loss curve: no empty chart


def test_a_tuned_cell_is_its_own_column_beside_its_default_one_and_old_records_are_default(tmp_path):
    old = record(framework="jax", train_seconds=20.0)
    del old["cell"]["tuning"]  # a record written before the tuning axis existed
    run = write_run(
        tmp_path / "run",
        [
            record(train_seconds=12.0),
            record(tuning="tuned", train_seconds=6.0),
            record(
                framework="chainer", tuning="tuned", status="skipped", reason="no tuned path is written for this task"
            ),
            old,
        ],
    )
    md = report.write_report(run)["markdown"].read_text()
    header = next(line for line in md.splitlines() if line.startswith("| framework") or "cpu · fp32" in line)
    assert "cpu · fp32 · 1×cpu · tuned" in header and header.count("cpu · fp32 · 1×cpu") == 2, header
    row = next(line for line in md.splitlines() if line.startswith("| pytorch"))
    assert "12" in row and "6" in row and "no tuned path is written" in md
    assert row.count("over default") == 1 and "×2.00 over default" in row  # the tuned cell's speed-up
    assert report.to_frame([old])["cell.tuning"].tolist() == ["default"]
    elsewhere = record(tuning="tuned", train_seconds=3.0)
    elsewhere["run_id"] = "another-run"  # a speed-up compares two cells of one run, never across runs
    frame = report.to_frame([record(train_seconds=12.0), elsewhere])
    assert frame["speedup"].isna().all()


def test_report_draws_every_frameworks_loss_curve_on_one_chart(tmp_path, monkeypatch):
    curves = {"pytorch": [2.3, 2.1, 1.8], "jax": [2.3, 2.2, 1.9], "tensorflow": [2.3, 2.0, 1.7]}
    run = write_run(
        tmp_path / "run",
        [record(framework=fw, train_seconds=1.0, accuracy=1.0, loss_curve=c) for fw, c in curves.items()]
        + [record(framework="chainer")],
    )
    drawn = []
    monkeypatch.setattr(report, "draw_losses", lambda ax, rows, title: drawn.append((rows, title)))
    paths = report.write_report(run)
    assert paths["losses"].read_bytes()[:4] == b"\x89PNG"
    ((rows, title),) = drawn  # one chart for the task, the record without a curve left out
    assert sorted(rows) == sorted((f"{fw} · cpu · fp32 · 1×cpu", c) for fw, c in curves.items()) and "CNN" in title


def test_each_table_says_what_was_measured_and_where(tmp_path):
    gpu = {
        "host": "g1",
        "cpu": "Intel Xeon Platinum 8480+",
        "cpu_count": 224,
        "driver": "580.65",
        "gpus": ["NVIDIA H200", "NVIDIA H200"],
        "cuda": "13.0",
        "cudnn": 91300,
        "framework_version": "2.14.1",
        "machine_class": "cpu:intel-xeon-platinum-8480:avx2:224c",
    }  # what its facts give (records.py checks)
    run = write_run(
        tmp_path / "run",
        [
            record(task="resnet50", seconds_per_1000_images=5.0, weights="imagenet", data_placement="host", system=gpu),
            record(
                framework="jax",
                task="resnet50",
                seconds_per_1000_images=6.0,
                weights="random",
                data_placement="host",
                system={**gpu, "framework_version": "0.8.1", "cuda": "12.8", "cudnn": 90800},
            ),
            record(task="cnn", train_seconds=10.0, accuracy=0.8, data_placement="device"),
        ],
    )
    md = report.write_report(run)["markdown"].read_text()
    resnet = md[md.index("### ResNet-50") :]
    assert "data: synthetic, scale demo" in resnet
    assert "data placement: host memory, each batch copied to the device inside the clock" in resnet
    assert "weights: ImageNet (torchvision's, in the canonical layout) (pytorch); random canonical" in resnet
    assert "machine: Intel Xeon Platinum 8480+ (avx2, fma), 224 cores, NVIDIA H200, driver 580.65 (host g1)" in resnet
    assert "pytorch: 2.14.1 (cpu image: CUDA 13.0, cuDNN 9.13.0)" in resnet  # per framework and image, dotted
    assert "jax: 0.8.1 (cpu image: CUDA 12.8, cuDNN 9.8.0)" in resnet
    cnn = md[md.index("### CNN") : md.index("### ResNet-50")]
    assert "machine: AMD EPYC 9B14 (avx2, fma), 2 cores, no GPU (host a)" in cnn
    assert "data placement: the whole set on the device before the clock starts" in cnn
    assert "weights" not in cnn and "vm/[]" not in md


def test_training_tasks_show_the_steady_state_time_beside_the_time_waited(tmp_path):
    run = write_run(
        tmp_path / "run",
        [
            record(train_seconds=12.34, steady_state_seconds=9.8, warmup_seconds=2.0, accuracy=0.912),
            record(framework="jax", train_seconds=70.0, steady_state_seconds=8.0, warmup_seconds=60.0, accuracy=0.9),
            record(task="densenet121", train_seconds=120.0, train_minutes=2.0, steady_state_seconds=90.0, auc=0.8),
        ],
    )
    md = report.write_report(run)["markdown"].read_text()
    assert "as waited (compile and first step included) / steady state" in md
    assert "12.3 / 9.8 (91.2%)" in md
    assert "70* / 8 (90.0%)" in md  # a 60 s compile is flagged and no longer hides the 8 s of training
    assert "2 / 1.5 (AUC 0.800)" in md  # DenseNet-121 in minutes, both times


def test_formulation_differences_are_numbered_footnotes(tmp_path):
    eps_hat = "Adam ε added before bias correction (Keras' epsilon-hat form)"
    run = write_run(
        tmp_path / "run",
        [
            record(task="gru", framework="keras-tf", train_seconds=5.0, accuracy=0.9, differences=[eps_hat]),
            record(
                task="gru",
                framework="keras-jax",
                train_seconds=6.0,
                accuracy=0.9,
                differences=["GRU bias layout", eps_hat],
            ),
            record(task="gru", train_seconds=4.0, accuracy=0.9, differences=[]),
        ],
    )
    md = report.write_report(run)["markdown"].read_text()
    assert "6 (90.0%) [1,2]" in md and "5 (90.0%) [2]" in md  # numbered in the order the rows are read
    assert re.search(r"\| 4 \(90\.0%\) +\|", md)  # no difference, no note
    assert "[1] GRU bias layout" in md and f"[2] {eps_hat}" in md


def test_host_syncs_a_framework_imposes_are_footnoted_on_the_cells_that_have_them(tmp_path):
    """The runners name them in `differences` (runners/pytorch, runners/mxnet_gluon: AMP_HOST_SYNC under amp;
    runners/keras: FIT_HOST_SYNCS on TensorFlow, every precision); the same text is one note, wherever it appears."""
    scaler = "amp: GradScaler.step reads its inf/NaN check on the host every step (a sync PyTorch imposes)"
    logs = "Keras on TensorFlow: fit converts every step's logs to Python floats (a host sync it imposes)"
    run = write_run(
        tmp_path / "run",
        [
            record(precision="amp", train_seconds=3.0, accuracy=0.9, differences=[scaler]),
            record(precision="fp32", train_seconds=4.0, accuracy=0.9, differences=[]),
            record(framework="keras-tf", precision="amp", train_seconds=5.0, accuracy=0.9, differences=[logs]),
            record(framework="keras-tf", precision="fp32", train_seconds=6.0, accuracy=0.9, differences=[logs]),
        ],
    )
    md = report.write_report(run)["markdown"].read_text()
    compact, keras_row = [line for line in md.splitlines() if line.startswith("| keras-tf")]  # one number; details
    pytorch_row = [line for line in md.splitlines() if line.startswith("| pytorch")][1]
    assert compact.count("[1]") == 2 and "6 (×1.50) [1]" in compact  # next to the number it qualifies
    assert keras_row.count("[1]") == 2 and f"[1] {logs}" in md  # one note, both keras-tf cells
    assert "3 (90.0%) [2]" in pytorch_row and f"[2] {scaler}" in md  # amp only: fp32 has no note
    assert re.search(r"\| 4 \(90\.0%\) +\|", pytorch_row)
    assert "a host sync the framework imposes on every step" in md  # the legend says what such a note is


def test_columns_mixing_machine_classes_are_flagged_and_two_hosts_of_one_class_are_not(tmp_path):
    a = write_run(tmp_path / "a", [record(host="a")])
    b = write_run(tmp_path / "b", [record(host="b", train_seconds=20.0, accuracy=0.9)])
    md = report.write_report(a, b, out=tmp_path / "merged")["markdown"].read_text()
    assert "cpu · fp32 · 1×cpu ‡" not in md and "12.3 (91.2%); 20 (90.0%)" in md  # both shown, never averaged
    avx512 = {"cpu_flags": ["avx2", "avx512f"], "machine_class": "cpu:amd-epyc-9b14:avx512:2c"}
    c = write_run(tmp_path / "c", [record(host="c", train_seconds=8.0, accuracy=0.9, system=avx512)])
    md = report.write_report(a, c, out=tmp_path / "merged")["markdown"].read_text()
    assert "cpu · fp32 · 1×cpu ‡" in md and "12.3 (91.2%); 8 (90.0%)" in md
    assert (
        "machines: AMD EPYC 9B14 (avx2, avx512f), 2 cores, no GPU (host c); AMD EPYC 9B14 (avx2, fma), 2 cores, "
        "no GPU (host a)"
    ) in md


def test_a_crashed_cell_without_system_information_is_not_another_machine(tmp_path):
    run = write_run(
        tmp_path / "run",
        [
            record(),
            record(precision="bf16", status="timeout", system={}, reason="killed after the cell timeout of 900 s"),
        ],
    )
    md = report.write_report(run)["markdown"].read_text()
    assert "‡" not in md.split("†")[0] and "TIMEOUT [1]" in md and "[1] killed after the cell timeout" in md


def test_plot_colours_by_precision_and_keeps_a_slot_for_cells_that_did_not_run():
    frame = report.to_frame(
        [
            record(train_seconds=12.0, steady_state_seconds=9.0, accuracy=0.9),
            record(precision="bf16", train_seconds=8.0, steady_state_seconds=6.0, accuracy=0.9),
            record(framework="jax", status="failed", reason="RuntimeError: boom"),
            record(framework="tensorflow", status="skipped", reason="no bf16 on this CPU", precision="bf16"),
        ]
    )
    fig, ax = plt.subplots()
    report.draw_task(ax, frame, "cnn")
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert labels == ["pytorch · bf16", "pytorch · fp32", "jax · fp32", "tensorflow · bf16"]  # fastest first
    texts = [t.get_text() for t in ax.texts]
    assert "FAILED  RuntimeError: boom" in texts and "SKIPPED  no bf16 on this CPU" in texts
    filled = [p.get_facecolor() for p in ax.patches if p.get_width() > 0 and p.get_facecolor()[3] == 1]
    assert to_rgba("tab:blue") in filled and to_rgba("tab:red") in filled
    hatched = [p for p in ax.patches if p.get_hatch() == "////"]
    assert sorted(p.get_width() for p in hatched) == [6.0, 9.0]  # the steady-state bars beside the waited ones
    plt.close(fig)


def test_the_plot_puts_the_fastest_first_not_the_alphabet():
    """results.png's rows per task by the number the tables show (the steady state, lower first), not by name; cells
    that did not run last; ResNet-50 by its seconds per 1,000 images."""
    frame = report.to_frame(
        [
            record(framework="jax", train_seconds=10.0, steady_state_seconds=9.0),
            record(framework="cntk", status="failed", reason="RuntimeError: boom"),
            record(framework="pytorch", train_seconds=20.0, steady_state_seconds=3.0),  # slower as waited
            record(framework="tensorflow", train_seconds=7.0),  # no steady state: its time as waited
            record(framework="chainer", precision="bf16", train_seconds=4.0, steady_state_seconds=3.0),
        ]
    )
    rows, labels = report.bar_rows(frame)
    assert labels == ["chainer · bf16", "pytorch · fp32", "tensorflow · fp32", "jax · fp32", "cntk · fp32"]
    assert labels != sorted(labels)
    resnet = report.to_frame(
        [record(framework=f, task="resnet50", seconds_per_1000_images=v) for f, v in (("jax", 9.0), ("mxnet", 2.0))]
    )
    assert list(report.by_speed(resnet)["cell.framework"]) == ["mxnet", "jax"]
    assert "_v" not in rows and "_none" not in rows


def test_the_plot_titles_wrap_and_nothing_is_cut(tmp_path):
    """A long title wraps in lines of TITLE_CHARS; the saved image is as wide as its widest text (bbox_inches)."""
    frame = report.to_frame([record(framework=f"framework-{i}", train_seconds=1.0 + i) for i in range(3)])
    frame["cell.data"] = "synthetic-" + "x" * 150  # a title longer than any line
    report.plot(frame, tmp_path / "results.png")
    fig, ax = plt.subplots()
    report.draw_losses(ax, [("a", [1.0, 0.5])], "y" * 200)
    assert all(len(line) <= report.TITLE_CHARS for line in ax.get_title(loc="left").splitlines())
    plt.close(fig)
    from PIL import Image

    with Image.open(tmp_path / "results.png") as image:
        assert image.width >= 9 * 120 - 20  # at least the figure: wider where a label needs it, never cropped


def test_plot_whiskers_span_the_spread_of_the_timed_passes():
    r = record(task="resnet50", seconds_per_1000_images=50.0)
    r["timing"].update({"min": 1.6, "median": 2.0, "max": 2.4})
    time, steady, spread = report.times_of(report.to_frame([r]).to_dict("records")[0])
    assert (time, steady) == (50.0, None) and spread == pytest.approx((40.0, 60.0))
    train = record(train_seconds=40.0, epoch_seconds=[16.0, 7.0, 8.0, 9.0], steady_state_seconds=32.0)
    assert report.times_of(report.to_frame([train]).to_dict("records")[0])[2] == pytest.approx((28.0, 36.0))


def test_a_single_timed_pass_plots_although_its_whisker_rounds_below_the_bar(tmp_path):
    """One pass: min = median = max, and 81 × 0.1 / 0.1 is 81 + 1.4e-14 in floating point (CI's smoke run once)."""
    r = record(task="resnet50", seconds_per_1000_images=81.0)
    r["timing"].update({"min": 0.1, "median": 0.1, "max": 0.1})
    write_run(tmp_path / "run", [r])
    assert report.write_report(tmp_path / "run")["plot"].stat().st_size > 1000


def test_empty_or_unreadable_runs_are_clear_errors(tmp_path):
    with pytest.raises(report.ReportError, match="no records"):
        report.write_report(tmp_path)
    (tmp_path / "cells").mkdir()
    (tmp_path / "cells" / "x.json").write_text(json.dumps({"schema": 0}))
    with pytest.raises(report.ReportError, match="no sound record"):  # quarantined, and nothing else to report
        report.write_report(tmp_path)
    assert "schema 0" in (next((tmp_path / "quarantine").glob("*.reason.txt"))).read_text()


# ---------------------------------------------------------------- verify


def verify_main(reference, run, capsys, *extra):
    code = verify.main(["--reference", str(reference), "--run", str(run), *extra])
    out = capsys.readouterr().out
    rows = {line.split()[0]: line for line in out.splitlines() if line.startswith(("pytorch", "jax", "tensorflow"))}
    return code, rows, out.strip().splitlines()[-1]


@pytest.fixture
def reference(tmp_path):
    return write_run(
        tmp_path / "ref",
        [
            record(),
            record(task="gru", train_seconds=10.0, accuracy=0.9),
            record(task="resnet50", seconds_per_1000_images=50.0),
            record(task="densenet121", train_minutes=1.0, train_seconds=60.0, auc=0.8),
            record(framework="jax", task="densenet121", status="skipped", reason="no data-parallel fit"),
        ],
    )


def all_cells(reference):
    return sorted(p.stem for p in (reference / "cells").glob("*.json"))


def test_verify_passes_when_every_cell_is_as_expected(reference, tmp_path, capsys):
    run = write_run(
        tmp_path / "run",
        [
            record(train_seconds=13.0, accuracy=0.92),
            record(task="gru", train_seconds=9.0, accuracy=0.89),
            record(task="resnet50", seconds_per_1000_images=55.0),
            record(task="densenet121", train_minutes=1.2, train_seconds=72.0, auc=0.79),
            record(framework="jax", task="densenet121", status="skipped", reason="no data-parallel fit"),
        ],
        plan=all_cells(reference),
    )
    code, rows, verdict = verify_main(reference, run, capsys)
    assert code == 0
    assert "ok" in rows["pytorch-cnn-cpu-fp32-1cpu"] and "1.05" in rows["pytorch-cnn-cpu-fp32-1cpu"]
    assert "skipped as in the reference" in rows["jax-densenet121-cpu-fp32-1cpu"]
    assert verdict.startswith("OK: 5 cells as expected — steady state within ×1.5 of the reference")
    assert "once what this machine's calibration explains is divided out" in verdict


def test_verify_a_cell_slower_than_the_run_fails_with_a_count(reference, tmp_path, capsys):
    run = write_run(
        tmp_path / "run",
        [
            record(train_seconds=13.0, accuracy=0.92),
            record(task="gru", train_seconds=30.0, accuracy=0.9),  # 3× where the others are ~1×
            record(task="resnet50", seconds_per_1000_images=52.0),
            record(task="densenet121", train_minutes=1.0, train_seconds=60.0, auc=0.8),
            record(framework="jax", task="densenet121", status="skipped", reason="no data-parallel fit"),
        ],
        plan=all_cells(reference),
    )
    code, rows, verdict = verify_main(reference, run, capsys)
    assert code == 1
    assert "slower" in rows["pytorch-gru-cpu-fp32-1cpu"] and "no rank test" in rows["pytorch-gru-cpu-fp32-1cpu"]
    assert verdict.startswith("FAIL: 1 of 5 cells slower than the reference beyond ×1.5")
    assert verdict.split(" (")[1].startswith(
        "only what the calibration explains divided out): pytorch-gru-cpu-fp32-1cpu"
    )
    # no looser tolerance: verify's ×1.5 is a cap (a noisy machine is a defect to fix, not a reason to look away)
    with pytest.raises(SystemExit):
        verify_main(reference, run, capsys, "--time-tolerance", "3.5")


def test_verify_quality_off_fails_even_when_fast(reference, tmp_path, capsys):
    run = write_run(
        tmp_path / "run",
        [
            record(train_seconds=3.0, accuracy=0.5),  # four times as fast, and wrong: a broken install, not a fast one
            record(task="gru", train_seconds=10.0, accuracy=0.9),
            record(task="resnet50", seconds_per_1000_images=50.0),
            record(task="densenet121", train_minutes=1.0, train_seconds=60.0, auc=0.8),
            record(framework="jax", task="densenet121", status="skipped", reason="no data-parallel fit"),
        ],
        plan=all_cells(reference),
    )
    code, rows, verdict = verify_main(reference, run, capsys)
    assert code == 1 and "accuracy 0.500, expected 0.912" in rows["pytorch-cnn-cpu-fp32-1cpu"]
    assert "faster than possible: this cell's clock?" in rows["pytorch-cnn-cpu-fp32-1cpu"]
    assert (
        "1 of 5 cells faster than possible, beyond ×1.5: check these cells' clocks: pytorch-cnn-cpu-fp32-1cpu"
        in verdict
    )
    assert "1 of 5 cells with accuracy/AUC off" in verdict


def test_verify_failed_missing_and_unexpectedly_skipped_cells_fail(reference, tmp_path, capsys):
    run = write_run(
        tmp_path / "run",
        [
            record(status="failed", reason="RuntimeError: boom"),
            record(task="gru", status="skipped", reason="no bf16 here"),
            record(task="densenet121", train_minutes=1.0, train_seconds=60.0, auc=0.8),
            record(framework="jax", task="densenet121", status="failed", reason="GpuMissing"),
        ],
        plan=all_cells(reference),
    )  # resnet50 was planned and never written
    code, rows, verdict = verify_main(reference, run, capsys)
    assert code == 1
    assert "failed: RuntimeError: boom" in rows["pytorch-cnn-cpu-fp32-1cpu"]
    assert "skipped, the reference ran it" in rows["pytorch-gru-cpu-fp32-1cpu"]
    assert "missing" in rows["pytorch-resnet50-cpu-fp32-1cpu"] and "failed" in rows["jax-densenet121-cpu-fp32-1cpu"]
    assert verdict.startswith(
        "FAIL: 2 of 5 cells failed or timed out (see each log under logs/); 1 missing (no "
        "record); 1 skipped where the reference ran"
    )


def test_verify_a_reference_cell_left_out_of_the_runs_plan_fails_unless_partial_is_asked_for(
    reference, tmp_path, capsys
):
    """A run cannot leave a cell out of its own plan.json to leave it unjudged: without --partial every reference
    cell is expected; with it, the cells outside the plan are named, not failed."""
    run = write_run(
        tmp_path / "run",
        [
            record(train_seconds=12.0, accuracy=0.91),
            record(precision="bf16", train_seconds=9.0, accuracy=0.9),  # a cell the reference never ran
        ],
        plan=["pytorch-cnn-cpu-fp32-1cpu", "pytorch-cnn-cpu-bf16-1cpu"],
    )
    code, rows, verdict = verify_main(reference, run, capsys)
    assert code == 1 and "missing: the run has no record of this cell" in rows["pytorch-gru-cpu-fp32-1cpu"]
    assert verdict.startswith("FAIL: 4 missing (no record)")
    code, rows, verdict = verify_main(reference, run, capsys, "--partial")
    assert code == 0
    assert "no reference" in rows["pytorch-cnn-cpu-bf16-1cpu"]
    assert "pytorch-gru-cpu-fp32-1cpu" not in rows  # not in this run's plan: not listed cell by cell
    assert verdict.startswith("OK: 1 cell as expected")
    assert verdict.endswith(
        "; 1 cell not compared (no reference record); 4 reference cells not in this run's plan, not judged (--partial)"
    )


def test_verify_with_nothing_in_common_is_incomparable_and_says_how_to_make_a_reference(reference, tmp_path, capsys):
    run = write_run(tmp_path / "run", [record(framework="tensorflow")], plan=["tensorflow-cnn-cpu-fp32-1cpu"])
    assert verify.main(["--reference", str(reference), "--run", str(run), "--partial"]) == verify.INCOMPARABLE
    out = capsys.readouterr().out
    assert "INCOMPARABLE: nothing compared" in out and "make reference" in out
    assert verify.main(["--reference", str(reference), "--run", str(run)]) == 1  # the whole matrix: all missing
    assert "FAIL: 5 missing (no record)" in capsys.readouterr().out


def test_verify_without_a_plan_expects_every_reference_cell(reference, tmp_path, capsys):
    run = write_run(tmp_path / "run", [record(train_seconds=12.0, accuracy=0.91)])  # e.g. a merged folder
    code, rows, verdict = verify_main(reference, run, capsys)
    assert code == 1 and "missing" in rows["pytorch-gru-cpu-fp32-1cpu"] and "4 missing (no record)" in verdict


def test_verify_usage_errors_exit_2(reference, tmp_path, capsys):
    assert verify.main(["--reference", str(tmp_path / "nope"), "--run", str(tmp_path)]) == 2
    assert "no reference records" in capsys.readouterr().err
    assert verify.main(["--reference", str(reference), "--run", str(tmp_path / "typo")]) == 2
    assert "is not a run folder (no cells/)" in capsys.readouterr().err


def test_verify_a_record_without_its_time_is_off_and_a_failed_reference_judges_nothing(tmp_path, capsys):
    reference = write_run(tmp_path / "ref", [record(), record(task="gru", status="failed", reason="boom")])
    run = write_run(
        tmp_path / "run",
        [record(accuracy=0.912), record(task="gru", train_seconds=5.0, accuracy=0.9)],
        plan=["pytorch-cnn-cpu-fp32-1cpu", "pytorch-gru-cpu-fp32-1cpu"],
    )
    code, rows, verdict = verify_main(reference, run, capsys)
    assert code == 1 and "no train_seconds in the record" in rows["pytorch-cnn-cpu-fp32-1cpu"]
    assert "not compared: the reference cell is failed" in rows["pytorch-gru-cpu-fp32-1cpu"]
    assert verdict.startswith("FAIL: 1 ok but without a time") and "1 cell not compared" in verdict


def test_the_efficiency_says_its_denominator_and_flags_the_implausible(tmp_path):
    """One denominator per machine: the CPU's cores × clock × FMA width from the record's facts (here 2 × 1000 MHz ×
    32 FLOP a cycle = 64 GFLOP/s), never below the best GEMM any cell of that machine measured (caffe2's 128: a VM's
    reported clock is below what its cores reach, and the fastest honest cells read "implausible"). Beside it, the
    framework's own GEMM, given as it is above 100 % too (a model's kernels may beat one GEMM); above the peak is
    implausible and no efficiency."""
    clock = {"cpu_mhz": 1000}
    cells = [("pytorch", 32e9, 48e9), ("jax", 32e9, 16e9), ("caffe2", 96e9, 128e9), ("mxnet-gluon", 256e9, 64e9)]
    run = write_run(
        tmp_path / "run",
        [
            *(
                record(
                    framework=framework,
                    train_seconds=10.0,
                    accuracy=0.9,
                    achieved_flops=achieved,
                    system={**clock, "calibration": {"gemm_fp32_flops": gemm}},
                )
                for framework, achieved, gemm in cells
            ),
            record(
                framework="tensorflow",
                train_seconds=10.0,
                accuracy=0.9,
                achieved_flops=32e9,
                system={"calibration": {"gemm_fp32_flops": 64e9}},
            ),  # a record made before the clock facts: no peak, its own GEMM alone
        ],
    )
    md = report.write_report(run)["markdown"].read_text()
    assert "10 eff 25% peak, 67% GEMM (90.0%)" in md  # of caffe2's 128 GFLOP/s GEMM, not of the clock's 64
    assert "10 eff 25% peak, 200% GEMM (90.0%)" in md
    assert "10 eff 75% peak, 75% GEMM (90.0%)" in md  # 150 % of the clock's peak: no longer implausible
    assert "10 eff implausible (200% of the device's peak) (90.0%)" in md
    assert "10 eff 50% GEMM (90.0%)" in md
    assert "eff n% peak the steady state's model FLOP/s as a share of the device's peak" in md


def test_an_accuracy_below_its_siblings_is_explained_next_to_its_cell(tmp_path):
    """More than 0.05 below the median of the same task, data and scale: a note beside the number, saying what the
    record tells (a CNN from before the shared start drew its own initial weights); within 0.05: no note."""
    run = write_run(
        tmp_path / "run",
        [
            record(framework="pytorch", train_seconds=3.0, accuracy=1.0, init="canonical"),
            record(framework="jax", train_seconds=3.0, accuracy=0.99, init="canonical"),
            record(framework="mxnet-gluon", train_seconds=3.0, accuracy=0.96, init="canonical"),  # 0.04 below: fine
            record(framework="keras-tf", train_seconds=3.0, accuracy=0.793),  # its own start
            record(framework="chainer", train_seconds=3.0, accuracy=0.80, init="canonical"),
        ],
    )
    md = report.write_report(run)["markdown"].read_text()
    rows = {}
    for line in md.splitlines():  # the first table: one number per cell
        if line.startswith("| "):
            rows.setdefault(line.split("|")[1].strip(), line)
    assert re.search(r"\(×1\.00\) \[\d\]", rows["keras-tf"]) and re.search(r"\(×1\.00\) \[\d\]", rows["chainer"])
    assert "[" not in rows["mxnet-gluon"] and "[" not in rows["pytorch"]
    assert (
        "test accuracy 79.3% is below its siblings' median 96.0% on the same data and scale: this record "
        "predates the shared start" in md
    )
    assert "test accuracy 80.0% is below its siblings' median 96.0%" in md and "nothing in its record explains it" in md
