"""Merge the records of one or more runs into JSON Lines, CSV, Markdown tables shaped like the seed's, and a plot.

    python -m scripts.report results/demo-20261202-153000 [more run folders …] [--out DIR]

Tables: one per task, rows = framework, columns = variant · precision · devices, each cell the time with its quality
metric beside it. Marks flag, never hide: † unstable timing (spread over 10 %), * the first step (compile, trace,
autotune) took over half of the training time — short runs measure start-up more than training — and ‡ records from
different machines in one column. Records are read, never edited; results from different machines are never averaged.
"""
import argparse
import json
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only, no display
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
from tabulate import tabulate  # noqa: E402

from shared.record import RecordError, read_record  # noqa: E402

TIME_METRIC = {"cnn": "train_seconds", "gru": "train_seconds", "resnet50": "seconds_per_1000_images",
               "densenet121": "train_minutes"}
TIME_LABEL = {"train_seconds": "training time, s", "seconds_per_1000_images": "s per 1,000 images",
              "train_minutes": "training time, min"}
QUALITY_METRIC = {"cnn": "accuracy", "gru": "accuracy", "densenet121": "auc"}
TITLES = {"cnn": "CNN (VGG-style) on CIFAR-10", "gru": "GRU on IMDB", "resnet50": "ResNet-50 feature extraction",
          "densenet121": "DenseNet-121 on ChestX-ray14"}


class ReportError(Exception):
    """Nothing to merge, or a record that cannot be read; the message names the file."""


def load_records(run_dirs):
    records = []
    for run_dir in run_dirs:
        paths = sorted(Path(run_dir).glob("cells/*.json"))
        if not paths:
            raise ReportError(f"{run_dir}: no records under cells/; is this a run folder?")
        try:
            records += [read_record(p) for p in paths]
        except RecordError as e:
            raise ReportError(str(e)) from e
    return records


def to_frame(records):
    """One row per record, nested keys flattened (cell.task, metrics.accuracy, system.host, …)."""
    frame = pd.json_normalize(records, sep=".")
    frame["column"] = (frame["cell.variant"] + " · " + frame["cell.precision"] + " · "
                       + frame["cell.gpus"].astype(str) + "×" + frame["cell.device"])
    frame["machine"] = frame["system.host"].fillna("?") + "/" + frame["system.gpus"].astype(str)
    return frame


def cell_text(row, task):
    """'12.3 s (acc 97.1 %)' for an ok record, the status in capitals otherwise; † marks an unstable timing."""
    if row["status"] != "ok":
        return row["status"].upper()
    value = row.get(f"metrics.{TIME_METRIC[task]}")
    text = f"{value:.3g}"
    if row.get("timing.unstable") is True:
        text += "†"
    train_seconds = row.get("metrics.train_seconds")
    if pd.notna(row.get("timing.warmup")) and pd.notna(train_seconds) and row["timing.warmup"] > train_seconds / 2:
        text += "*"
    quality = QUALITY_METRIC.get(task)
    if quality and pd.notna(row.get(f"metrics.{quality}")):
        q = row[f"metrics.{quality}"]
        text += f" ({q:.1%})" if quality == "accuracy" else f" (AUC {q:.3f})"
    return text


def task_table(frame, task):
    """The seed-shaped table of one task: framework × column, with ‡ on columns whose records span machines."""
    rows = frame[frame["cell.task"] == task]
    table = rows.assign(text=[cell_text(r, task) for r in rows.to_dict("records")]).pivot_table(
        index="cell.framework", columns="column", values="text", aggfunc=" / ".join)
    mixed = rows.groupby("column")["machine"].nunique()
    table.columns = [f"{c} ‡" if mixed[c] > 1 else c for c in table.columns]
    table.index.name = "framework"
    return table.fillna("—")


def markdown(frame):
    parts = []
    for task in TIME_METRIC:
        if (frame["cell.task"] == task).any():
            unit = TIME_LABEL[TIME_METRIC[task]]
            parts.append(f"### {TITLES[task]} — {unit}\n\n"
                         + tabulate(task_table(frame, task), headers="keys", tablefmt="pipe") + "\n")
    machines = ", ".join(sorted(frame["machine"].unique()))
    parts.append(f"† timing spread over 10 % · * first step (compile/trace/autotune) over half the training time · "
                 f"‡ records from different machines in one column · machines: {machines}\n")
    return "\n".join(parts)


def plot(frame, path):
    """One panel per task: the time metric of every ok cell, lower is better."""
    ok = frame[frame["status"] == "ok"]
    tasks = [t for t in TIME_METRIC if (ok["cell.task"] == t).any()]
    fig, axes = plt.subplots(len(tasks) or 1, 1, figsize=(8, 1.2 + 2.2 * max(len(tasks), 1)), squeeze=False)
    for ax, task in zip(axes[:, 0], tasks):
        rows = ok[ok["cell.task"] == task].sort_values(["cell.framework", "column"])
        labels = rows["cell.framework"] + "  " + rows["column"]
        ax.barh(labels, rows[f"metrics.{TIME_METRIC[task]}"], color="tab:blue")
        ax.invert_yaxis()
        ax.set_title(TITLES[task], fontsize=10)
        ax.set_xlabel(TIME_LABEL[TIME_METRIC[task]] + " (lower is better)", fontsize=8)
        ax.tick_params(labelsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write_report(*run_dirs, out=None):
    """Merge `run_dirs` into `out` (default: the first run folder); returns the paths written."""
    out = Path(out or run_dirs[0])
    records = load_records(run_dirs)
    frame = to_frame(records)
    paths = {"jsonl": out / "results.jsonl", "csv": out / "results.csv", "markdown": out / "results.md",
             "plot": out / "results.png"}
    paths["jsonl"].write_text("".join(json.dumps(r, sort_keys=True) + "\n" for r in records))
    frame.drop(columns=["log_tail"]).to_csv(paths["csv"], index=False)
    paths["markdown"].write_text(markdown(frame))
    plot(frame, paths["plot"])
    return paths


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m scripts.report", description=__doc__.split("\n")[0])
    ap.add_argument("runs", nargs="+", type=Path, help="run folders (results/…)")
    ap.add_argument("--out", type=Path, help="where to write the merged report (default: the first run folder)")
    args = ap.parse_args(argv)
    try:
        paths = write_report(*args.runs, out=args.out)
    except ReportError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(paths["markdown"].read_text())
    print("  ".join(f"{k}: {v}" for k, v in paths.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
