"""Merge the records of one or more runs into JSON Lines, CSV, Markdown tables shaped like the seed's, and a plot.

    python -m scripts.results.report results/demo-20261202-153000 [more run folders …] [--out DIR]

Tables: one per task, rows = framework, columns = variant · precision · devices. Above each table, in words: the data,
the scale, the weights, where the data sat during the clock, the machine and the software. Each cell holds the time
(training tasks: the time a user waits, compile and first step included, then the steady-state time) with the quality
metric beside it, and footnote numbers for the differences its runner declares: formulation differences from the
canonical definition, and host syncs the framework imposes on every step (PyTorch's GradScaler and MXNet's loss scaler
under amp, Keras' per-step logs on TensorFlow), which the clock includes. Marks flag, never hide:
± the spread (interquartile range over median) of the post-warm-up samples where there are five or more, † that
spread over 10 % (noise, never compile cost), ↓ the post-warm-up samples still fell with time (stats.still_falling:
not yet steady, so the steady state is overstated), * the first step (compile, trace, autotune) took over half of the
training time — short runs measure start-up more than training — and ‡ records of different machine classes in one
column. Records are read, never edited; results from different machine classes are never averaged.
"""

import argparse
import dataclasses
import json
import os
import re
import sys
import tempfile
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from textwrap import fill, shorten
from typing import Any

import matplotlib

matplotlib.use("Agg")  # files only, no display
# Text from records (a failure reason, a framework version) is drawn as it is: never parsed as mathtext, where
# "$\\undefinedmacro$" raises and stops the plot, and never handed to LaTeX.
matplotlib.rcParams.update({"text.parse_math": False, "text.usetex": False})
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.axes import Axes  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402
from tabulate import tabulate  # noqa: E402

from scripts.plan.matrix import Cell  # noqa: E402
from scripts.plan.planfile import planned_ids  # noqa: E402
from scripts.results import records, stats  # noqa: E402
from scripts.results.records import Record  # noqa: E402
from scripts.results.stats import number  # noqa: E402
from shared import params, peaks, sysinfo  # noqa: E402
from shared.calibration import outdated  # noqa: E402
from shared.params import QUALITY_METRIC, TIME_METRIC, TRAINING_TASKS  # noqa: E402
from shared.record import RecordError  # noqa: E402

TIME_LABEL = {
    "train_seconds": "training time, s",
    "seconds_per_1000_images": "s per 1,000 images",
    "train_minutes": "training time, min",
}
QUALITY_LABEL = {"accuracy": "test accuracy", "auc": "mean AUC over 14 classes"}
WEIGHT_TASKS = ("resnet50", "densenet121")
TITLES = {
    "cnn": "CNN (VGG-style) on CIFAR-10",
    "gru": "GRU on IMDB",
    "resnet50": "ResNet-50 feature extraction",
    "densenet121": "DenseNet-121 on ChestX-ray14",
}
WEIGHTS = {
    "imagenet": "ImageNet (torchvision's, in the canonical layout)",
    "random": "random canonical weights (`make weights` fetches the ImageNet ones)",
}
PLACEMENT = {
    "host": "host memory, each batch copied to the device inside the clock",
    "device": "the whole set on the device before the clock starts",
}
PRECISION_COLOURS = {"fp32": "tab:blue", "tf32": "tab:orange", "amp": "tab:green", "bf16": "tab:red"}
TITLE_CHARS = 90  # a plot title's line: a 9-inch figure's axes hold about this many characters of 9-point text
PLOT_CAP = 60  # rows per task panel: 10,000 cells in one canvas would pass Pillow's decompression-bomb limit
STATUS_COLOURS = {"skipped": "dimgray", "failed": "firebrick", "timeout": "firebrick"}
MARKS = (
    "±n% the steady state's spread (IQR / median of the post-warm-up samples; none below five samples) · "
    "† that spread over 10 % (noise) · ↓ the samples still fell while timed (not yet steady: the steady state is "
    "overstated) · * first step (compile/trace/autotune) over half the training time · "
    "eff n% peak the steady state's model FLOP/s as a share of the device's peak for the cell's precision (one "
    "denominator per machine: a GPU's datasheet, a CPU's cores × clock × FMA width; shared/peaks.py) · n% GEMM "
    "the same as a share of the framework's own GEMM rate on that device (measured after the cell) · eff "
    "implausible: above 100 % of either (not an efficiency: a clock or a peak that does not hold) · ‡ records of "
    "different machine classes in one column · [n] see the note under "
    "the table (a formulation "
    "difference from the canonical definition, a host sync the framework imposes on every step, or why a cell "
    "did not run)"
)


class ReportError(Exception):
    """Nothing to merge, or a record that cannot be read; the message names the file."""


def load_records(run_dirs: Iterable[str | os.PathLike]) -> list[Record]:
    """Every sound record of `run_dirs`; one that is not (scripts/results/records.py) is quarantined in its run folder
    and listed under the tables, never fatal. A folder without records is an error: it is not a run folder."""
    found = []
    for run_dir in run_dirs:
        paths = sorted(Path(run_dir).glob("cells/*.json"))
        if not paths:
            raise ReportError(f"{run_dir}: no records under cells/; is this a run folder?")
        for path in paths:
            try:
                found.append(records.load(path))
            except RecordError as e:
                records.quarantine(run_dir, path, str(e))
    return found


