"""The documentation is true: every command it quotes exists (make targets and their variables, `python -m` modules
and their flags), every local link resolves, and the README stays a front door (short, its results made from the
committed references). It is also readable: no paragraph or list item is over 150 words."""

import json
import re
import subprocess
from pathlib import Path

import pytest
from conftest import ROOT

pytestmark = pytest.mark.unit

DOCS = [
    ROOT / "README.md",
    ROOT / "CONTRIBUTING.md",
    ROOT / "CHANGELOG.md",
    *sorted((ROOT / "docs").glob("*.md")),
    *sorted((ROOT / "results").glob("*/README.md")),
]
MAKEFILE = (ROOT / "Makefile").read_text()
TARGETS = set(re.findall(r"^([a-z][a-z-]*):", MAKEFILE, flags=re.M))
# Modules whose flags live elsewhere: the runner contract's flags are shared/runner.py's parser, the submission
# package's are its cli.py's.
FLAG_SOURCES = {
    "runners": ["runners/__main__.py", "shared/runner.py"],
    "scripts.plan": ["scripts/plan/__main__.py", "scripts/plan/planfile.py"],
    "scripts.results.submission": ["scripts/results/submission/__main__.py", "scripts/results/submission/cli.py"],
}


def quoted(text):
    """The command text of a Markdown file: fenced blocks and inline code spans."""
    blocks = re.findall(r"^```[a-z]*\n(.*?)^```", text, flags=re.M | re.S)
    rest = re.sub(r"^```[a-z]*\n.*?^```", "", text, flags=re.M | re.S)
    return blocks + re.findall(r"`([^`\n]+)`", rest)


def commands(snippet, program):
    """Each command line of `snippet` that runs `program` (make, or python -m), from the program name on; a line
    may hold several joined by ; && or |."""
    found = []
    for line in snippet.replace("\\\n", " ").splitlines():
        line = line.split(" #", 1)[0]
        for part in re.split(r";|&&|\|\||\$\(|\)", line):
            match = re.search(program, part)
            if match:
                found.append(part[match.start() :].strip())
    return found


def module_source(module):
    files = FLAG_SOURCES.get(module)
    if files:
        return "".join((ROOT / f).read_text() for f in files)
    path = ROOT / Path(*module.split("."))
    for candidate in (path.with_suffix(".py"), path / "__main__.py"):
        if candidate.exists():
            return candidate.read_text()
    return None


def test_every_document_is_found():
    assert len(DOCS) >= 12 and all(p.exists() for p in DOCS)
    for name in ("LICENSE", "CITATION.cff", "CONTRIBUTING.md", "CHANGELOG.md", "docs/faq.md", "docs/style.md"):
        assert (ROOT / name).is_file(), name


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_quoted_make_targets_and_variables_exist(doc):
    wrong = []
    for snippet in quoted(doc.read_text()):
        for command in commands(snippet, r"(?<![\w./-])make\b"):
            words = command.split("`")[0].split()[1:]
            for word in words:
                if "=" in word:
                    variable = word.split("=", 1)[0]
                    if re.fullmatch(r"[A-Z_]+", variable) and not re.search(rf"\b{variable}\b", MAKEFILE):
                        wrong.append(f"{command!r}: the Makefile knows no {variable}")
                elif re.fullmatch(r"[a-z][a-z-]*", word):
                    if word not in TARGETS:
                        wrong.append(f"{command!r}: no target {word!r}")
                else:
                    break
    assert not wrong, wrong


OURS = ("scripts", "shared", "runners", "tests", "bench")
# `python -m` is right only where the command runs in another Python than the host environment's: a runner in its
# framework's environment or image, the GPU check in a bare GPU machine's own Python. Everything else is ./rosetta.
OTHER_PYTHONS = ("runners", "scripts.gpu_check")
TOOL = r"(?:python3? -m|\./rosetta) [\w.]+"


def documented_tools():
    """(document, command, module) for every quoted `./rosetta MODULE …` or `python -m MODULE …` of ours."""
    for doc in DOCS:
        for snippet in quoted(doc.read_text()):
            for command in commands(snippet, TOOL):
                module = command.split()[1 if command.startswith("./rosetta") else 2]
                if module.split(".")[0] in OURS:
                    yield doc, command, module


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_quoted_python_modules_and_flags_exist(doc):
    wrong = []
    for _, command, module in (t for t in documented_tools() if t[0] == doc):
        source = module_source(module)
        if source is None:
            wrong.append(f"{command!r}: no module {module}")
            continue
        for flag in re.findall(r"(?<![\w=-])--[a-z][a-z0-9-]*", command):
            if flag != "--help" and f'"{flag}"' not in source and f"'{flag}'" not in source:
                wrong.append(f"{command!r}: {module} has no {flag}")
    assert not wrong, wrong


