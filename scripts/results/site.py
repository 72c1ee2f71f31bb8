"""`make site`: the Rosetta Stone as a static site — the runners side by side, section by section, and the results of
every machine in the seed's tables — in site/, ready for GitHub Pages and readable from file://.

    python -m scripts.results.site                                   # results/reference/* and results/community/*
    python -m scripts.results.site results/demo-20261204-120000 …    # … and these run folders
    python -m scripts.results.site --out /tmp/site

Pages: index.html (the sources of results, the tasks), rosetta-TASK.html (the Rosetta index: one row per concept of
scripts/results/rosetta.py, one column per runner, each cell the lines its `# rosetta: CONCEPT` marker marks),
code-TASK.html (every runner of a task in columns, its six sections in rows, Pygments-highlighted; each section with the
seed lessons it cites, each runner with the differences its records name and the equivalence test that checks it;
checkboxes pick the columns, CSS alone shows them), results-TASK.html (rows frameworks, columns machine · variant ·
CUDA/cuDNN · precision, one source and machine class per column, never merged; the time, spread, accuracy or AUC and
efficiency; skipped and failed cells with their reasons; each number links to its record and log; SVG plots; a little
plain JavaScript adds filters), lessons.html, and src/ (every runner and test file whole). Nothing is fetched from
anywhere: no CDN, no font, no script from outside; every table reads without JavaScript.
"""

import argparse
import html
import json
import os
import re
import shutil
import sys
import time
from collections import OrderedDict, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from textwrap import fill
from typing import Any
from urllib.parse import quote

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import pandas as pd
from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexers import JuliaLexer, MarkdownLexer, PythonLexer, SLexer

from runners import FRAMEWORKS
from scripts.paths import COMMUNITY, REFERENCES, ROOT, safe_id
from scripts.plan.matrix import Cell, load
from scripts.results import records, report, rosetta
from scripts.results.records import Record
from shared.params import QUALITY_METRIC, TASKS
from shared.record import git_commit

SECTIONS = ("Config", "Data", "Model", "Train step", "Evaluate", "Main")
MARKER = re.compile(r"^\s*#\s*====\s*(.+?)\s*====\s*$")
LESSON = re.compile(r"lessons? ((?:CNN|RNN) )?(\d+)")
LANGUAGES = {".py": PythonLexer, ".R": SLexer, ".jl": JuliaLexer, ".md": MarkdownLexer}
DEFAULT_PICKS = ("pytorch", "tensorflow")
MAX_PICKS = 4

# The seed's lessons learned (its README, in our own words): the code cites them as "lesson N" (CNN) and "lesson RNN N".
LESSONS = OrderedDict(
    [
        (
            "cnn-1",
            "One API level for every framework: the same generator feeds each, rather than each framework's own "
            "training loop, which shuffles by batch and gains little when the data sits in memory.",
        ),
        ("cnn-2", "With cuDNN prefer NCHW to channels-last."),
        ("cnn-3", "Let cuDNN autotune its convolution algorithm for fixed-size images (most frameworks now do)."),
        ("cnn-4", "Dropout must know training from testing: never apply it at evaluation."),
        ("cnn-5", "TF_ENABLE_WINOGRAD_NONFUSED no longer speeds TensorFlow's CNN up."),
        ("cnn-6", "Softmax belongs in the loss (cross-entropy with logits): do not apply it twice."),
        (
            "cnn-7",
            "Initialisers differ between frameworks (about ±1 % accuracy): use Glorot/Xavier uniform everywhere.",
        ),
        ("cnn-8", "SGD momentum comes in kinds: turn off CNTK's unit_gain to match the others."),
        ("cnn-9", "Caffe2's no_gradient_to_input on the first layer skips a gradient nobody uses."),
        ("cnn-10", "ReLU after max-pooling, not before: the activation runs on a quarter of the elements."),
        (
            "cnn-11",
            "Check the defaults: kernel tuples, pooling strides, padding, built-in activations, bias initialisers, "
            "sparse labels, dtypes, and gradients computed at test time.",
        ),
        ("cnn-12", "Installing Caffe2 was hard; pin what works."),
        ("cnn-13", "MXNet: keep data in mx.nd arrays on the right context; NumPy in the loop copies GPU to host."),
        ("cnn-14", "MXNet queues work asynchronously: no blocking call in the loop; nd.waitall() at the epoch's end."),
        ("cnn-15", "Gluon: hybridize() caches the graph and speeds it up, once the network is debugged."),
        (
            "rnn-1",
            "The fused cuDNN GRU/LSTM kernels are fastest and nearly equal across frameworks, at some cost in "
            "flexibility (and CPU inference).",
        ),
        ("rnn-2", "TNC is the fastest RNN layout, but NTC keeps the code like the others' for half a second."),
    ]
)
EQUIVALENCE = "tests/test_equivalence.py"


MARK = ".rosetta-site"  # in every folder build() writes: the only kind of folder --out may replace
LOG_BYTES = 64 * 2**20  # a log is copied into the site only as a plain file of at most this size


class SiteError(Exception):
    """A runner whose sections cannot be found, or a source that cannot be read; the message names the file."""


# ---------------------------------------------------------------- the runners, by section


def runner_files() -> dict[str, OrderedDict[str, tuple[Path, list[str]]]]:
    """{task: OrderedDict(package: (path, [framework ids]))}: every runner source file a reader compares — the R and
    Julia scripts rather than their Python halves — with the framework ids it serves (keras: keras-tf, keras-jax …)."""
    matrix = load()
    found: dict[str, OrderedDict[str, tuple[Path, list[str]]]] = {task: OrderedDict() for task in TASKS}
    for fid, (package, _) in FRAMEWORKS.items():
        for task in matrix.frameworks[fid].tasks if fid in matrix.frameworks else ():
            folder = ROOT / "runners" / package
            path = next(
                (folder / f"{task}{ext}" for ext in (".R", ".jl", ".py") if (folder / f"{task}{ext}").exists()), None
            )
            if path is None:
                raise SiteError(f"runners/{package}: no {task}.py, .R or .jl for {fid}, which matrix.yaml lists")
            found[task].setdefault(package, (path, []))[1].append(fid)
    return found