def md(text: Any) -> str:
    """Record text made inert in Markdown (tables, GitHub's job summary): one line, no table pipe, no HTML, no link."""
    text = " ".join(str(text).split())
    for raw, safe in (
        ("\\", "\\\\"),
        ("&", "&amp;"),
        ("<", "&lt;"),
        (">", "&gt;"),
        ("|", "\\|"),
        ("[", "\\["),
        ("]", "\\]"),
    ):
        text = text.replace(raw, safe)
    # GitHub's Markdown (the job summary) links bare URLs and www. names by itself: a zero-width joiner after the
    # scheme's colon, or after "www", leaves the text as it reads and nothing to click
    return re.sub(r"(?i)\b(www)(?=\.)|(?<=[a-z])(:)(?=//)", lambda m: (m.group(1) or m.group(2)) + "\u2060", text)


def csv_safe(frame: pd.DataFrame) -> pd.DataFrame:
    """Text cells a spreadsheet would run as a formula (= + - @ and control starts) get a leading apostrophe."""

    def cell(value):
        return "'" + value if isinstance(value, str) and value[:1] in ("=", "+", "-", "@", "\t", "\r") else value

    return frame.apply(lambda column: column if pd.api.types.is_numeric_dtype(column) else column.map(cell))


# ---------------------------------------------------------------- one row per record, in display units


def known(value: Any) -> bool:
    """False for a missing field: None, NaN, or absent (a list or a string is known)."""
    return not (value is None or (isinstance(value, float) and pd.isna(value)))


PLOTTABLE = 1e12  # a bar longer than this (in the task's unit) is not a time; its text would overflow the raster


def plottable(value: Any) -> bool:
    return number(value) is not None and 0 <= value <= PLOTTABLE


def first_line(text: Any) -> str:
    return (str(text).strip().splitlines() or [""])[0]


def plain(value: Any) -> Any:
    """A version as it was written: pandas turns integer columns with gaps into floats (91300 -> 91300.0)."""
    return int(value) if isinstance(value, float) and value.is_integer() else value


def machine_of(row: Mapping[str, Any]) -> str | None:
    """The machine in words, e.g. 'AMD EPYC 9B14, 2 cores, no GPU (host vm)'; None for host-written records (crash,
    timeout), which carry no system information. GPU models, not counts: a cell sees only the GPUs it was given."""
    if not known(row.get("system.cpu")):  # host-written records say only where they ran
        return None
    gpus = row.get("system.gpus") if isinstance(row.get("system.gpus"), list) else []
    text = row.get("system.cpu") or "unknown CPU"
    flags = row.get("system.cpu_flags")
    if isinstance(flags, list):
        text += f" ({', '.join(flags) or 'no AVX2'})"
    if known(row.get("system.cpu_count")):
        text += f", {int(row['system.cpu_count'])} cores"
    if known(row.get("system.cpu_usable")) and row["system.cpu_usable"] != row.get("system.cpu_count"):
        text += f" ({row['system.cpu_usable']:g} usable)"
    if gpus:
        driver = row.get("system.driver")
        text += ", " + " + ".join(sorted(set(gpus))) + (f", driver {driver}" if known(driver) else "")
    else:
        text += ", no GPU"
    return md(f"{text} (host {row.get('system.host') if known(row.get('system.host')) else '?'})")


def machine_class_of(row: Mapping[str, Any]) -> str | None:
    """The record's machine class (shared.sysinfo.machine_class), derived from its facts for records written before
    the key existed; None for host-written records, which carry no system information."""
    if known(row.get("system.machine_class")):
        return row["system.machine_class"]
    if not known(row.get("system.cpu")):
        return None
    system = {key[len("system.") :]: value for key, value in row.items() if key.startswith("system.") and known(value)}
    return sysinfo.machine_class(system, row["cell.device"], row["cell.gpus"])


def version_text(value: Any, kind: str) -> str:
    """One spelling of a CUDA or cuDNN version: JAX reports the integers of the C headers (CUDA 13000 = 13.0, cuDNN
    91900 = 9.19.0, cuDNN 8902 = 8.9.2), PyTorch and the images the dotted form; both read dotted here."""
    text = str(plain(value))
    if not re.fullmatch(r"\d{4,6}", text):
        return text
    n = int(text)
    if kind == "cuda":
        return f"{n // 1000}.{n % 1000 // 10}"
    return f"{n // 10000}.{n // 100 % 100}.{n % 100}" if n >= 10000 else f"{n // 1000}.{n // 100 % 10}.{n % 100}"


def software_of(row: Mapping[str, Any]) -> str | None:
    """'pytorch: 2.14.1 (cu130 image: CUDA 13.0, cuDNN 91002)', or None where the runner reported no versions."""
    version = row.get("system.framework_version")
    if not known(version):
        return None
    text = f"{row['cell.framework']}: {version}"
    if known(row.get("system.cuda")):
        cuda, cudnn = version_text(row["system.cuda"], "cuda"), version_text(row.get("system.cudnn"), "cudnn")
        text += f" ({row['cell.variant']} image: CUDA {cuda}, cuDNN {cudnn})"
    return md(text)


