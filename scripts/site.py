"""`make site`: the Rosetta Stone as a static site — the runners side by side, section by section, and the results
of every machine in the seed's tables — in site/, ready for GitHub Pages and readable from file://.

    python -m scripts.site                                   # results/reference/* and results/community/*
    python -m scripts.site results/demo-20261204-120000 …    # … and these run folders
    python -m scripts.site --out /tmp/site

Pages: index.html (the sources of results, the tasks), code-TASK.html (every runner of a task in columns, its six
sections in rows, Pygments-highlighted; each section with the seed lessons it cites, each runner with the differences
its records name and the equivalence test that checks it; checkboxes pick the columns, CSS alone shows them),
results-TASK.html (rows frameworks, columns machine · variant · CUDA/cuDNN · precision, one source and machine class
per column, never merged; the time, spread, accuracy or AUC and efficiency; skipped and failed cells with their
reasons; each number links to its record and log; SVG plots; a little plain JavaScript adds filters), lessons.html,
and src/ (every runner and test file whole). Nothing is fetched from anywhere: no CDN, no font, no script from
outside; every table reads without JavaScript.
"""
import argparse
import html
import json
import re
import shutil
import sys
import time
from collections import OrderedDict, defaultdict
from pathlib import Path

import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from pygments import highlight  # noqa: E402
from pygments.formatters import HtmlFormatter  # noqa: E402
from pygments.lexers import JuliaLexer, PythonLexer, SLexer  # noqa: E402

from runners import FRAMEWORKS  # noqa: E402
from scripts import records, report  # noqa: E402
from scripts.matrix import ROOT, Cell, load  # noqa: E402
from shared.params import TASKS  # noqa: E402

SECTIONS = ("Config", "Data", "Model", "Train step", "Evaluate", "Main")
MARKER = re.compile(r"^\s*#\s*====\s*(.+?)\s*====\s*$")
LESSON = re.compile(r"lessons? ((?:CNN|RNN) )?(\d+)")
LANGUAGES = {".py": PythonLexer, ".R": SLexer, ".jl": JuliaLexer}
DEFAULT_PICKS = ("pytorch", "tensorflow")
MAX_PICKS = 4
REFERENCES = ROOT / "results" / "reference"
COMMUNITY = ROOT / "results" / "community"

# The seed's lessons learned (its README, in our own words): the code cites them as "lesson N" (CNN) and "lesson RNN N".
LESSONS = OrderedDict([
    ("cnn-1", "One API level for every framework: the same generator feeds each, rather than each framework's own "
              "training loop, which shuffles by batch and gains little when the data sits in memory."),
    ("cnn-2", "With cuDNN prefer NCHW to channels-last."),
    ("cnn-3", "Let cuDNN autotune its convolution algorithm for fixed-size images (most frameworks now do)."),
    ("cnn-4", "Dropout must know training from testing: never apply it at evaluation."),
    ("cnn-5", "TF_ENABLE_WINOGRAD_NONFUSED no longer speeds TensorFlow's CNN up."),
    ("cnn-6", "Softmax belongs in the loss (cross-entropy with logits): do not apply it twice."),
    ("cnn-7", "Initialisers differ between frameworks (about ±1 % accuracy): use Glorot/Xavier uniform everywhere."),
    ("cnn-8", "SGD momentum comes in kinds: turn off CNTK's unit_gain to match the others."),
    ("cnn-9", "Caffe2's no_gradient_to_input on the first layer skips a gradient nobody uses."),
    ("cnn-10", "ReLU after max-pooling, not before: the activation runs on a quarter of the elements."),
    ("cnn-11", "Check the defaults: kernel tuples, pooling strides, padding, built-in activations, bias initialisers, "
               "sparse labels, dtypes, and gradients computed at test time."),
    ("cnn-12", "Installing Caffe2 was hard; pin what works."),
    ("cnn-13", "MXNet: keep data in mx.nd arrays on the right context; NumPy in the loop copies GPU to host."),
    ("cnn-14", "MXNet queues work asynchronously: no blocking call in the loop; nd.waitall() at the epoch's end."),
    ("cnn-15", "Gluon: hybridize() caches the graph and speeds it up, once the network is debugged."),
    ("rnn-1", "The fused cuDNN GRU/LSTM kernels are fastest and nearly equal across frameworks, at some cost in "
              "flexibility (and CPU inference)."),
    ("rnn-2", "TNC is the fastest RNN layout, but NTC keeps the code like the others' for half a second."),
])
EQUIVALENCE = "tests/test_equivalence.py"