def sections(path: str | os.PathLike) -> OrderedDict[str, str]:
    """OrderedDict(section -> its source text) from the runner's `# ==== Name ====` markers; the text above the
    first marker (module docstring, imports) belongs to Config. A SiteError unless all six are there, in order."""
    names, parts = [], defaultdict(list)
    current = None
    for line in Path(path).read_text().splitlines():
        match = MARKER.match(line)
        if match:
            current = match.group(1)
            names.append(current)
            continue
        parts[current or "Config"].append(line)
    if tuple(names) != SECTIONS:
        raise SiteError(
            f"{path}: sections {names or 'none'}; a runner has `# ==== NAME ====` "
            f"markers for {', '.join(SECTIONS)}, in that order (docs/style.md)"
        )
    parts["Config"] = parts.pop(None, []) + parts["Config"]
    return OrderedDict((name, "\n".join(parts[name]).strip("\n")) for name in SECTIONS)


def lessons_in(text: str) -> list[str]:
    """The seed lessons a piece of code cites: ['cnn-4', 'rnn-2'] (a bare number is a CNN lesson)."""
    return sorted(
        {
            f"{(kind or 'CNN ').strip().lower()}-{n}"
            for kind, n in LESSON.findall(text)
            if f"{(kind or 'CNN ').strip().lower()}-{n}" in LESSONS
        },
        key=lambda k: (k[:3], int(k[4:])),
    )


def highlighted(text: str, path: str | os.PathLike) -> str:
    return highlight(text, LANGUAGES[Path(path).suffix](), HtmlFormatter(cssclass="hl"))


# ---------------------------------------------------------------- results: sources, columns


Source = tuple[str, str, Path, Mapping[str, Any] | None]


def sources(runs: Iterable[str | os.PathLike] = ()) -> list[Source]:
    """[(kind, name, folder, summary)]: the references, the accepted community submissions (with the checker's
    summary of each, signer included: read once), the run folders given; summary None but for submissions."""
    found: list[Source] = [
        ("reference", p.name, p, None) for p in sorted(REFERENCES.glob("*")) if (p / "cells").is_dir()
    ]
    if COMMUNITY.is_dir():
        from scripts.results import submission

        found += [("community", name, Path(folder), made) for name, folder, made in submission.accepted(COMMUNITY)]
    found += [("run", Path(r).name, Path(r), None) for r in runs]
    return found


def source_note(made: Mapping[str, Any] | None, got: Sequence[Record]) -> str:
    """What a reader must know of a source before comparing it, for its column heads and the first page: a community
    submission is marked unsigned (or by whom it is signed) and the commit its runners are from; a source measured
    with another calibration than today's says how. `made`: a submission's summary (sources), None for the rest;
    '' for a source that needs no note."""
    notes = []
    if made is not None:
        from scripts.results import submission

        notes.append(f"signed by {made['signed_by']}" if made.get("signed_by") else "unsigned")
        commit = submission.full_commit(made.get("git_commit"))
        if commit:
            notes.append(f"runners of commit {commit[:10]}")
            # what it ran is not what the site shows beside it: how many of the code-hash files differ since
            code, out = submission.git(["diff", "--name-only", commit, "HEAD", "--", "runners", "shared"])
            changed = len(out.decode().split()) if code == 0 else 0
            if changed:
                notes.append(f"{changed} runner files changed since")
    stale = report.stale_calibration(got)
    if stale:
        notes.append("calibrated before today: " + "; ".join(sorted(stale)))
    return f" ({' · '.join(notes)})" if notes else ""


def read_source(folder: Path) -> tuple[list[Record], dict[str, Path]]:
    """(records, {cell id: log path}) of a source folder; unsound records are skipped (the report quarantines)."""
    found = []
    for path in sorted(Path(folder).glob("cells/*.json")):
        try:
            found.append(records.load(path))
        except records.RecordError as e:
            print(f"site: {e}; left out", file=sys.stderr)
    logs = {p.stem: p for p in Path(folder).glob("logs/*.log")}
    return found, logs


def column_of(row: Mapping[str, Any]) -> tuple[Any, ...]:
    machine_class = row["machine_class"] if report.known(row.get("machine_class")) else "unknown machine"
    return (
        row["source"],
        machine_class,
        row["cell.variant"],
        row["cell.precision"],
        f"{int(row['cell.gpus'])}×{row['cell.device']}",
    )


def versions(rows: Iterable[Mapping[str, Any]], key: str, kind: str) -> str:
    values = sorted({report.version_text(r[key], kind) for r in rows if report.known(r.get(key))})
    return "/".join(values) or "—"


def device_of(rows: Iterable[Mapping[str, Any]]) -> Any:
    """The device a column ran on: for GPU cells the GPU as nvidia-smi named it (the facts its machine class is
    derived from, where the record has them), else the CPU; a CPU cell's list of the host's GPUs names no device of
    its own."""
    for row in rows:
        if row.get("cell.device") != "gpu":
            continue
        facts = row.get("system.gpu_facts")
        named = [f.get("name") for f in facts if isinstance(f, dict)] if isinstance(facts, list) else []
        gpus = [g for g in named if isinstance(g, str) and g] or row.get("system.gpus")
        if isinstance(gpus, list) and gpus:
            return gpus[0]
    cpu = next((r["system.cpu"] for r in rows if report.known(r.get("system.cpu"))), None)
    return f"CPU: {cpu}" if cpu else "unknown device"


# ---------------------------------------------------------------- pages