def times_of(row: Mapping[str, Any]) -> tuple[float | None, float | None, tuple[float, float] | None]:
    """(time as waited, steady-state time, (low, high) spread of the steady-state or extraction time or None), in
    the task's display unit: minutes for DenseNet-121, else as recorded."""
    task, get = row["cell.task"], lambda key: number(row.get(f"metrics.{key}"))
    timing = lambda key: number(row.get(f"timing.{key}"))
    unit = 60.0 if task == "densenet121" else 1.0
    samples = timing("q1") is not None and timing("spread") is not None
    low_key, high_key = ("q1", "q3") if samples else ("min", "max")  # older records: min–max
    if task == "resnet50":  # the median pass per 1,000 images: its whisker is the passes' quartiles, same scale
        value = get("seconds_per_1000_images")
        low, median, high = (timing(k) for k in (low_key, "median", high_key))
        if value is None or low is None or median is None or high is None or median <= 0:
            return value, None, None
        return value, None, (value * low / median, value * high / median)
    train, steady_seen = get("train_seconds"), get("steady_state_seconds")
    user = train / unit if train is not None else get(TIME_METRIC[task])
    steady = steady_seen / unit if steady_seen is not None else None
    median, q1, q3 = timing("median"), timing("q1"), timing("q3")
    if samples and steady is not None and median is not None and q1 is not None and q3 is not None and median > 0:
        # steady state = median window × steps: its whisker scales the quartiles
        return user, steady, (steady * q1 / median, steady * q3 / median)
    epochs_seen = row.get("metrics.epoch_seconds")
    later = [number(v) for v in epochs_seen[1:]] if isinstance(epochs_seen, list) else []
    times = [v for v in later if v is not None]
    if steady is None or len(later) < 2 or len(times) < len(later):
        return user, steady, None
    epochs = len(later) + 1  # steady state = median later epoch × epochs: its whisker scales min and max the same
    return user, steady, (min(times) * epochs / unit, max(times) * epochs / unit)


def own_gemm(row: Mapping[str, Any]) -> float | None:
    """The FLOP/s of the GEMM a row's own calibration measured in its compute precision (the reduced one where the
    cell has one), None where it has none."""
    return next(
        (
            row[f"system.calibration.{k}"]
            for k in ("gemm_reduced_flops", "gemm_fp32_flops")
            if known(row.get(f"system.calibration.{k}"))
        ),
        None,
    )


def best_gemms(rows: Iterable[Mapping[str, Any]]) -> dict[tuple[Any, Any], float]:
    """{(machine class, precision): the best GEMM any ok CPU cell of that class measured in that precision}: what a
    CPU is known to reach, below which its peak is never put (shared.peaks.device_peak's `measured`)."""
    best: dict[tuple[Any, Any], float] = {}
    for row in rows:
        gemm = own_gemm(row)
        if row.get("status") == "ok" and row.get("cell.device") == "cpu" and gemm:
            key = (machine_class_of(row), row.get("cell.precision"))
            best[key] = max(best.get(key, 0.0), gemm)
    return best


def efficiency_of(
    row: Mapping[str, Any], best: Mapping[tuple[Any, Any], float] | None = None
) -> tuple[float | None, float | None, list[str]]:
    """(share of the device's peak, share of the framework's own GEMM, [implausible shares in words]) of an ok row,
    recomputed from its achieved FLOP/s and its own facts (shared.peaks), so records written before the peak table
    get the same denominator, and a CPU's peak is never below the best GEMM measured on its machine class (`best`,
    best_gemms); (None, None, []) where the record has no achieved rate."""
    achieved = row.get("metrics.achieved_flops")
    if row.get("status") != "ok" or not known(achieved):
        return None, None, []
    system = {
        key[len("system.") :]: value
        for key, value in row.items()
        if key.startswith("system.") and (isinstance(value, list) or known(value))
    }
    gpu = row["cell.device"] == "gpu"
    devices = row["metrics.devices"] if gpu and known(row.get("metrics.devices")) else 1
    gemm = own_gemm(row)
    measured = max(gemm or 0.0, (best or {}).get((machine_class_of(row), row.get("cell.precision")), 0.0))
    peak, _ = peaks.device_peak(system, row["cell.device"], row["cell.precision"], devices, measured or None)
    got = peaks.shares(achieved, peak, gemm * devices if gemm else None)
    return got["efficiency"], got["efficiency_of_gemm"], got["implausible"]


def to_frame(records: list[Record] | list[dict]) -> pd.DataFrame:
    """One row per record (a Record, or a record dict), nested keys flattened (cell.task, metrics.accuracy,
    system.host, …), plus the display columns the tables and the plot share. A row is the record as written
    (Record.data): the CSV's columns are the records' own keys, in their order."""
    frame = pd.json_normalize([r.data if isinstance(r, Record) else r for r in records], sep=".")
    # records written before the tuning axis are default cells (records.upgrade's rule, applied to the column); a
    # tuned cell is its own column beside its default one
    tuning = frame["cell.tuning"] if "cell.tuning" in frame else pd.Series(params.DEFAULT_TUNING, index=frame.index)
    frame["cell.tuning"] = tuning.fillna(params.DEFAULT_TUNING)
    frame["column"] = (
        frame["cell.variant"]
        + " · "
        + frame["cell.precision"]
        + " · "
        + frame["cell.gpus"].astype(str)
        + "×"
        + frame["cell.device"]
        + frame["cell.tuning"].map(lambda t: "" if t == params.DEFAULT_TUNING else f" · {t}")
    )
    rows = frame.to_dict("records")
    frame["machine"] = [machine_of(r) for r in rows]
    frame["machine_class"] = [machine_class_of(r) for r in rows]
    frame["software"] = [software_of(r) for r in rows]
    best = best_gemms(rows)
    frame[["eff_peak", "eff_gemm", "eff_implausible"]] = pd.DataFrame(
        [efficiency_of(r, best) for r in rows], index=frame.index, dtype=object
    )
    frame[["time", "steady", "spread"]] = pd.DataFrame([times_of(r) for r in rows], index=frame.index, dtype=object)
    frame["quality_note"] = quality_notes(frame)
    frame["speedup"] = speedups(frame)
    return frame