class SiteError(Exception):
    """A runner whose sections cannot be found, or a source that cannot be read; the message names the file."""


# ---------------------------------------------------------------- the runners, by section

def runner_files():
    """{task: OrderedDict(package: (path, [framework ids]))}: every runner source file a reader compares — the R and
    Julia scripts rather than their Python halves — with the framework ids it serves (keras: keras-tf, keras-jax …)."""
    matrix = load()
    found = {task: OrderedDict() for task in TASKS}
    for fid, (package, _) in FRAMEWORKS.items():
        for task in matrix.frameworks[fid].tasks if fid in matrix.frameworks else ():
            folder = ROOT / "runners" / package
            path = next((folder / f"{task}{ext}" for ext in (".R", ".jl", ".py") if (folder / f"{task}{ext}").exists()),
                        None)
            if path is None:
                raise SiteError(f"runners/{package}: no {task}.py, .R or .jl for {fid}, which matrix.yaml lists")
            found[task].setdefault(package, (path, []))[1].append(fid)
    return found


def sections(path):
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
        raise SiteError(f"{path}: sections {names or 'none'}; a runner has `# ==== NAME ====` "
                        f"markers for {', '.join(SECTIONS)}, in that order (STYLE.md)")
    parts["Config"] = parts.pop(None, []) + parts["Config"]
    return OrderedDict((name, "\n".join(parts[name]).strip("\n")) for name in SECTIONS)


def lessons_in(text):
    """The seed lessons a piece of code cites: ['cnn-4', 'rnn-2'] (a bare number is a CNN lesson)."""
    return sorted({f"{(kind or 'CNN ').strip().lower()}-{n}" for kind, n in LESSON.findall(text)
                   if f"{(kind or 'CNN ').strip().lower()}-{n}" in LESSONS}, key=lambda k: (k[:3], int(k[4:])))


def highlighted(text, path):
    return highlight(text, LANGUAGES[Path(path).suffix](), HtmlFormatter(cssclass="hl"))


# ---------------------------------------------------------------- results: sources, columns

def sources(runs=()):
    """[(kind, name, folder)]: the references, the accepted community submissions, the run folders given."""
    found = [("reference", p.name, p) for p in sorted(REFERENCES.glob("*")) if (p / "cells").is_dir()]
    if COMMUNITY.is_dir():
        from scripts import submission
        found += [("community", name, Path(folder)) for name, folder, _ in submission.accepted(COMMUNITY)]
    found += [("run", Path(r).name, Path(r)) for r in runs]
    return found


def read_source(folder):
    """(records, {cell id: log path}) of a source folder; unsound records are skipped (the report quarantines)."""
    found = []
    for path in sorted(Path(folder).glob("cells/*.json")):
        try:
            found.append(records.read(path))
        except records.RecordError as e:
            print(f"site: {e}; left out", file=sys.stderr)
    logs = {p.stem: p for p in Path(folder).glob("logs/*.log")}
    return found, logs


def column_of(row):
    machine_class = row["machine_class"] if report.known(row.get("machine_class")) else "unknown machine"
    return (row["source"], machine_class, row["cell.variant"], row["cell.precision"],
            f"{int(row['cell.gpus'])}×{row['cell.device']}")


def versions(rows, key):
    values = sorted({str(report.plain(r[key])) for r in rows if report.known(r.get(key))})
    return "/".join(values) or "—"


def device_of(rows):
    for row in rows:
        gpus = row.get("system.gpus")
        if isinstance(gpus, list) and gpus:
            return gpus[0]
    cpu = next((r["system.cpu"] for r in rows if report.known(r.get("system.cpu"))), None)
    return f"CPU: {cpu}" if cpu else "unknown device"


# ---------------------------------------------------------------- pages