STYLE = """
body { font: 15px/1.45 system-ui, sans-serif; margin: 0; color: #1b1b1b; background: #fff; }
header { background: #1f3a5f; color: #fff; padding: .4em 1.2em; }
header nav { display: flex; flex-wrap: wrap; gap: .15em 1.4em; }
header .group { white-space: nowrap; }
header .group b { font-weight: 600; margin-right: .35em; }
header a { color: #fff; margin-right: .55em; display: inline-block; }
header a[aria-current] { font-weight: 700; text-decoration-thickness: 2px; }
main { padding: 1em 1.2em; max-width: 100%; box-sizing: border-box; overflow-wrap: break-word; }
h1 { font-size: 1.5em; } h2 { font-size: 1.2em; margin-top: 1.6em; }
table { border-collapse: collapse; margin: .5em 0; }
th, td { border: 1px solid #ccd; padding: .3em .5em; vertical-align: top; text-align: left; min-width: 12ch; }
thead th { background: #eef2f7; position: sticky; top: 0; }
th, .name { overflow-wrap: normal; word-break: keep-all; }
.muted { color: #666; font-size: .85em; }
.code { table-layout: fixed; width: 100%; }
.code th.section { width: 9em; }
.code .label { display: none; }
.hl { overflow-x: auto; }  /* code too wide for its cell scrolls in its own box, never the page */
.hl pre { margin: 0; font-size: 12.5px; line-height: 1.35; white-space: pre-wrap; overflow-wrap: anywhere; }
.notes { font-size: .82em; color: #444; margin-top: .4em; overflow-wrap: anywhere; }
.picks { margin: .6em 0 1em; }
.picks label { margin-right: .9em; white-space: nowrap; display: inline-block; }
table.results { display: block; overflow-x: auto; max-width: 100%; }
.results td a { color: inherit; }
.results td.num, .results th.num { text-align: right; font-variant-numeric: tabular-nums; }
.detail { display: none; color: #555; font-size: .82em; }
main:has(#details:checked) .detail { display: block; }
.status-skipped { color: #666; } .status-failed, .status-timeout { color: #a11; }
.filters select { margin-right: 1em; max-width: 14em; }
.columns { columns: 14em; } .glossary dt { font-weight: 600; } .glossary dd { margin: 0 0 .5em 1.2em; }
[hidden] { display: none !important; }
figure { margin: 1em 0; } figure img { max-width: 100%; height: auto; }
@media (max-width: 800px) {
  /* a phone: the side-by-side tables stack, each row a block headed by its section or concept, each system's cell
     under it with the system's name as its label; each snippet scrolls sideways in its own box */
  .code, .code tbody, .code tr { display: block; width: auto; }
  .code thead { display: none; }
  .code th.section { display: block; width: auto; background: #eef2f7; font-weight: 600; border-bottom: 0; }
  .code td { display: block; border-top: 0; }
  .code tr { margin-bottom: .8em; }
  .code .hl pre { white-space: pre; overflow-wrap: normal; }
  .code .label { display: block; font-weight: 600; font-size: .85em; color: #1f3a5f; margin-bottom: .2em; }
}
@media (max-width: 700px) {
  main { padding: .6em; } header { padding: .4em .6em; }
  main > table, .sbs > table:not(.code) { display: block; overflow-x: auto; }
  .filters label { display: inline-block; margin-bottom: .3em; }
}
"""

SCRIPT = """
// The checkboxes pick the code columns through CSS alone; this only keeps at most MAX of them ticked.
document.querySelectorAll('.sbs').forEach(function (sbs) {
  var order = [];
  sbs.querySelectorAll('input.pick').forEach(function (box) {
    if (box.checked) order.push(box);
    box.addEventListener('change', function () {
      order = order.filter(function (b) { return b !== box; });
      if (box.checked) order.push(box);
      while (order.length > MAX) order.shift().checked = false;
    });
  });
});
// Result filters: hide the columns (and whole groups) that do not match every chosen value. The form is hidden in the
// page and shown here, so a reader without JavaScript never meets controls that do nothing.
document.querySelectorAll('.filters').forEach(function (form) {
  form.hidden = false;
  var page = form.parentNode;
  function apply() {
    var chosen = {};
    form.querySelectorAll('select').forEach(function (s) { if (s.value) chosen[s.name] = s.value; });
    page.querySelectorAll('[data-col]').forEach(function (el) {
      var ok = Object.keys(chosen).every(function (k) { return (el.getAttribute('data-' + k) || '') === chosen[k]; });
      el.hidden = !ok;
    });
    page.querySelectorAll('section.group').forEach(function (group) {
      group.hidden = group.querySelectorAll('th[data-col]:not([hidden])').length === 0;
    });
  }
  form.querySelectorAll('select').forEach(function (s) { s.addEventListener('change', apply); });
});
"""


def page(title: str, body: str, depth: int = 0, here: str = "") -> str:
    """A page of the site: the navigation (every page, in groups that wrap on a narrow window; `here`, the page's
    own file, marked as the current one), the title and the body."""
    up = "../" * depth

    def mark(name: str) -> str:
        return ' aria-current="page"' if name == here else ""

    groups = [f'<span class="group"><a href="{up}index.html"{mark("index.html")}>Rosetta Stone</a></span>']
    for kind in ("rosetta", "code", "results"):
        links = "".join(
            f'<a href="{up}{kind}-{t}.html" title="{kind}: {t}"{mark(f"{kind}-{t}.html")}>{t}</a>' for t in TASKS
        )
        groups.append(f'<span class="group"><b>{kind}:</b>{links}</span>')
    groups.append(f'<span class="group"><a href="{up}lessons.html"{mark("lessons.html")}>lessons</a></span>')
    nav = '<nav aria-label="pages">' + "".join(groups) + "</nav>"
    return (
        f'<!doctype html>\n<html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)}</title>'
        f'<meta name="viewport" content="width=device-width, initial-scale=1">'
        f'<link rel="stylesheet" href="{up}style.css"></head>\n<body><header>{nav}</header>\n<main>\n'
        f'<h1>{html.escape(title)}</h1>\n{body}\n</main>\n<script src="{up}site.js"></script></body></html>\n'
    )