SIBLING_KEYS = (
    "run_id",
    "cell.framework",
    "cell.task",
    "cell.variant",
    "cell.precision",
    "cell.gpus",
    "cell.device",
    "cell.data",
    "cell.scale",
)


def speedups(frame: pd.DataFrame) -> list[float | None]:
    """Per row: a tuned cell's speed-up over its default sibling of the same run (the sibling's value over its own,
    value_of: steady state or seconds per 1,000 images), None for default cells and where either has no value."""
    rows = frame.to_dict("records")
    default = {
        tuple(r.get(k) for k in SIBLING_KEYS): value_of(r) for r in rows if r["cell.tuning"] == params.DEFAULT_TUNING
    }
    got = []
    for row in rows:
        base, value = default.get(tuple(row.get(k) for k in SIBLING_KEYS)), value_of(row)
        got.append(base / value if row["cell.tuning"] != params.DEFAULT_TUNING and base and value else None)
    return got


def speedup_text(row: Mapping[str, Any]) -> str:
    """' · ×1.84 over default' for a tuned cell with a speed-up (report.speedups), else ''."""
    return f" · ×{row['speedup']:.2f} over default" if known(row.get("speedup")) else ""


QUALITY_DEPARTURE = 0.05  # below its siblings' median by more than this (verify's quality margin): explained


def quality_notes(frame: pd.DataFrame) -> list[str | None]:
    """Per row: why its accuracy or AUC sits more than QUALITY_DEPARTURE below the median of its siblings (the ok
    cells of the same task, data kind and scale), from what its record says; None where it does not depart."""
    notes: list[str | None] = [None] * len(frame)
    rows = frame.to_dict("records")
    for i, row in enumerate(rows):
        quality = QUALITY_METRIC.get(row["cell.task"])
        q = number(row.get(f"metrics.{quality}")) if quality else None
        if quality is None or q is None or row["status"] != "ok":
            continue
        peers = [
            number(r.get(f"metrics.{quality}"))
            for r in rows
            if r["status"] == "ok"
            and (r["cell.task"], r["cell.data"], r["cell.scale"])
            == (row["cell.task"], row["cell.data"], row["cell.scale"])
        ]
        peers = [v for v in peers if v is not None]
        if len(peers) < 3:
            continue
        median = float(pd.Series(peers).median())
        if q >= median - QUALITY_DEPARTURE:
            continue
        words = (
            f"{QUALITY_LABEL[quality]} {q:.1%} is below its siblings' median {median:.1%} on the same data and scale"
        )
        if row["cell.task"] in ("cnn", "gru") and row.get("metrics.init") != "canonical":
            why = (
                "this record predates the shared start: it trained from its framework's own random initial "
                "weights, and a short run depends on the sample (docs/methodology.md, the same start and the "
                "same step); a run of today's runners starts from the canonical weights"
            )
        else:
            why = (
                "nothing in its record explains it: a difference in training to look into "
                "(tests/test_training_equivalence.py checks the step itself)"
            )
        notes[i] = f"{words}: {why}"
    return notes


# ---------------------------------------------------------------- tables


def cell_text(row: Mapping[str, Any], task: str, footnotes: dict[str, int]) -> str:
    """'12.3* / 10.1 (91.2%) [1]' for an ok training cell (as waited, marks, steady state, quality, differences);
    'SKIPPED [2]' otherwise, the reason in the footnote. `footnotes` maps each text to its number and grows."""
    if row["status"] != "ok":
        reason = first_line(row["reason"]) if known(row.get("reason")) else None
        return row["status"].upper() + (f" [{footnotes.setdefault(reason, len(footnotes) + 1)}]" if reason else "")
    if not known(row["time"]):
        return "ok, no time recorded"
    text = f"{row['time']:.3g}"
    warmup: Any = (
        row.get("metrics.warmup_seconds") if known(row.get("metrics.warmup_seconds")) else row.get("timing.warmup")
    )
    train_seconds: Any = row.get("metrics.train_seconds")
    if known(warmup) and known(train_seconds) and warmup > train_seconds / 2:
        text += "*"
    if known(row.get("steady")):
        text += f" / {row['steady']:.3g}"
    text += spread_marks(row)
    peak, gemm, implausible = row.get("eff_peak"), row.get("eff_gemm"), row.get("eff_implausible")
    if implausible:
        text += f" eff implausible ({'; '.join(implausible)})"
    elif known(peak) or known(gemm):
        text += " eff " + ", ".join(
            f"{share:.0%} {label}" for share, label in ((peak, "peak"), (gemm, "GEMM")) if known(share)
        )
    quality = QUALITY_METRIC.get(task)
    if quality and known(row.get(f"metrics.{quality}")):
        q = row[f"metrics.{quality}"]
        text += f" ({q:.1%})" if quality == "accuracy" else f" (AUC {q:.3f})"
    return text + speedup_text(row) + note_marks(row, footnotes)


def stale_calibration(loaded: Sequence[Any]) -> list[str]:
    """How the ok records' calibrations differ from today's (shared/calibration.py's `outdated`): the README's
    glance, the site's column heads and verify say it, each way once."""
    found: dict[str, None] = {}
    for record in loaded:
        if record.status == "ok":
            calibration = record.system.get("calibration")
            found.update(dict.fromkeys(outdated(calibration, record.cell.device, record.cell.precision)))
    return list(found)


