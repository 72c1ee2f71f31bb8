"""The documentation is true: every command it quotes exists (make targets and their variables, `python -m` modules
and their flags), every local link resolves, and the README stays a front door (short, its results made from the
committed references)."""

import re
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


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_quoted_python_modules_and_flags_exist(doc):
    wrong = []
    for snippet in quoted(doc.read_text()):
        for command in commands(snippet, r"python3? -m [\w.]+"):
            module = command.split()[2]
            if module.split(".")[0] not in ("scripts", "shared", "runners", "tests"):
                continue  # pytest, pip, venv: not ours
            source = module_source(module)
            if source is None:
                wrong.append(f"{command!r}: no module {module}")
                continue
            for flag in re.findall(r"(?<![\w=-])--[a-z][a-z0-9-]*", command):
                if f'"{flag}"' not in source and f"'{flag}'" not in source:
                    wrong.append(f"{command!r}: {module} has no {flag}")
    assert not wrong, wrong


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
        "README.md's results are stale: python -m scripts.results.glance --write"
    )
    assert "Lower is better" in text and "(×1.00)" in text


CLIS = sorted(
    p.relative_to(ROOT).with_suffix("").as_posix().replace("/", ".")
    for folder in ("scripts", "shared")
    for p in (ROOT / folder).glob("*.py")
    if "argparse.ArgumentParser" in p.read_text()
)


@pytest.mark.parametrize("module", CLIS)
def test_every_command_line_option_says_what_it_does(module):
    """`--help` documents every option: an option line with no text beside or under it is a missing help=."""
    import subprocess
    import sys

    out = subprocess.run(
        [sys.executable, "-m", module, "--help"], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr[-2000:]
    lines = out.stdout.splitlines()
    bare = [
        line.strip()
        for i, line in enumerate(lines)
        if re.match(r"^  -\S.*?$", line)
        and not re.search(r"\S\s{2,}\S", line.strip())
        and not re.match(r"^\s{10,}\S", lines[i + 1] if i + 1 < len(lines) else "")
    ]
    assert bare == [], f"{module} --help: no help text for {bare}"


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