def differences_by_framework(rows: Iterable[Mapping[str, Any]]) -> dict[tuple[Any, Any], set[Any]]:
    found: dict[tuple[Any, Any], set[Any]] = defaultdict(set)
    for row in rows:
        differences = row.get("metrics.differences")
        for d in differences if isinstance(differences, list) else ():
            found[(row["cell.framework"], row["cell.task"])].add(d)
    return found


def pickers(runners: Mapping[str, tuple[Path, list[str]]]) -> tuple[str, str]:
    """The checkboxes that pick a side-by-side page's columns (two ticked at first) and the :has() CSS that shows
    the ticked ones, without JavaScript."""
    picks = [p for p in runners if p in DEFAULT_PICKS] or list(runners)[:2]
    boxes, css = [], []
    for package, (_path, fids) in runners.items():
        boxes.append(
            f'<label for="pick-{package}"><input type="checkbox" class="pick" id="pick-{package}"'
            f"{' checked' if package in picks else ''}> {html.escape(', '.join(fids))}</label>"
        )
        css.append(f".sbs:not(:has(#pick-{package}:checked)) .c-{package} {{ display: none; }}")
    return '<div class="picks">\n' + "\n".join(boxes) + "</div>\n", f"<style>{' '.join(css)}</style>\n"


def runner_head(runners: Mapping[str, tuple[Path, list[str]]]) -> str:
    return "".join(
        f'<th class="c-{p}">{html.escape(", ".join(fids))}<div class="muted"><a href="src/'
        f'{path.relative_to(ROOT).as_posix()}.html">{breakable(path.relative_to(ROOT).as_posix())}</a></div></th>'
        for p, (path, fids) in runners.items()
    )


def breakable(path: str) -> str:
    """A file path, escaped, that may wrap after its slashes (and nowhere else): runners/<wbr>r_keras/<wbr>cnn.R."""
    return "/<wbr>".join(html.escape(part) for part in path.split("/"))


def label(fids: Sequence[str]) -> str:
    """A cell's system names, shown above it where the side-by-side rows stack (a phone) and the header is hidden."""
    return f'<div class="label name">{html.escape(", ".join(fids))}</div>'


def code_page(
    task: str, runners: Mapping[str, tuple[Path, list[str]]], differences: Mapping[tuple[Any, Any], set[Any]]
) -> str:
    boxes, style = pickers(runners)
    parsed = {package: sections(path) for package, (path, _) in runners.items()}
    head = runner_head(runners)
    rows = []
    for name in SECTIONS:
        cells = []
        for package, (path, fids) in runners.items():
            text = parsed[package][name]
            cited = lessons_in(text)
            notes = (
                (
                    "lessons: "
                    + ", ".join(f'<a href="lessons.html#{k}">{k.replace("-", " ").upper()}</a>' for k in cited)
                )
                if cited
                else ""
            )
            cells.append(
                f'<td class="c-{package}">{label(fids)}{highlighted(text, path) if text else "<p class=muted>—</p>"}'
                f'<div class="notes">{notes}</div></td>'
            )
        rows.append(
            f'<tr id="section-{name.lower().replace(" ", "-")}"><th class="section">{name}</th>'
            + "".join(cells)
            + "</tr>"
        )
    cells = []
    for package, (path, fids) in runners.items():
        named = sorted(set().union(*(differences.get((fid, task), set()) for fid in fids)))
        if path.suffix == ".jl":
            test = (
                'no equivalence test: Knet is not installable here; <a href="src/tests/test_julia_runner.py.html">'
                "tests/test_julia_runner.py</a> checks the skeleton and the skip"
            )
        else:
            ids = ", ".join(f"test_same_weights_same_logits[{fid}-{task}]" for fid in fids)
            test = (
                f'same weights → same logits as the canonical reference: <a href="src/{EQUIVALENCE}.html#'
                f'test_same_weights_same_logits">{html.escape(ids)}</a>'
            )
        listed = "".join(f"<li>{html.escape(d)}</li>" for d in named) or "<li>none recorded</li>"
        cells.append(
            f'<td class="c-{package}">{label(fids)}<div class="notes">differences the records name:<ul>{listed}</ul>'
            f"{test}</div></td>"
        )
    rows.append(
        '<tr id="section-differences"><th class="section">Named differences, equivalence</th>'
        + "".join(cells)
        + "</tr>"
    )
    body = (
        f"<p>Pick two to four systems: their runners line up section by section (the same six sections in every "
        f'runner, <a href="src/docs/style.md.html">docs/style.md</a>). Each section lists the seed lessons it '
        f"cites; the last row, what each runner's records name as differing from the canonical definition, and "
        f"the test that checks both compute the same function. Long lines wrap. Concept by concept (the device, "
        f'the optimizer, the barrier …): <a href="rosetta-{task}.html">the Rosetta index</a>.</p>\n'
        f'{style}<div class="sbs">{boxes}'
        f'<table class="code"><thead><tr><th class="section">section</th>{head}</tr></thead>\n<tbody>'
        + "\n".join(rows)
        + "</tbody></table></div>"
    )
    return page(f"{report.TITLES[task]}: the runners side by side", body, here=f"code-{task}.html")