def spread_marks(row: Mapping[str, Any]) -> str:
    """' ±12%†↓': the steady state's spread, † where it is noise (over 10 %), ↓ where the samples still fell while
    timed; '' for a cell with fewer than five samples that did neither. The table and the README's glance show it."""
    text = f" ±{row['timing.spread']:.0%}" if known(row.get("timing.spread")) else ""
    if row.get("timing.unstable") is True:
        text += "†"
    if stats.still_falling(row.get("timing.values")):
        text += "↓"
    return text


def note_marks(row: Mapping[str, Any], footnotes: dict[str, int]) -> str:
    """' [1,3]': the numbers of the notes a cell carries (the differences its record names, why its accuracy departs
    from its siblings'), each note numbered once in `footnotes`; '' for none."""
    differences = row.get("metrics.differences")
    notes = [d for d in differences if isinstance(d, str)] if isinstance(differences, list) else []
    notes += [row["quality_note"]] if known(row.get("quality_note")) else []
    numbers = sorted({footnotes.setdefault(d, len(footnotes) + 1) for d in notes})
    return " [" + ",".join(map(str, numbers)) + "]" if numbers else ""


def value_of(row: Mapping[str, Any]) -> float | None:
    """The one number a cell shows by default: ResNet-50's seconds per 1,000 images, a training's steady state (its
    time as waited where no steady state was recorded); None for a cell that did not run or recorded no time."""
    if row["status"] != "ok":
        return None
    value = number(row["time"] if row["cell.task"] == "resnet50" or not known(row.get("steady")) else row["steady"])
    return value if value is not None and value > 0 else None


def compact_table(frame: pd.DataFrame, task: str, footnotes: dict[str, int] | None = None) -> pd.DataFrame:
    """One number per cell with × its column's fastest; rows fastest first by the first column (then the next);
    a cell that did not run shows its status and the note that says why."""
    footnotes = {} if footnotes is None else footnotes
    order = {p: i for i, p in enumerate(PRECISION_COLOURS)}
    rows = (
        frame[frame["cell.task"] == task]
        .assign(_p=lambda f: f["cell.precision"].map(order))
        .sort_values(["cell.variant", "_p", "cell.gpus", "cell.framework"])
    )
    columns = list(dict.fromkeys(rows["column"]))
    records = rows.to_dict("records")
    fastest = {
        c: min((v for r in records if r["column"] == c for v in [value_of(r)] if v), default=None) for c in columns
    }

    def text(row):
        value = value_of(row)
        if value is None:
            return cell_text(row, task, footnotes)
        return f"{value:.3g} (×{value / fastest[row['column']]:.2f})" + speedup_text(row) + note_marks(row, footnotes)

    table = rows.assign(text=[text(r) for r in records], value=[value_of(r) for r in records]).pivot_table(
        index="cell.framework", columns="column", values="text", aggfunc="; ".join
    )[columns]
    values = (
        rows.assign(value=[value_of(r) for r in records])
        .pivot_table(index="cell.framework", columns="column", values="value", aggfunc="min")
        .reindex(columns=columns)
    )
    ranked = sorted(
        table.index,
        key=lambda fw: (
            tuple((0, values.at[fw, c]) if fw in values.index and known(values.at[fw, c]) else (1, 0) for c in columns)
            + (fw,)
        ),
    )
    mixed = rows.groupby("column")["machine_class"].nunique()
    table = table.loc[ranked]
    table.columns = [f"{c} ‡" if mixed[c] > 1 else c for c in table.columns]
    table.index.name = "framework"
    return table.fillna("—")


def task_table(frame: pd.DataFrame, task: str, footnotes: dict[str, int] | None = None) -> pd.DataFrame:
    """The seed-shaped table of one task: framework × column, with ‡ on columns whose records span machines."""
    footnotes = {} if footnotes is None else footnotes
    order = {p: i for i, p in enumerate(PRECISION_COLOURS)}
    rows = (
        frame[frame["cell.task"] == task]
        .assign(_p=lambda f: f["cell.precision"].map(order))
        .sort_values(["cell.variant", "_p", "cell.gpus", "cell.framework"])
    )  # columns fp32 → bf16, as the seed's tables read
    columns = list(dict.fromkeys(rows["column"]))
    rows = rows.sort_values(["cell.framework"], kind="stable")  # notes numbered in the order the table is read
    table = rows.assign(text=[cell_text(r, task, footnotes) for r in rows.to_dict("records")]).pivot_table(
        index="cell.framework", columns="column", values="text", aggfunc="; ".join
    )[columns]
    mixed = rows.groupby("column")["machine_class"].nunique()
    table.columns = [f"{c} ‡" if mixed[c] > 1 else c for c in table.columns]
    table.index.name = "framework"
    return table.fillna("—")


def in_words(rows: pd.DataFrame, key: str, words: Callable[[Any], object] = lambda v: str(v)) -> str:
    """One value of `key` over the rows in words; several: each with the frameworks that have it, never averaged."""
    present = rows[rows[key].map(known)] if key in rows else rows.iloc[:0]
    if present.empty:
        return "not recorded"
    by_value = present.groupby(key)["cell.framework"].agg(lambda f: ", ".join(sorted(set(f))))
    if len(by_value) == 1:
        return md(words(by_value.index[0]))
    return md("; ".join(f"{words(v)} ({fws})" for v, fws in by_value.items()))


