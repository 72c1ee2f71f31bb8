"""Results at a glance: the README's first tables, made from the committed references so they cannot go stale.

    python -m scripts.results.glance            # print the block
    python -m scripts.results.glance --write    # replace the block between README.md's glance markers

One number per cell (the steady state: compile and first step excluded; ResNet-50: the median pass per 1,000 images),
each column sorted fastest first with "× the fastest", the machine and the date under each table. Only cells of one
reference (one machine class) share a table; tests/test_docs.py fails when README.md's block differs from this.
"""

import argparse
import sys
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from scripts.paths import REFERENCES, ROOT
from scripts.results.report import load_records, spread_marks, stale_calibration, to_frame, value_of
from shared.params import DEFAULT_TUNING

START, END = "<!-- glance:start (./rosetta scripts.results.glance --write) -->", "<!-- glance:end -->"
UNITS = {"cnn": "s", "gru": "s", "resnet50": "s / 1,000 images", "densenet121": "min"}
NAMES = {"cnn": "CNN", "gru": "GRU", "resnet50": "ResNet-50", "densenet121": "DenseNet-121"}


@dataclass(frozen=True)
class Table:
    reference: str  # folder under results/reference/
    title: str  # what the table is, in words
    columns: tuple  # (task, precision) pairs, one sorted column each


TABLES = (
    Table(
        "gpu-nvidia-h200-140g-x1",
        "One NVIDIA H200, full scale (CNN: 10 epochs of 50,000 images; ResNet-50: batches of 32)",
        (("cnn", "fp32"), ("cnn", "bf16"), ("resnet50", "fp32"), ("resnet50", "bf16")),
    ),
    Table(
        "cpu-amd-epyc-f25-m17-s1-avx512-bf16-2c",
        "Two CPU cores (AMD EPYC family 25 model 17, Zen 4), demo scale "
        "(CNN: 1,152 images, one epoch; ResNet-50: passes of 8 images)",
        (("cnn", "fp32"), ("resnet50", "fp32")),
    ),
)


def ranked(frame: Any, task: str, precision: str) -> list[tuple[str, float, str]]:
    """[(system, value, spread marks)] of the ok default cells of one column, fastest first (ties by name, so the
    order is stable); tuned cells are a column of their own (docs/tuned.md). The marks (report.spread_marks) say
    where a rank is not to be trusted: a noisy cell († over 10 %) may swap places with its neighbours in another run."""
    rows = frame[
        (frame["cell.task"] == task)
        & (frame["cell.precision"] == precision)
        & (frame["status"] == "ok")
        & (frame["cell.tuning"] == DEFAULT_TUNING)
    ]
    found = [(r["cell.framework"], value_of(r), noise(spread_marks(r))) for r in rows.to_dict("records")]
    kept = [(fw, v, marks) for fw, v, marks in found if isinstance(v, (int, float)) and v > 0]
    return sorted(kept, key=lambda p: (p[1], p[0]))


def noise(marks: str) -> str:
    """The marks of a cell whose rank is not to be trusted (noise † or still falling ↓), with its spread; '' for a
    steady cell, whose spread the site and results.md show."""
    return marks if "†" in marks or "↓" in marks else ""


def number(value: float) -> str:
    return f"{value:.3g}" if value < 100 else f"{value:.0f}"


def table(spec: Table, root: Path = REFERENCES) -> str:
    folder = root / spec.reference
    loaded = load_records([folder])
    frame = to_frame(loaded)
    columns = [ranked(frame, task, precision) for task, precision in spec.columns]
    head = ["#"] + [f"{NAMES[task]} {precision} ({UNITS[task]})" for task, precision in spec.columns]
    lines = ["| " + " | ".join(head) + " |", "|" + "---:|" + ":---|" * len(columns)]
    for rank in range(max(map(len, columns))):
        cells = []
        for column in columns:
            if rank < len(column):
                system, value, marks = column[rank]
                cells.append(f"`{system}` {number(value)}{marks} (×{value / column[0][1]:.2f})")
            else:
                cells.append("")
        lines.append(f"| {rank + 1} | " + " | ".join(cells) + " |")
    first = frame.to_dict("records")[0]
    date = min(frame["started_at"])[:10]
    lines.append("")
    caption = (
        f"*{spec.title}. Lower is better; (×n) is n times the column's fastest; ±n%† a spread over 10 % (its rank may"
        f" move), ↓ still falling. Machine: {first['machine']}."
        f" Run {date}; records and versions: [`{spec.reference}`](results/reference/{spec.reference}/results.md)"
        ".*"
    )
    stale = stale_calibration(loaded)
    if stale:  # its times stand; its efficiencies, and verify's calibrated judgement, are not today's
        caption = caption[:-1] + (
            f" Made before today's calibration ({'; '.join(sorted(stale))}): its efficiency figures are not today's,"
            " and it is made again by the next GPU check.*"
        )
    lines.extend(textwrap.wrap(caption, 118, break_long_words=False, break_on_hyphens=False))
    return "\n".join(lines)


def block(root: Path = REFERENCES) -> str:
    return "\n\n".join(table(spec, root) for spec in TABLES)


def replaced(text: str, new_block: str) -> str:
    if START not in text or END not in text:
        raise SystemExit(f"README.md has no glance markers ({START} … {END})")
    head, rest = text.split(START, 1)
    return head + START + "\n" + new_block + "\n" + END + rest.split(END, 1)[1]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m scripts.results.glance", description=__doc__.split("\n")[0])
    parser.add_argument("--write", action="store_true", help="replace the block in README.md instead of printing it")
    args = parser.parse_args(argv)
    if args.write:
        readme = ROOT / "README.md"
        readme.write_text(replaced(readme.read_text(), block()))
    else:
        print(block())
    return 0


if __name__ == "__main__":
    sys.exit(main())