STYLE = """
body { font: 15px/1.45 system-ui, sans-serif; margin: 0; color: #1b1b1b; background: #fff; }
header { background: #1f3a5f; color: #fff; padding: .6em 1.2em; }
header a { color: #fff; margin-right: 1em; }
main { padding: 1em 1.2em; }
h1 { font-size: 1.5em; } h2 { font-size: 1.2em; margin-top: 1.6em; }
table { border-collapse: collapse; margin: .5em 0; }
th, td { border: 1px solid #ccd; padding: .3em .5em; vertical-align: top; text-align: left; }
thead th { background: #eef2f7; position: sticky; top: 0; }
.muted { color: #666; font-size: .85em; }
.code td { min-width: 28em; max-width: 48em; overflow-x: auto; }
.code th.section { width: 9em; }
.hl pre { margin: 0; font-size: 12.5px; line-height: 1.35; white-space: pre; }
.notes { font-size: .82em; color: #444; margin-top: .4em; }
.picks { margin: .6em 0 1em; }
.picks label { margin-right: .9em; white-space: nowrap; }
.results td a { color: inherit; }
.status-skipped { color: #666; } .status-failed, .status-timeout { color: #a11; }
.filters select { margin-right: 1em; }
[hidden] { display: none !important; }
figure { margin: 1em 0; } figure img { max-width: 100%; }
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
// Result filters: hide the columns (and whole groups) that do not match every chosen value.
document.querySelectorAll('.filters').forEach(function (form) {
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


def page(title, body, depth=0):
    up = "../" * depth
    nav = " ".join([f'<a href="{up}index.html">Rosetta</a>']
                   + [f'<a href="{up}code-{t}.html">code: {t}</a>' for t in TASKS]
                   + [f'<a href="{up}results-{t}.html">results: {t}</a>' for t in TASKS]
                   + [f'<a href="{up}lessons.html">lessons</a>'])
    return (f'<!doctype html>\n<html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)}</title>'
            f'<meta name="viewport" content="width=device-width, initial-scale=1">'
            f'<link rel="stylesheet" href="{up}style.css"></head>\n<body><header>{nav}</header>\n<main>\n'
            f'<h1>{html.escape(title)}</h1>\n{body}\n</main>\n<script src="{up}site.js"></script></body></html>\n')


def differences_by_framework(rows):
    found = defaultdict(set)
    for row in rows:
        for d in row.get("metrics.differences") if isinstance(row.get("metrics.differences"), list) else ():
            found[(row["cell.framework"], row["cell.task"])].add(d)
    return found


def code_page(task, runners, differences):
    picks = [p for p in runners if p in DEFAULT_PICKS] or list(runners)[:2]
    boxes, css = [], []
    for package, (path, fids) in runners.items():
        boxes.append(f'<input type="checkbox" class="pick" id="pick-{package}"{" checked" if package in picks else ""}>'
                     f'<label for="pick-{package}">{html.escape(", ".join(fids))}</label>')
        css.append(f"#pick-{package}:checked ~ table .c-{package} {{ display: table-cell; }}")
    parsed = {package: sections(path) for package, (path, _) in runners.items()}
    head = "".join(f'<th class="c-{p}">{html.escape(", ".join(fids))}<div class="muted"><a href="src/'
                   f'{path.relative_to(ROOT).as_posix()}.html">{path.relative_to(ROOT).as_posix()}</a></div></th>'
                   for p, (path, fids) in runners.items())
    rows = []
    for name in SECTIONS:
        cells = []
        for package, (path, _) in runners.items():
            text = parsed[package][name]
            cited = lessons_in(text)
            notes = ("lessons: " + ", ".join(f'<a href="lessons.html#{k}">{k.replace("-", " ").upper()}</a>'
                                             for k in cited)) if cited else ""
            cells.append(f'<td class="c-{package}">{highlighted(text, path) if text else "<p class=muted>—</p>"}'
                         f'<div class="notes">{notes}</div></td>')
        rows.append(f'<tr id="section-{name.lower().replace(" ", "-")}"><th class="section">{name}</th>'
                    + "".join(cells) + "</tr>")
    cells = []
    for package, (path, fids) in runners.items():
        named = sorted(set().union(*(differences.get((fid, task), set()) for fid in fids)))
        if path.suffix == ".jl":
            test = ('no equivalence test: Knet is not installable here; <a href="src/tests/test_julia_runner.py.html">'
                    'tests/test_julia_runner.py</a> checks the skeleton and the skip')
        else:
            ids = ", ".join(f"test_same_weights_same_logits[{fid}-{task}]" for fid in fids)
            test = (f'same weights → same logits as the canonical reference: <a href="src/{EQUIVALENCE}.html#'
                    f'test_same_weights_same_logits">{html.escape(ids)}</a>')
        listed = "".join(f"<li>{html.escape(d)}</li>" for d in named) or "<li>none recorded</li>"
        cells.append(f'<td class="c-{package}"><div class="notes">differences the records name:<ul>{listed}</ul>'
                     f'{test}</div></td>')
    rows.append('<tr id="section-differences"><th class="section">Named differences, equivalence</th>'
                + "".join(cells) + "</tr>")
    hide = '.sbs .code td[class^="c-"], .sbs .code th[class^="c-"] { display: none; }'
    body = (f'<p>Pick two to four systems: their runners line up section by section (the same six sections in every '
            f'runner, STYLE.md). Each section lists the seed lessons it cites; the last row, what each runner\'s '
            f'records name as differing from the canonical definition, and the test that checks both compute the '
            f'same function.</p>\n<style>{hide} {" ".join(css)}</style>\n'
            f'<div class="sbs picks">\n' + "\n".join(boxes) + '\n'   # the boxes precede the table: CSS shows columns
            f'<table class="code"><thead><tr><th class="section">section</th>{head}</tr></thead>\n<tbody>'
            + "\n".join(rows) + "</tbody></table></div>")
    return page(f"{report.TITLES[task]}: the runners side by side", body)


def results_page(task, frame, out, plots):
    """The task's tables, one per data kind × scale (cells of different work are not comparable), and its plots."""
    rows = [r for r in frame.to_dict("records") if r["cell.task"] == task]
    if not rows:
        return page(f"{report.TITLES[task]}: results", "<p>No records of this task in any source yet.</p>")
    groups = defaultdict(list)
    for row in rows:
        groups[(row["cell.data"], row["cell.scale"])].append(row)
    quality = report.QUALITY_METRIC.get(task)
    unit = report.TIME_LABEL[report.TIME_METRIC[task]]
    unit += ", the median pass" if task == "resnet50" else " as waited / at the steady rate"
    quality_text = f" ({report.QUALITY_LABEL[quality]})" if quality else ""
    parts = [f'<p>{html.escape(unit)}, ±spread, eff = share of the framework\'s own GEMM rate{quality_text}. '
             f'One column per source, '
             f'machine class, variant and precision: records of different machines are never merged. Each value '
             f'links to its record (and log).</p>', '<p class="muted">' + html.escape(report.MARKS) + "</p>"]
    filters = defaultdict(set)
    tables = []
    for (data, scale), group in sorted(groups.items()):
        columns = defaultdict(list)
        for row in group:
            columns[column_of(row)].append(row)
        keys = sorted(columns)
        frameworks = sorted({r["cell.framework"] for r in group})
        footnotes = {}
        attrs = {}
        head = []
        for i, key in enumerate(keys):
            source, machine_class, variant, precision, gpus = key
            col = columns[key]
            a = {"device": device_of(col), "cuda": versions(col, "system.cuda"),
                 "cudnn": versions(col, "system.cudnn"), "precision": precision, "data": data, "scale": scale,
                 "source": source}
            for k, v in a.items():
                filters[k].add(v)
            attrs[key] = " ".join(f'data-{k}="{html.escape(v)}"' for k, v in a.items()) + f' data-col="{i}"'
            head.append(f'<th {attrs[key]}>{html.escape(a["device"])}<br>{html.escape(variant)} · CUDA '
                        f'{html.escape(a["cuda"])} · cuDNN {html.escape(a["cudnn"])} · {precision} · {gpus}'
                        f'<div class="muted">{html.escape(machine_class)} · {html.escape(source)}</div></th>')
        body = []
        for fw in frameworks:
            cells = []
            for key in keys:
                row = next((r for r in columns[key] if r["cell.framework"] == fw), None)
                if row is None:
                    cells.append(f"<td {attrs[key]}>—</td>")
                    continue
                text = html.escape(report.cell_text(row, task, footnotes))
                record, log = row["links"]
                link = f'<a href="{record}">{text}</a>' + (f' <a class="muted" href="{log}">log</a>' if log else "")
                cells.append(f'<td {attrs[key]} class="status-{row["status"]}">{link}</td>')
            body.append(f"<tr><th>{html.escape(fw)}</th>{''.join(cells)}</tr>")
        notes = "".join(f"<li>[{n}] {html.escape(str(text))}</li>" for text, n in sorted(footnotes.items(),
                                                                                        key=lambda kv: kv[1]))
        figure = plot(task, data, scale, group, out, plots) + loss_plot(task, data, scale, group, out, plots)
        tables.append(f'<section class="group" data-data="{data}" data-scale="{scale}"><h2>{data} data · {scale} '
                      f'scale</h2><table class="results"><thead><tr><th>framework</th>{"".join(head)}</tr></thead>'
                      f'<tbody>{"".join(body)}</tbody></table><ol class="muted footnotes">{notes}</ol>{figure}'
                      f'</section>')
    selects = "".join(f'<label>{k} <select name="{k}"><option value="">all</option>'
                      + "".join(f'<option>{html.escape(v)}</option>' for v in sorted(vs)) + "</select></label>"
                      for k, vs in filters.items())
    form = f'<form class="filters" onsubmit="return false">{selects}</form>'
    return page(f"{report.TITLES[task]}: results", "\n".join(parts) + form + "\n".join(tables))