def measured(frame: pd.DataFrame, task: str) -> str:
    """The lines above a table that say what was measured, where and with what."""
    rows = frame[frame["cell.task"] == task]
    ran = rows[rows["status"] == "ok"]
    lines = [
        f"- data: {in_words(rows, 'cell.data')}, scale {in_words(rows, 'cell.scale')} · data placement: "
        f"{in_words(ran, 'metrics.data_placement', lambda v: PLACEMENT.get(v, v))}"
    ]
    if task in WEIGHT_TASKS:
        lines.append(f"- weights: {in_words(ran, 'metrics.weights', lambda v: WEIGHTS.get(v, v))}")
    machines = sorted(rows["machine"].dropna().unique())
    lines.append(f"- machine{'s' if len(machines) > 1 else ''}: {'; '.join(machines) or 'not recorded'}")
    software = sorted(rows["software"].dropna().unique())
    lines.append(f"- software: {' · '.join(software) or 'not recorded'}")
    dates = sorted(str(d)[:10] for d in rows.get("started_at", []) if known(d))
    if dates:
        lines.append(f"- run: {dates[0]}" + (f" to {dates[-1]}" if dates[-1] != dates[0] else ""))
    return "\n".join(lines)


def heading(task: str) -> str:
    if task in TRAINING_TASKS:
        unit = TIME_LABEL[TIME_METRIC[task]].replace("training time", "training time at the steady rate")
        unit += " (compile and first step apart)"
    else:
        unit = TIME_LABEL[TIME_METRIC[task]] + ", the median pass after a warm-up that lasts until two passes agree"
    return f"### {TITLES[task]} — {unit}; lower is better"


def details_heading(task: str) -> str:
    unit = TIME_LABEL[TIME_METRIC[task]]
    if task in TRAINING_TASKS:
        unit += ": as waited (compile and first step included) / steady state"
    quality = QUALITY_METRIC.get(task)
    return f"details: {unit}, ±spread, efficiency" + (f", {QUALITY_LABEL[quality]}" if quality else "")


def markdown(frame: pd.DataFrame) -> str:
    """Per task: what was measured, one number per cell sorted fastest first with × the fastest, the versions and run
    dates, then every cell's details (time as waited, spread, efficiency, quality) in a folded second table."""
    parts = []
    for task in TIME_METRIC:
        if (frame["cell.task"] == task).any():
            footnotes: dict[str, int] = {}
            compact = tabulate(
                compact_table(frame, task, footnotes), headers="keys", tablefmt="pipe", disable_numparse=True
            )
            details = tabulate(
                task_table(frame, task, footnotes), headers="keys", tablefmt="pipe", disable_numparse=True
            )
            notes = "".join(f"\n[{n}] {md(text)}" for text, n in footnotes.items())
            parts.append(
                f"{heading(task)}\n\n{measured(frame, task)}\n\n{compact}\n\n(×n: n times the column's "
                f"fastest.)\n\n<details><summary>{details_heading(task)}</summary>\n\n{details}\n\n"
                f"</details>\n{notes}\n"
            )
    parts.append(MARKS + "\n")
    return "\n".join(parts)


# ---------------------------------------------------------------- plot


def by_speed(rows: pd.DataFrame) -> pd.DataFrame:
    """One task's rows fastest first by the number the tables show (value_of: the steady state, else the time as
    waited; lower is better); cells that did not run or recorded no time last. Ties, and the cells without a time,
    in a stable order: framework, variant, devices, then precision from fp32 to bf16."""
    order = {p: i for i, p in enumerate(PRECISION_COLOURS)}
    values = [value_of(r) for r in rows.to_dict("records")]
    rows = rows.assign(
        _p=rows["cell.precision"].map(order),
        _none=[v is None for v in values],
        _v=[v if v is not None else 0.0 for v in values],
    )
    return rows.sort_values(["_none", "_v", "cell.framework", "cell.variant", "cell.gpus", "_p"], kind="stable").drop(
        columns=["_none", "_v"]
    )


def bar_rows(rows: pd.DataFrame) -> tuple[pd.DataFrame, list[str]]:
    """The plot's rows of one task fastest first (by_speed), labelled 'framework · precision', with variant and
    devices where the task has more than one of them."""
    rows = by_speed(rows)
    where = rows["cell.variant"] + " · " + rows["cell.gpus"].astype(str) + "×" + rows["cell.device"]
    labels = rows["cell.framework"] + (" · " + where if where.nunique() > 1 else "") + " · " + rows["cell.precision"]
    return rows, list(labels)


def draw_bar(
    ax: Axes,
    y: float,
    value: float,
    spread: tuple[float, float] | None,
    colour: str,
    height: float,
    hatched: bool = False,
) -> None:
    """One bar with its min–max whisker (where known) and its value written past both."""
    ax.barh(
        y,
        value,
        height=height,
        color="white" if hatched else colour,
        edgecolor=colour,
        hatch="////" if hatched else None,
    )
    end = value
    if spread is not None and known(spread):
        # Clamped at 0: a single timed pass gives min = median = max, and value × min / median can miss value by
        # one rounding step, which matplotlib refuses as a negative error.
        ax.errorbar(
            value,
            y,
            xerr=[[max(value - spread[0], 0.0)], [max(spread[1] - value, 0.0)]],
            fmt="none",
            ecolor="black",
            capsize=2,
            linewidth=0.8,
        )
        end = max(value, spread[1])
    ax.text(end, y, f" {value:.3g}", va="center", fontsize=7)