def rosetta_page(task: str, runners: Mapping[str, tuple[Path, list[str]]]) -> str:
    """Rows the concepts of the task (scripts/results/rosetta.py), columns the runners picked like the code page's, each
    cell the lines its `# rosetta:` marker marks, each snippet linked to its whole source file at that line."""
    boxes, style = pickers(runners)
    found = {package: rosetta.concepts_of(task, path) for package, (path, _) in runners.items()}
    rows = []
    for concept in rosetta.TASK_CONCEPTS[task]:
        cells = []
        for package, (_path, fids) in runners.items():
            snippets = found[package].get(concept)
            reason = rosetta.EXCEPTIONS.get((package, task, concept))
            text = (
                "".join(
                    f'<div class="muted"><a href="src/{p.relative_to(ROOT).as_posix()}.html#L-{n}">'
                    f"{breakable(p.relative_to(ROOT).as_posix())}:{n}</a></div>{highlighted(code, p)}"
                    for p, n, code in snippets or ()
                )
                or f'<p class="muted">{html.escape(reason or "—")}</p>'
            )
            cells.append(f'<td class="c-{package}">{label(fids)}{text}</td>')
        rows.append(
            f'<tr id="concept-{concept}"><th class="section"><span class="name">{concept}</span><div class="muted">'
            f"{html.escape(rosetta.CONCEPTS[concept])}</div></th>" + "".join(cells) + "</tr>"
        )
    body = (
        f"<p>One concept per row, the few lines that do it in each system's runner, found by the "
        f"<code># rosetta: CONCEPT</code> comment above them (so this page follows the code; "
        f'<a href="src/docs/style.md.html">docs/style.md</a>). Pick two to four systems; each snippet links to '
        f"its whole file at that line. The runners in full, section by section: "
        f'<a href="code-{task}.html">code: {task}</a>.</p>\n'
        f'{style}<div class="sbs">{boxes}'
        f'<table class="code rosetta"><thead><tr><th class="section">concept</th>{runner_head(runners)}</tr>'
        f"</thead>\n<tbody>" + "\n".join(rows) + "</tbody></table></div>"
    )
    return page(f"{report.TITLES[task]}: the Rosetta index", body, here=f"rosetta-{task}.html")


SOURCE_ORDER = {"reference": 0, "community": 1, "run": 2}


def source_key(source: str) -> tuple[int, str]:
    """References first, then accepted submissions, then the run folders given; by name within each."""
    kind = source.split("/", 1)[0]
    return SOURCE_ORDER.get(kind, len(SOURCE_ORDER)), source


def results_page(task: str, frame: pd.DataFrame, out: Path, plots: list[str]) -> str:
    """The task's tables, one per data kind × scale (cells of different work are not comparable), and its plots:
    one number per cell (its steady state) with × the column's fastest, rows fastest first by the first column, the
    waited time, spread, efficiency and accuracy one tick away; versions and run dates under each table."""
    rows = [r for r in frame.to_dict("records") if r["cell.task"] == task]
    if not rows:
        return page(f"{report.TITLES[task]}: results", "<p>No records of this task in any source yet.</p>")
    groups = defaultdict(list)
    for row in rows:
        groups[(row["cell.data"], row["cell.scale"])].append(row)
    quality = QUALITY_METRIC.get(task)
    unit = (
        "s per 1,000 images (median pass)"
        if task == "resnet50"
        else ("minutes" if task == "densenet121" else "s")
        + " of training at the steady rate (compile and first step apart)"
    )
    quality_text = f"; details add the {report.QUALITY_LABEL[quality]}" if quality else ""
    parts = [
        f"<p><b>{html.escape(unit)} — lower is better</b>; (×n) is n times the column's fastest. One column "
        f"per source, machine class, variant and precision: records of different machines are never merged, and "
        f"columns of different machines compare only with care. Each value links to its record (and log).</p>",
        f'<p><label><input type="checkbox" id="details"> show details</label> <span class="muted">(time as '
        f"waited / steady state, ±spread, eff = share of the device's peak for the precision (peak) and of the "
        f"framework's own GEMM rate on it (GEMM); above 100 % of either is flagged implausible and not shown as an "
        f"efficiency{html.escape(quality_text)})</span></p>",
        '<p class="muted">' + html.escape(report.MARKS) + "</p>",
    ]
    filters = defaultdict(set)
    tables = []
    for (data, scale), group in sorted(groups.items()):
        columns = defaultdict(list)
        for row in group:
            columns[column_of(row)].append(row)
        keys = sorted(columns, key=lambda k: (source_key(k[0]), k[1:]))
        fastest = {k: min((v for v in map(report.value_of, columns[k]) if v), default=None) for k in keys}
        first = {r["cell.framework"]: report.value_of(r) for r in columns[keys[0]]}
        frameworks = sorted(
            {r["cell.framework"] for r in group}, key=lambda fw: (first.get(fw) is None, first.get(fw) or 0, fw)
        )
        footnotes: dict[str, int] = {}
        attrs, head, under = {}, [], []
        for i, key in enumerate(keys):
            source, machine_class, variant, precision, gpus = key
            col = columns[key]
            on_gpu = any(r["cell.device"] == "gpu" for r in col)
            a = {
                "device": device_of(col),
                "cuda": versions(col, "system.cuda", "cuda") if on_gpu else "—",
                "cudnn": versions(col, "system.cudnn", "cudnn") if on_gpu else "—",
                "precision": precision,
                "data": data,
                "scale": scale,
                "source": source,
            }
            for k, v in a.items():
                filters[k].add(v)
            attrs[key] = " ".join(f'data-{k}="{html.escape(v)}"' for k, v in a.items()) + f' data-col="{i}"'
            cuda = f" · CUDA {html.escape(a['cuda'])} · cuDNN {html.escape(a['cudnn'])}" if on_gpu else ""
            head.append(
                f'<th {attrs[key]} class="num">{html.escape(a["device"])}<br>{html.escape(variant)}{cuda} · '
                f'{precision} · {gpus}<div class="muted">{html.escape(machine_class)} · '
                f"{html.escape(source)}</div></th>"
            )
            software = sorted({t for t in map(report.software_of, col) if t})
            dates = sorted(str(r["started_at"])[:10] for r in col if report.known(r.get("started_at")))
            when = f"run {dates[0]}" + (f" to {dates[-1]}" if dates and dates[-1] != dates[0] else "") if dates else ""
            under.append(
                f"<li {attrs[key]}>{html.escape(source)} · {html.escape(variant)} · {precision}: "
                f"{html.escape('; '.join(software) or 'versions not recorded')}; {when}</li>"
            )
        body = []
        for fw in frameworks:
            cells = []
            for key in keys:
                row = next((r for r in columns[key] if r["cell.framework"] == fw), None)
                if row is None:
                    cells.append(f"<td {attrs[key]}>—</td>")
                    continue
                detail = html.escape(report.cell_text(row, task, footnotes))
                value, best = report.value_of(row), fastest[key]  # best is a number wherever value is
                shown = (
                    f'{value:.3g} <span class="muted">(×{value / best:.2f}'
                    f"{html.escape(report.speedup_text(row))})</span>"
                    f"{html.escape(report.note_marks(row, footnotes))}"
                    if value and best
                    else detail
                )
                record, log = row["links"]
                link = f'<a href="{href(record)}">{shown}</a>' + (
                    f' <a class="muted" href="{href(log)}">log</a>' if log else ""
                )
                extra = f'<span class="detail">{detail}</span>' if value else ""
                cells.append(f'<td {attrs[key]} class="num status-{row["status"]}">{link}{extra}</td>')
            body.append(f"<tr><th>{html.escape(fw)}</th>{''.join(cells)}</tr>")
        notes = "".join(
            f"<li>[{n}] {html.escape(str(text))}</li>" for text, n in sorted(footnotes.items(), key=lambda kv: kv[1])
        )
        figures = "".join(
            plot(task, data, scale, [r for r in group if r["source"] == source], out, plots)
            for source in sorted({r["source"] for r in group}, key=source_key)
        )
        figures += loss_plot(task, data, scale, group, out, plots)
        tables.append(
            f'<section class="group" data-data="{html.escape(data)}" data-scale="{html.escape(scale)}">'
            f'<h2>{html.escape(data)} data · {html.escape(scale)} scale</h2><table class="results"><thead><tr>'
            f"<th>framework</th>{''.join(head)}</tr></thead>"
            f'<tbody>{"".join(body)}</tbody></table><ul class="muted">{"".join(under)}</ul>'
            f'<ol class="muted footnotes">{notes}</ol>{figures}</section>'
        )
    selects = "".join(
        f'<label>{k} <select name="{k}"><option value="">all</option>'
        + "".join(f"<option>{html.escape(v)}</option>" for v in sorted(vs))
        + "</select></label>"
        for k, vs in filters.items()
    )
    form = f'<form class="filters" hidden onsubmit="return false">{selects}</form>'
    return page(
        f"{report.TITLES[task]}: results", "\n".join(parts) + form + "\n".join(tables), here=f"results-{task}.html"
    )