def plot(task, data, scale, rows, out, plots):
    """An SVG of the group's ok cells: one bar per framework and column (its steady state, or as waited)."""
    bars = [(f"{r['cell.framework']} · {r['cell.variant']} · {r['cell.precision']} · {r['source']}",
             r["steady"] if report.known(r.get("steady")) else r["time"])
            for r in rows if r["status"] == "ok" and report.known(r.get("time"))][:report.PLOT_CAP]
    if not bars:
        return ""
    bars.sort()
    fig, ax = plt.subplots(figsize=(9, 0.28 * len(bars) + 1.2))
    ax.barh(range(len(bars)), [v for _, v in bars], color="tab:blue")
    ax.set_yticks(range(len(bars)), [label for label, _ in bars], fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel(report.TIME_LABEL[report.TIME_METRIC[task]] + " (steady state where known)")
    ax.set_title(f"{report.TITLES[task]} — {data} data, {scale} scale", fontsize=9)
    fig.tight_layout()
    name = f"plots/{task}-{data}-{scale}.svg"
    fig.savefig(out / name, format="svg", metadata={"Date": None})
    plt.close(fig)
    plots.append(name)
    return f'<figure><img src="{name}" alt="{html.escape(report.TITLES[task])}: bar chart of the table above">' \
           f'</figure>'


def loss_plot(task, data, scale, rows, out, plots):
    """An SVG of the group's per-step training losses, every framework on one chart (report.draw_losses)."""
    curves = report.loss_rows(rows)
    if not curves:
        return ""
    fig, ax = plt.subplots(figsize=(9, 3.4))
    report.draw_losses(ax, curves, f"{report.TITLES[task]} — {data} data, {scale} scale: training loss per step")
    fig.tight_layout()
    name = f"plots/{task}-{data}-{scale}-loss.svg"
    fig.savefig(out / name, format="svg", metadata={"Date": None})
    plt.close(fig)
    plots.append(name)
    return f'<figure><img src="{name}" alt="{html.escape(report.TITLES[task])}: training loss per step of every ' \
           f'framework"></figure>'


def index_page(found, counts):
    rows = "".join(f"<tr><td>{kind}</td><td>{html.escape(name)}</td><td>{html.escape(', '.join(classes))}</td>"
                   f"<td>{n}</td></tr>" for (kind, name, _), (classes, n) in zip(found, counts))
    tasks = "".join(f'<li>{report.TITLES[t]}: <a href="code-{t}.html">the runners side by side</a> · '
                    f'<a href="results-{t}.html">results</a></li>' for t in TASKS)
    body = (f"<p>The same four workloads written idiomatically in every framework: read two side by side to carry "
            f"what you know of one to the other, and compare what they cost on every machine that ran them.</p>"
            f"<ul>{tasks}</ul><h2>Where the results come from</h2><table><thead><tr><th>kind</th><th>name</th>"
            f"<th>machine classes</th><th>records</th></tr></thead><tbody>{rows}</tbody></table>"
            f"<p class=muted>reference: the committed references verify compares with (results/reference); "
            f"community: accepted submissions (results/community; <code>make submit</code>, checked by "
            f"<code>python -m scripts.submission check</code>); run: run folders given to <code>make site</code>.</p>")
    return page("The Rosetta Stone of deep-learning frameworks", body)


def lessons_page():
    items = "".join(f'<li id="{key}"><b>{key.replace("-", " ").upper()}</b>: {html.escape(text)}</li>'
                    for key, text in LESSONS.items())
    return page("The seed's lessons learned", f"<p>What the original project learnt matching accuracy across "
                                              f"frameworks; the runners cite them where they apply.</p><ul>{items}</ul>")


def source_page(path, depth):
    text = Path(path).read_text()
    formatter = HtmlFormatter(cssclass="hl", linenos="table", anchorlinenos=True, lineanchors="L")
    code = highlight(text, LANGUAGES.get(Path(path).suffix, PythonLexer)(), formatter)
    anchors = "".join(f'<a id="{m.group(1)}"></a>' for m in re.finditer(r"^def (test_\w+)", text, re.M))
    return page(Path(path).relative_to(ROOT).as_posix(), anchors + code, depth)


# ---------------------------------------------------------------- build

def build(out, runs=()):
    """Write the site into `out` (replaced); returns {"pages": n, "bytes": size, "seconds": build time}."""
    started = time.time()
    out = Path(out)
    if out.exists():
        shutil.rmtree(out)
    (out / "plots").mkdir(parents=True)
    files = runner_files()
    found = sources(runs)
    all_records, counts = [], []
    for kind, name, folder in found:
        got, logs = read_source(folder)
        label = f"{kind}/{name}"
        for record in got:
            cell_id = sanitized(record)
            record_path = out / "records" / kind / name / f"{cell_id}.json"
            record_path.parent.mkdir(parents=True, exist_ok=True)
            record_path.write_text(json.dumps(record, indent=1))
            log = logs.get(cell_id)
            log_link = None
            if log is not None:
                log_path = out / "logs" / kind / name / f"{cell_id}.log"
                log_path.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(log, log_path)
                log_link = log_path.relative_to(out).as_posix()
            record["_source"], record["_links"] = label, (record_path.relative_to(out).as_posix(), log_link)
        all_records += got
        counts.append((sorted({r["system"].get("machine_class") or "?" for r in got if r.get("system")}), len(got)))
    frame = None
    if all_records:
        frame = report.to_frame(all_records)
        frame["source"] = frame["_source"]
        frame["links"] = frame["_links"]
    differences = differences_by_framework(frame.to_dict("records")) if frame is not None else {}
    plots = []
    pages = {"index.html": index_page(found, counts), "lessons.html": lessons_page()}
    for task in TASKS:
        pages[f"code-{task}.html"] = code_page(task, files[task], differences)
        pages[f"results-{task}.html"] = (results_page(task, frame, out, plots) if frame is not None else
                                         page(f"{report.TITLES[task]}: results", "<p>No records yet.</p>"))
    for name, text in pages.items():
        (out / name).write_text(text)
    shown = {path for runners in files.values() for path, _ in runners.values()}
    shown |= {ROOT / EQUIVALENCE, ROOT / "tests" / "test_julia_runner.py"}
    for path in sorted(shown):
        target = out / "src" / f"{path.relative_to(ROOT).as_posix()}.html"
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(source_page(path, len(target.relative_to(out).parts) - 1))
    (out / "style.css").write_text(STYLE + HtmlFormatter(cssclass="hl").get_style_defs(".hl"))
    (out / "site.js").write_text(SCRIPT.replace("MAX", str(MAX_PICKS)))
    (out / ".nojekyll").write_text("")           # GitHub Pages: serve the files as they are
    size = sum(p.stat().st_size for p in out.rglob("*") if p.is_file())
    return {"pages": len(pages) + len(shown), "plots": len(plots), "records": len(all_records), "bytes": size,
            "seconds": time.time() - started}


def sanitized(record):
    """The record's cell id, checked against the safe alphabet (records.read did), for a file name in the site."""
    cell_id = Cell(**record["cell"]).id
    if not records.safe_id(cell_id):
        raise SiteError(f"cell id {cell_id!r} is not of the safe alphabet")
    return cell_id


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m scripts.site", description=__doc__.split("\n")[0])
    ap.add_argument("runs", nargs="*", type=Path, help="run folders to show beside the references and submissions")
    ap.add_argument("--out", type=Path, default=ROOT / "site")
    args = ap.parse_args(argv)
    missing = [str(r) for r in args.runs if not (r / "cells").is_dir()]
    if missing:
        print(f"error: not run folders (no cells/): {', '.join(missing)}", file=sys.stderr)
        return 2
    try:
        built = build(args.out, args.runs)
    except SiteError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(f"site written to {args.out}: {built['pages']} pages, {built['plots']} plots, {built['records']} records, "
          f"{built['bytes'] / 2**20:.1f} MiB in {built['seconds']:.1f} s; open {args.out / 'index.html'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