def draw_task(ax: Axes, rows: pd.DataFrame, task: str) -> None:
    """Bars coloured by precision: the time as waited, and for training tasks the steady-state time hatched beside it;
    whiskers span the samples' interquartile range (min–max in records older than the samples); a cell that did not
    run keeps its slot, outlined and hatched, with its status and reason."""
    rows, labels = bar_rows(rows)
    for column in ("time", "steady"):  # a time the plot cannot draw (negative, absurd) is drawn as no time
        rows[column] = [v if plottable(v) else None for v in rows[column]]
    rows["spread"] = [x if known(x) and all(map(plottable, x)) else None for x in rows["spread"]]
    values = [v for column in ("time", "steady") for v in rows[column] if known(v)]
    values += [x[1] for x in rows["spread"] if known(x)]
    largest = max(values + [1e-9])  # every bar and whisker inside the axes: text beyond them overflows the raster
    for y, row in enumerate(rows.to_dict("records")):
        colour = PRECISION_COLOURS.get(row["cell.precision"], "gray")
        if row["status"] != "ok" or not known(row["time"]):
            status_colour = STATUS_COLOURS.get(row["status"], "gray")
            reason = shorten(first_line(row["reason"]), 90, placeholder=" …") if known(row.get("reason")) else ""
            ax.barh(y, largest, height=0.8, color="none", edgecolor=status_colour, hatch="//", alpha=0.35)
            ax.text(
                largest * 0.01, y, f"{row['status'].upper()}  {reason}", va="center", fontsize=7, color=status_colour
            )
        elif task in TRAINING_TASKS and known(row["steady"]):
            draw_bar(ax, y - 0.2, row["time"], None, colour, 0.38)
            draw_bar(ax, y + 0.2, row["steady"], row["spread"], colour, 0.38, hatched=True)
        else:
            draw_bar(ax, y, row["time"], row["spread"], colour, 0.7)
    ax.set_yticks(range(len(rows)), labels)
    ax.set_ylim(len(rows) - 0.5, -0.5)
    ax.set_xlim(0, largest * 1.15)


def plot(frame: pd.DataFrame, path: str | os.PathLike) -> None:
    """One panel per task, one row per cell up to PLOT_CAP (the tables hold the rest), lower is better; the legend
    says what colours and hatching mean."""
    tasks = [t for t in TIME_METRIC if (frame["cell.task"] == t).any()]
    sizes = [min(max((frame["cell.task"] == t).sum(), 1), PLOT_CAP) for t in tasks] or [1]
    fig, axes = plt.subplots(
        len(sizes),
        1,
        figsize=(9, 1.4 + sum(0.9 + 0.32 * n for n in sizes)),
        squeeze=False,
        gridspec_kw={"height_ratios": [0.9 + 0.32 * n for n in sizes]},
    )
    for ax, task in zip(axes[:, 0], tasks, strict=False):
        rows = frame[frame["cell.task"] == task]
        draw_task(ax, bar_rows(rows)[0].head(PLOT_CAP), task)
        what = f"{in_words(rows, 'cell.data')} data, {in_words(rows, 'cell.scale')} scale"
        if task in WEIGHT_TASKS:
            what += f", {in_words(rows[rows['status'] == 'ok'], 'metrics.weights')} weights"
        if rows["cell.gpus"].nunique() == 1 and rows["cell.gpus"].iloc[0] > 1:  # else the row labels say it
            what += f", data-parallel over {rows['cell.gpus'].iloc[0]}×{rows['cell.device'].iloc[0]}"
        if len(rows) > PLOT_CAP:
            what += f"; the first {PLOT_CAP} of {len(rows)} cells, every cell is in the tables"
        order = "fastest first" + (" by the steady state" if task in TRAINING_TASKS else "")
        ax.set_title(fill(f"{TITLES[task]}, {order} ({what})", TITLE_CHARS), fontsize=9, loc="left")
        ax.set_xlabel(TIME_LABEL[TIME_METRIC[task]] + " — lower is better", fontsize=8)
        ax.tick_params(labelsize=7)
        ax.grid(axis="x", alpha=0.3)
    precisions = [p for p in PRECISION_COLOURS if (frame["cell.precision"] == p).any()]
    handles = [Patch(color=PRECISION_COLOURS[p], label=p) for p in precisions]
    handles += [
        Patch(facecolor="gray", label="as waited (compile included)"),
        Patch(facecolor="white", edgecolor="gray", hatch="////", label="steady state (training tasks)"),
    ]
    fig.legend(handles=handles, loc="upper center", ncol=len(handles), fontsize=7, frameon=False)
    fig.text(
        0.01,
        0.003,
        "whiskers: interquartile range of the post-warm-up samples (steady state; ResNet-50's "
        "passes); hatched outline: a cell that did not run, with its status",
        fontsize=6.5,
        color="dimgray",
    )
    fig.tight_layout(rect=(0, 0.012, 1, 1 - 0.35 / fig.get_figheight()))
    fig.savefig(path, dpi=120, bbox_inches="tight", pad_inches=0.1)  # nothing cut: a long title widens the image
    plt.close(fig)


def loss_rows(rows: Iterable[Mapping[str, Any]]) -> list[tuple[str, list[Any]]]:
    """(label, per-step losses) of the ok training cells that recorded a loss curve (shared.metrics.loss_metrics)."""
    return [
        (f"{r['cell.framework']} · {r['column']}", r["metrics.loss_curve"])
        for r in rows
        if r.get("status") == "ok" and isinstance(r.get("metrics.loss_curve"), list) and r["metrics.loss_curve"]
    ]