def href(path: str) -> str:
    """A relative link to a file the site wrote: its path percent-encoded (a run folder may be named
    `"><img onerror=…>`), then escaped for the attribute."""
    return html.escape(quote(path, safe="/"), quote=True)


def plot(task: str, data: str, scale: str, rows: list[dict[str, Any]], out: Path, plots: list[str]) -> str:
    """An SVG of one source's ok cells in a group: one bar per framework and column, fastest on top, each with its
    value; the unit and "lower is better" on the axis."""
    bars = sorted(
        (value, f"{r['cell.framework']} · {r['cell.variant']} · {r['cell.precision']}")
        for r in rows
        for value in [report.value_of(r)]
        if value and report.plottable(value)
    )[: report.PLOT_CAP]
    if not bars:
        return ""
    source = rows[0]["source"]
    fig, ax = plt.subplots(figsize=(9, 0.3 * len(bars) + 1.4))
    ax.barh(range(len(bars)), [v for v, _ in bars], color="tab:blue")
    ax.set_yticks(range(len(bars)), [label for _, label in bars], fontsize=9)
    for y, (value, _) in enumerate(bars):
        ax.text(value, y, f" {value:.3g}", va="center", fontsize=9)
    ax.invert_yaxis()
    ax.margins(x=0.12)
    unit = "s per 1,000 images" if task == "resnet50" else ("min" if task == "densenet121" else "s") + ", steady state"
    ax.set_xlabel(f"{unit} — lower is better", fontsize=9)
    title = f"{report.TITLES[task]} — {data} data, {scale} scale, fastest first — {source}"
    ax.set_title(fill(title, report.TITLE_CHARS - 10), fontsize=10, loc="left")
    fig.tight_layout()
    name = f"plots/{task}-{data}-{scale}-{re.sub(r'[^a-zA-Z0-9_.-]', '-', source)}.svg"
    fig.savefig(out / name, format="svg", metadata={"Date": None}, bbox_inches="tight", pad_inches=0.1)
    plt.close(fig)
    plots.append(name)
    return (
        f'<figure><img src="{name}" alt="{html.escape(report.TITLES[task])}, {html.escape(source)}: bar chart '
        f'of the table above"></figure>'
    )


def loss_plot(task: str, data: str, scale: str, rows: list[dict[str, Any]], out: Path, plots: list[str]) -> str:
    """An SVG of the group's per-step training losses, every framework on one chart (report.draw_losses)."""
    curves = report.loss_rows(rows)
    if not curves:
        return ""
    fig, ax = plt.subplots(figsize=(9, 3.4))
    report.draw_losses(ax, curves, f"{report.TITLES[task]} — {data} data, {scale} scale: training loss per step")
    fig.tight_layout()
    name = f"plots/{task}-{data}-{scale}-loss.svg"
    fig.savefig(out / name, format="svg", metadata={"Date": None}, bbox_inches="tight", pad_inches=0.1)
    plt.close(fig)
    plots.append(name)
    return (
        f'<figure><img src="{name}" alt="{html.escape(report.TITLES[task])}: training loss per step of every '
        f'framework"></figure>'
    )