def test_the_host_side_tools_are_quoted_the_one_way_that_works_from_a_fresh_shell():
    """`python -m scripts.…` from a shell without the host environment activated ends in ModuleNotFoundError; the
    documents say ./rosetta, which finds the environment itself, except where another Python is meant."""
    wrong = [
        f"{doc.relative_to(ROOT)}: {command!r}"
        for doc, command, module in documented_tools()
        if command.startswith("python") and not module.startswith(OTHER_PYTHONS)
    ]
    assert not wrong, "write ./rosetta MODULE instead: " + "; ".join(wrong)


def fresh_shell():
    """The environment of a new login shell: no virtual environment active, no project folder on PATH."""
    return {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": str(ROOT), "LANG": "C.UTF-8"}


CLIS = sorted(
    # shared/runner.py's parser is the runners' (`python -m runners`): it runs there, not as a module of its own
    "runners" if p.name == "runner.py" else p.relative_to(ROOT).with_suffix("").as_posix().replace("/", ".")
    for folder in ("scripts", "shared")
    for p in (ROOT / folder).glob("*.py")
    if "argparse.ArgumentParser" in p.read_text()
)
# Runs each module's --help in one process (imports shared between them: a process per module cost 2 s each), and
# writes {module: [exit code or the error, what it printed]} as JSON.
HELP_DRIVER = """
import contextlib, io, json, runpy, sys
out_path, found = sys.argv[1], {}
for m in sys.argv[2:]:
    sys.argv = [m, "--help"]
    out = io.StringIO()
    try:
        with contextlib.redirect_stdout(out):
            runpy.run_module(m, run_name="__main__", alter_sys=True)
        found[m] = ["no --help: it ran", out.getvalue()]
    except SystemExit as e:
        found[m] = [e.code or 0, out.getvalue()]
    except Exception as e:
        found[m] = [type(e).__name__ + ": " + str(e), out.getvalue()]
open(out_path, "w").write(json.dumps(found))
"""


@pytest.fixture(scope="module")
def helps(tmp_path_factory):
    """{module: (exit code or error, --help's text)} of every documented tool and every CLI of scripts/ and shared/,
    run through ./rosetta from another folder by a shell that activated nothing (no venv on PATH)."""
    folder = tmp_path_factory.mktemp("helps")
    (folder / "help_all.py").write_text(HELP_DRIVER)
    documented = {m for _, c, m in documented_tools() if c.startswith("./rosetta") and m != "pytest"}
    proc = subprocess.run(
        [str(ROOT / "rosetta"), "help_all", str(folder / "found.json"), *sorted(documented | set(CLIS))],
        cwd=folder,  # -m finds help_all.py in its folder, the cwd
        env=fresh_shell(),
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    return {m: tuple(v) for m, v in json.loads((folder / "found.json").read_text()).items()}


def test_every_documented_tool_answers_help_through_rosetta_from_a_fresh_shell(helps):
    """Every module the documents run through ./rosetta imports and parses its options in the host environment."""
    documented = sorted({m for _, c, m in documented_tools() if c.startswith("./rosetta") and m != "pytest"})
    assert "scripts.run" in documented and "scripts.results.submission" in documented
    bad = {m: helps[m][0] for m in documented if helps[m][0] != 0 or "usage:" not in helps[m][1]}
    assert not bad, bad


@pytest.mark.parametrize("module", CLIS)
def test_every_command_line_option_says_what_it_does(module, helps):
    """`--help` documents every option: an option line with no text beside or under it is a missing help=."""
    code, text = helps[module]
    assert code == 0, code
    lines = text.splitlines()
    bare = [
        line.strip()
        for i, line in enumerate(lines)
        if re.match(r"^  -\S.*?$", line)
        and not re.search(r"\S\s{2,}\S", line.strip())
        and not re.match(r"^\s{10,}\S", lines[i + 1] if i + 1 < len(lines) else "")
    ]
    assert bare == [], f"{module} --help: no help text for {bare}"


def test_documented_make_commands_parse_as_written_from_a_fresh_shell():
    """`make -n` of every quoted make command (its variables as written): the target exists and its recipe
    expands, without running it."""
    wrong = []
    seen = set()
    for doc in DOCS:
        for snippet in quoted(doc.read_text()):
            for command in commands(snippet, r"(?<![\w./-])make\b"):
                words = []
                for word in command.split("`")[0].split()[1:]:
                    if not re.fullmatch(r"[a-z][a-z-]*|[A-Z_]+=[\w./:#-]*", word):
                        break
                    words.append(word)
                if not words or tuple(words) in seen:
                    continue
                seen.add(tuple(words))
                proc = subprocess.run(
                    ["make", "-n", "--no-print-directory", *words],
                    cwd=ROOT,
                    env=fresh_shell(),
                    capture_output=True,
                    text=True,
                    timeout=60,
                )
                if proc.returncode:
                    wrong.append(f"{doc.relative_to(ROOT)}: make {' '.join(words)}: {proc.stderr.strip()[-300:]}")
    assert len(seen) >= 10 and not wrong, wrong


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_local_links_resolve(doc):
    text = re.sub(r"^```.*?^```", "", doc.read_text(), flags=re.M | re.S)
    broken = []
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if re.match(r"[a-z]+:", target) or target.startswith("#"):
            continue
        path = (doc.parent / target.split("#", 1)[0]).resolve()
        if not path.exists():
            broken.append(target)
    assert not broken, broken


# Every paragraph and list item a reader meets is at most this many words (issue 49: a new reader met paragraphs of
# 523, 889 and 1,634). CHANGELOG.md is a log of entries, not prose to read through, so it is left out.
MAX_WORDS = 150
PROSE = [p for p in DOCS if p.name != "CHANGELOG.md"] + [ROOT / "bench" / "README.md"]
LIST_ITEM = re.compile(r"\s*(?:[-*]|\d+\.)\s")


def prose_blocks(text):
    """(first words, word count) of each paragraph and list item of a Markdown text. A paragraph runs between blank
    lines; a list item from its `- `, `* ` or `N. ` line (after any indentation) to the next item or blank line.
    Fenced code blocks, tables and headings are not counted, and each ends the block before it."""
    blocks, current, fenced = [], [], False
    for line in [*text.splitlines(), ""]:
        stripped = line.strip()
        if stripped.startswith("```"):
            fenced = not fenced
        prose = bool(stripped) and not fenced and not stripped.startswith(("```", "|", "#"))
        item = LIST_ITEM.match(line)
        if current and (not prose or item):
            words = " ".join(current).split()
            blocks.append((" ".join(words[:8]), len(words)))
            current = []
        if prose:
            current.append(line[item.end() :] if item else stripped)  # the item's marker is not a word
    return blocks


def test_the_word_count_sees_paragraphs_and_items_but_not_code_tables_or_headings():
    text = "# A heading of words\n\none two\nthree\n\n- four five\n  six\n  - seven\n1. eight\n| a | b |\n"
    text += "```sh\nnine ten eleven\n```\ntwelve\n"
    assert prose_blocks(text) == [
        ("one two three", 3),
        ("four five six", 3),
        ("seven", 1),
        ("eight", 1),
        ("twelve", 1),
    ]


@pytest.mark.parametrize("doc", PROSE, ids=lambda p: str(p.relative_to(ROOT)))
def test_paragraphs_and_list_items_are_at_most_150_words(doc):
    """A wall of text loses the reader: split a long paragraph at its seams (short paragraphs, bolded lead-ins,
    sub-headings, lists), and a long list item into sub-items."""
    name = doc.relative_to(ROOT).as_posix()
    long = [f"{name}: {first!r}… ({n} words)" for first, n in prose_blocks(doc.read_text()) if n > MAX_WORDS]
    assert not long, f"over {MAX_WORDS} words: " + "; ".join(long)


def test_the_readme_is_a_front_door():
    """Short, wrapped, and the two commands near the top, after the results."""
    lines = (ROOT / "README.md").read_text().splitlines()
    assert len(lines) <= 150, len(lines)
    assert [n for n, line in enumerate(lines, 1) if len(line) > 120] == []
    text = "\n".join(lines)
    assert text.index("## Results at a glance") < text.index("make demo") < text.index("## The four workloads")
    assert "https://github.com/ilkarman/DeepLearningFrameworks" in text


def test_the_readme_results_are_the_committed_references():
    """`python -m scripts.results.glance --write` made them; a reference regenerated without it fails here."""
    from scripts.results import glance

    text = (ROOT / "README.md").read_text()
    assert glance.replaced(text, glance.block()) == text, (
        "README.md's results are stale: ./rosetta scripts.results.glance --write"
    )
    assert "Lower is better" in text and "(×1.00)" in text


def test_the_code_cites_only_pages_that_exist():
    """A comment or docstring that points a reader to a page of docs/ or bench/, or to a top-level page, points to a
    file of this repository (docs/design.md holds the design; the notes it came from live outside the repository)."""
    cited = re.compile(r"(?<![\w/.-])((?:docs|bench)/[\w-]+\.md|[A-Z][A-Z_-]*\.md)\b")
    sources = [
        path
        for pattern in ("*.py", "*.R", "*.jl", "*.sh", "*.yaml", "*.yml", "*.toml", "Makefile", "Dockerfile")
        for path in ROOT.rglob(pattern)
        if not {".venv", ".git", "site", "results", "node_modules"} & set(path.relative_to(ROOT).parts)
    ]
    missing = sorted(
        {
            f"{path.relative_to(ROOT)}: {name}"
            for path in sources
            for name in cited.findall(path.read_text(errors="replace"))
            if not (ROOT / name).is_file()
        }
    )
    assert sources and not missing, missing


def test_the_glance_marks_every_cell_whose_rank_may_move():
    """A noisy cell (spread over 10 %) or one still falling carries its marks in the README's tables; steady ones
    carry none, so the marks stand out."""
    from scripts.paths import REFERENCES
    from scripts.results import glance
    from scripts.results.report import load_records, to_frame

    spec = glance.TABLES[1]
    frame = to_frame(load_records([REFERENCES / spec.reference]))
    for task, precision in spec.columns:
        for system, _, marks in glance.ranked(frame, task, precision):
            row = frame[(frame["cell.framework"] == system) & (frame["cell.task"] == task)].iloc[0]
            assert ("†" in marks) == (row["timing.unstable"] is True), (system, task, marks)
    assert "†" in glance.table(spec)  # the committed CPU reference has noisy cells: the loop above saw some


def test_a_reference_made_before_todays_calibration_says_so_under_its_table():
    """The H200 reference calibrated with 1024² GEMMs (now 8192²) and tf32 as float32: its glance caption names both;
    the CPU reference, calibrated as today, says nothing of the kind."""
    from scripts.results import glance

    gpu, cpu = (glance.table(spec) for spec in glance.TABLES)
    assert "Made before today's calibration" in gpu and "1024² GEMMs, now 8192²" in gpu
    assert "tf32 calibrated as float32, now tfloat32" in gpu
    assert "calibration" not in cpu


def test_the_site_size_docs_state_is_what_make_site_writes(tmp_path):
    """docs/site.md's size of the site (references and accepted submissions, as `make site` builds it) is the size a
    build writes today, within 15 % (a build takes some seconds)."""
    from scripts.results import site

    stated = re.search(r"([\d.]+) MiB and [\d–]+ s for today's (\d+) records", (ROOT / "docs" / "site.md").read_text())
    assert stated, "docs/site.md no longer states the site's size as 'N MiB and A–B s for today's N records'"
    built = site.build(tmp_path / "site")
    size = built["bytes"] / 2**20
    assert abs(float(stated.group(1)) - size) <= 0.15 * size, (
        f"docs/site.md says {stated.group(1)} MiB for {stated.group(2)} records; the site is {size:.1f} MiB "
        f"for {built['records']} records"
    )


def test_machine_classes_the_documents_quote_are_those_the_code_computes():
    """docs/methodology.md said `gpu:nvidia-h200:141g:x1` where sysinfo computes 140g from the H200's 143,771 MiB:
    every class string a document quotes is one that shared.sysinfo.machine_class gives a committed reference's
    records (their own facts, not the key they carry)."""
    from scripts.paths import REFERENCES
    from scripts.results import records
    from shared import sysinfo

    computed = set()
    for path in REFERENCES.glob("*/cells/*.json"):
        record = records.load(path)
        computed.add(sysinfo.machine_class(dict(record.system), record.cell.device, record.cell.gpus))
    quoted_classes = {
        found for doc in DOCS for found in re.findall(r"\b(?:cpu|gpu):[a-z0-9.-]+(?::[a-z0-9.-]+)+", doc.read_text())
    }
    assert "gpu:nvidia-h200:140g:x1" in quoted_classes
    assert quoted_classes <= computed, sorted(quoted_classes - computed)