def draw_losses(ax: Axes, curves: Sequence[tuple[str, list[Any]]], title: str) -> None:
    """Every cell's per-step training loss (the first epoch) on one chart: from the same canonical start and data
    order, trajectories overlap where the training is the same (dropout masks and float rounding still differ)."""
    for label, losses in curves[:PLOT_CAP]:
        ax.plot(range(1, len(losses) + 1), losses, linewidth=1, alpha=0.8, label=label)
    ax.set_title(fill(title, TITLE_CHARS), fontsize=9, loc="left")
    ax.set_xlabel("training step (first epoch)", fontsize=8)
    ax.set_ylabel("loss", fontsize=8)
    ax.tick_params(labelsize=7)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=6, ncol=2, frameon=False)


def plot_losses(frame: pd.DataFrame, path: str | os.PathLike) -> bool:
    """One panel per training task, data kind and scale (steps of different work never share a chart) with loss
    curves; False where no record has one (nothing written)."""
    rows = frame.to_dict("records")
    groups = sorted(
        {(r["cell.task"], r["cell.data"], r["cell.scale"]) for r in rows},
        key=lambda g: (list(TIME_METRIC).index(g[0]) if g[0] in TIME_METRIC else 99, g[1], g[2]),
    )
    panels = [
        (g, loss_rows([r for r in rows if (r["cell.task"], r["cell.data"], r["cell.scale"]) == g])) for g in groups
    ]
    panels = [(g, curves) for g, curves in panels if curves]
    if not panels:
        return False
    fig, axes = plt.subplots(len(panels), 1, figsize=(9, 3.2 * len(panels)), squeeze=False)
    for ax, ((task, data, scale), curves) in zip(axes[:, 0], panels, strict=False):
        draw_losses(ax, curves, f"{TITLES[task]} ({data} data, {scale} scale): training loss per step")
    fig.tight_layout()
    fig.savefig(path, dpi=120, bbox_inches="tight", pad_inches=0.1)
    plt.close(fig)
    return True


def attempts_and_gaps(run_dirs: Iterable[str | os.PathLike], found: Iterable[Record]) -> str:
    """Markdown lines on what the tables do not show: cells retried (their earlier attempts, kept under attempts/ by
    scripts.results.merge), cells of the run's plan that have no record (never ran, or their artifact was lost),
    and files quarantined as not sound records (scripts/results/records.py), each with its reason."""
    lines, have = [], {Cell(**dataclasses.asdict(r.cell)).id for r in found}
    for run_dir in map(Path, run_dirs):
        for folder in sorted((run_dir / "attempts").glob("*")):
            if not (run_dir / "cells" / f"{folder.name}.json").exists():
                continue
            steps = []
            for path in sorted(folder.glob("*.json")) + [run_dir / "cells" / f"{folder.name}.json"]:
                try:
                    r = records.load(path)
                except RecordError as e:
                    records.quarantine(run_dir, path, str(e))
                    continue
                steps.append(f"{r.status} on {r.host or '?'} ({r.started_at})")
            lines.append(md(f"- retried {folder.name}: " + " → ".join(steps) + " (the last one is in the table)"))
        missing = [cid for cid in planned_ids(run_dir) or [] if cid not in have]
        if missing:
            lines.append(
                f"- {len(missing)} cell(s) of the plan have no record (never ran, or their record was lost; "
                f"run them again): {md(', '.join(missing))}"
            )
        for source, reason in records.quarantined(run_dir):
            lines.append(f"- quarantined {md(source)} (a copy is in {md(run_dir.name)}/quarantine/): {md(reason)}")
    return ("### Attempts, gaps and quarantined records\n\n" + "\n".join(lines) + "\n") if lines else ""


def write_report(*run_dirs: str | os.PathLike, out: str | os.PathLike | None = None) -> dict[str, Path]:
    """Merge `run_dirs` into `out` (default: the first run folder); returns the paths written."""
    out = Path(out or run_dirs[0])
    found = load_records(run_dirs)
    if not found:
        raise ReportError(f"{', '.join(map(str, run_dirs))}: no sound record to report (see quarantine/)")
    out.mkdir(parents=True, exist_ok=True)
    frame = to_frame(found)
    paths = {
        "jsonl": out / "results.jsonl",
        "csv": out / "results.csv",
        "markdown": out / "results.md",
        "plot": out / "results.png",
    }
    # Every output through a temporary file this process made and a rename: a link planted at results.md (or any of
    # them) is replaced, never written through.
    records.write_replacing(paths["jsonl"], "".join(json.dumps(r.data, sort_keys=True) + "\n" for r in found))
    records.write_replacing(
        paths["csv"], csv_safe(frame.drop(columns=["log_tail", "time", "steady", "spread"])).to_csv(index=False)
    )
    records.write_replacing(paths["markdown"], markdown(frame) + attempts_and_gaps(run_dirs, found))
    fd, tmp = tempfile.mkstemp(dir=out, prefix=".results.", suffix=".png")
    os.close(fd)
    try:
        plot(frame, tmp)
        os.chmod(tmp, 0o644)
        os.replace(tmp, paths["plot"])
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    fd, tmp = tempfile.mkstemp(dir=out, prefix=".results-loss.", suffix=".png")
    os.close(fd)
    try:
        if plot_losses(frame, tmp):
            os.chmod(tmp, 0o644)
            os.replace(tmp, out / "results-loss.png")
            paths["losses"] = out / "results-loss.png"
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return paths


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m scripts.results.report", description=__doc__.split("\n")[0])
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