GLOSSARY = (
    (
        "steady state",
        "a training cell's time at its settled rate: the median window of five steps × every step, "
        "compile and first step reported apart (as warm-up); ResNet-50's is the median timed pass",
    ),
    ("spread", "IQR / median of a cell's post-warm-up samples; none below five samples"),
    (
        "machine class",
        "the key results are compared by, derived from a record's own facts (CPU model and ISA, "
        "cores; GPU model, memory and count): cells of different classes are never merged",
    ),
    ("reference", "committed records of one machine class (results/reference/), made by `make reference`"),
    (
        "verify",
        "`make verify` runs the demo and compares each cell with the reference of this machine's class, "
        "with its samples, in both directions (too fast is a broken clock)",
    ),
    (
        "synthetic data",
        "seeded, learnable twins of CIFAR-10, IMDB and ChestX-ray14 in the real formats: accuracy "
        "on them shows that a system learns, not how well",
    ),
    ("demo scale", "a few hundred images per cell, so that every system runs on two CPU cores in minutes"),
    (
        "efficiency (eff)",
        "the cell's model FLOP/s over the device's peak for its precision (peak) and over the "
        "framework's own GEMM on it (GEMM); above 100 % of either is flagged implausible",
    ),
)
REPOSITORY = "https://github.com/{}"
ORIGINAL = "https://github.com/ilkarman/DeepLearningFrameworks"


def headline(frame: pd.DataFrame | None) -> list[str]:
    """Per reference and task: the fastest and the slowest system of its most filled precision, and the factor."""
    lines: list[str] = []
    if frame is None:
        return lines
    rows = [r for r in frame.to_dict("records") if r["source"].startswith("reference/") and report.value_of(r)]
    for source in sorted({r["source"] for r in rows}):
        for task in TASKS:
            cells = [r for r in rows if r["source"] == source and r["cell.task"] == task]
            if len(cells) < 2:
                continue
            precision = max(
                sorted({r["cell.precision"] for r in cells}), key=lambda p: sum(r["cell.precision"] == p for r in cells)
            )
            ranked = sorted(
                (value, r["cell.framework"])
                for r in cells
                for value in [report.value_of(r)]
                if r["cell.precision"] == precision and value  # every row of `rows` has a value
            )
            (low, fast), (high, slow) = ranked[0], ranked[-1]
            unit = "s / 1,000 images" if task == "resnet50" else ("min" if task == "densenet121" else "s")
            lines.append(
                f'<li><a href="results-{task}.html">{html.escape(report.TITLES[task])}</a>, '
                f"{html.escape(source.split('/', 1)[1])}, {precision}: fastest <b>{html.escape(fast)}</b> "
                f"({low:.3g} {unit}), slowest <b>{html.escape(slow)}</b> ({high:.3g} {unit}): "
                f"×{high / low:.1f} between them, {len(ranked)} systems</li>"
            )
    return lines


def index_page(
    found: Sequence[Source],
    counts: Sequence[tuple[list[str], int, str]],
    frame: pd.DataFrame | None = None,
    built_from: Mapping[str, Any] | None = None,
) -> str:
    rows = "".join(
        f"<tr><td>{kind}</td><td>{html.escape(label.split('/', 1)[1])}</td><td>{html.escape(', '.join(classes))}</td>"
        f"<td>{n}</td></tr>"
        for (kind, *_), (classes, n, label) in zip(found, counts, strict=False)
    )
    tasks = "".join(
        f'<li>{report.TITLES[t]}: <a href="rosetta-{t}.html">the Rosetta index</a> (concept by concept) · '
        f'<a href="code-{t}.html">the runners side by side</a> · '
        f'<a href="results-{t}.html">results</a></li>'
        for t in TASKS
    )
    systems = "".join(f"<li><code>{html.escape(fid)}</code></li>" for fid in FRAMEWORKS)
    glossary = "".join(f"<dt>{html.escape(term)}</dt><dd>{html.escape(text)}</dd>" for term, text in GLOSSARY)
    built = built_from or {}
    repository = (
        f'<a href="{html.escape(REPOSITORY.format(built["repository"]), quote=True)}">the repository</a>'
        if built.get("repository")
        else "a local checkout"
    )
    top = "".join(headline(frame)) or "<li>No reference records yet.</li>"
    body = (
        f"<p>The same four deep-learning workloads written idiomatically in every major framework: read two "
        f"runners side by side to carry what you know of one framework to another, and compare what they cost "
        f'on every machine that ran them. It continues <a href="{ORIGINAL}">ilkarman/DeepLearningFrameworks'
        f"</a>; built {html.escape(built.get('date', ''))} from {repository} at commit "
        f"<code>{html.escape(built.get('commit') or 'unknown')}</code>.</p>"
        f"<h2>At a glance (lower is better)</h2><ul>{top}</ul>"
        f"<h2>The four workloads</h2><ul>{tasks}</ul>"
        f'<h2>Systems</h2><ul class="columns">{systems}</ul>'
        f"<h2>Where the results come from</h2><table><thead><tr><th>kind</th><th>name</th>"
        f"<th>machine classes</th><th>records</th></tr></thead><tbody>{rows}</tbody></table>"
        f"<p class=muted>reference: the committed references verify compares with (results/reference); "
        f"community: accepted submissions (results/community; <code>make submit</code>, checked by "
        f"<code>python -m scripts.results.submission check</code>); run: run folders given to "
        f"<code>make site</code>.</p>"
        f'<h2>Words used here</h2><dl class="glossary">{glossary}</dl>'
    )
    return page("The Rosetta Stone of deep-learning frameworks", body, here="index.html")


def lessons_page() -> str:
    items = "".join(
        f'<li id="{key}"><b>{key.replace("-", " ").upper()}</b>: {html.escape(text)}</li>'
        for key, text in LESSONS.items()
    )
    return page(
        "The seed's lessons learned",
        f"<p>What the original project learnt matching accuracy across "
        f"frameworks; the runners cite them where they apply.</p><ul>{items}</ul>",
        here="lessons.html",
    )


def source_page(path: str | os.PathLike, depth: int) -> str:
    text = Path(path).read_text()
    formatter = HtmlFormatter(cssclass="hl", linenos="table", anchorlinenos=True, lineanchors="L")
    code = highlight(text, LANGUAGES.get(Path(path).suffix, PythonLexer)(), formatter)
    anchors = "".join(f'<a id="{m.group(1)}"></a>' for m in re.finditer(r"^def (test_\w+)", text, re.M))
    return page(Path(path).relative_to(ROOT).as_posix(), anchors + code, depth)


# ---------------------------------------------------------------- build


def build(out: str | os.PathLike, runs: Iterable[str | os.PathLike] = ()) -> dict[str, Any]:
    """Write the site into `out` (replaced); returns {"pages": n, "bytes": size, "seconds": build time}."""
    started = time.time()
    out = Path(out)
    if out.is_symlink() or (out.exists() and not out.is_dir()):
        raise SiteError(f"{out} is a link or a file: pass a folder for the site (new, or one this command made)")
    if out.exists() and any(out.iterdir()) and not (out / MARK).is_file():
        raise SiteError(
            f"{out} holds files this command did not write (no {MARK} in it): it replaces only a folder "
            "it made; pass a new or empty folder with --out"
        )
    if out.exists():
        shutil.rmtree(out)
    (out / "plots").mkdir(parents=True)
    (out / MARK).write_text(
        "written by python -m scripts.results.site; it replaces this folder whole on the next build\n"
    )
    files = runner_files()
    found = sources(runs)
    all_records, counts = [], []
    for kind, name, folder, made in found:
        got, logs = read_source(folder)
        label = f"{kind}/{name}{source_note(made, got)}"
        for record in got:
            cell_id = sanitized(record)
            record_path = out / "records" / kind / name / f"{cell_id}.json"
            record_path.parent.mkdir(parents=True, exist_ok=True)
            record_path.write_text(json.dumps(record.data, indent=1))
            log = logs.get(cell_id)
            log_link = None
            if log is not None and records.not_plain(log, LOG_BYTES) is None:
                log_path = out / "logs" / kind / name / f"{cell_id}.log"
                log_path.parent.mkdir(parents=True, exist_ok=True)
                try:
                    log_path.write_bytes(records.read_plain(log, LOG_BYTES))
                    log_link = log_path.relative_to(out).as_posix()
                except records.RecordError:
                    pass  # a log swapped for a link or a FIFO: the record is shown without it
            # a row of the frame: the record as written, and where the site put it
            all_records.append(
                {**record.data, "_source": label, "_links": (record_path.relative_to(out).as_posix(), log_link)}
            )
        # the classes the records themselves name, "?" for a runner's record that names none (as written: the site
        # shows what a record says)
        counts.append(
            (
                sorted({r.data["system"].get("machine_class") or "?" for r in got if r.data.get("system")}),
                len(got),
                label,
            )
        )
    frame = None
    if all_records:
        frame = report.to_frame(all_records)
        frame["source"] = frame["_source"]
        frame["links"] = frame["_links"]
    differences = differences_by_framework(frame.to_dict("records")) if frame is not None else {}
    plots: list[str] = []
    built_from = {
        "date": time.strftime("%Y-%m-%d", time.gmtime()),
        "commit": git_commit(ROOT),
        "repository": os.environ.get("GITHUB_REPOSITORY"),
    }  # set where GitHub Actions builds it
    pages = {"index.html": index_page(found, counts, frame, built_from), "lessons.html": lessons_page()}
    for task in TASKS:
        pages[f"rosetta-{task}.html"] = rosetta_page(task, files[task])
        pages[f"code-{task}.html"] = code_page(task, files[task], differences)
        pages[f"results-{task}.html"] = (
            results_page(task, frame, out, plots)
            if frame is not None
            else page(f"{report.TITLES[task]}: results", "<p>No records yet.</p>")
        )
    for name, text in pages.items():
        (out / name).write_text(text)
    shown = {path for runners in files.values() for path, _ in runners.values()}
    shown |= {p for path in set(shown) for p in rosetta.shared_files(path) if rosetta.markers(p)}
    shown |= {ROOT / EQUIVALENCE, ROOT / "tests" / "test_julia_runner.py", ROOT / "docs" / "style.md"}
    for path in sorted(shown):
        target = out / "src" / f"{path.relative_to(ROOT).as_posix()}.html"
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(source_page(path, len(target.relative_to(out).parts) - 1))
    (out / "style.css").write_text(STYLE + HtmlFormatter(cssclass="hl").get_style_defs(".hl"))
    (out / "site.js").write_text(SCRIPT.replace("MAX", str(MAX_PICKS)))
    (out / ".nojekyll").write_text("")  # GitHub Pages: serve the files as they are
    size = sum(p.stat().st_size for p in out.rglob("*") if p.is_file())
    return {
        "pages": len(pages) + len(shown),
        "plots": len(plots),
        "records": len(all_records),
        "bytes": size,
        "seconds": time.time() - started,
    }


def sanitized(record: Record) -> str:
    """The record's cell id, checked against the safe alphabet (records.read did), for a file name in the site."""
    cell_id = Cell(**record.data["cell"]).id
    if not safe_id(cell_id):
        raise SiteError(f"cell id {cell_id!r} is not of the safe alphabet")
    return cell_id


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m scripts.results.site", description=__doc__.split("\n")[0])
    ap.add_argument("runs", nargs="*", type=Path, help="run folders to show beside the references and submissions")
    ap.add_argument("--out", type=Path, default=ROOT / "site", help="the folder to write the site to (default: site/)")
    args = ap.parse_args(argv)
    missing = [str(r) for r in args.runs if not (r / "cells").is_dir()]
    if missing:
        print(f"error: not run folders (no cells/): {', '.join(missing)}", file=sys.stderr)
        return 2
    try:
        built = build(args.out, args.runs)
    except (SiteError, rosetta.MarkerError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(
        f"site written to {args.out}: {built['pages']} pages, {built['plots']} plots, {built['records']} records, "
        f"{built['bytes'] / 2**20:.1f} MiB in {built['seconds']:.1f} s; open {args.out / 'index.html'}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
