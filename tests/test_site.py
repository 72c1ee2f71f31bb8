"""make site: every runner's sections are found, the site builds offline from references and run folders, results of
different machine classes stay apart, and in a real browser (Debian's chromium through Selenium, from file://) the
choosers and filters change what is shown, with no console error and no request outside file://."""

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import IN_CI, ROOT

from scripts.results import report, rosetta, site

# One worker takes the module (tests/conftest.py schedules it whole): the site its tests share is built once.
pytestmark = pytest.mark.xdist_group("site")

PAGES = ["index.html", "lessons.html"] + [
    f"{kind}-{t}.html" for t in ("cnn", "gru", "resnet50", "densenet121") for kind in ("rosetta", "code", "results")
]


@pytest.mark.unit
@pytest.mark.parametrize("task, package", [(t, p) for t, runners in site.runner_files().items() for p in runners])
def test_every_runner_has_its_six_sections(task, package):
    path, _ = site.runner_files()[task][package]
    found = site.sections(path)
    assert list(found) == list(site.SECTIONS) and all(found[name].strip() for name in ("Model", "Main"))


@pytest.mark.unit
def test_every_system_and_task_is_on_the_side_by_side_pages():
    files = site.runner_files()
    frameworks = {fid for runners in files.values() for _, fids in runners.values() for fid in fids}
    assert frameworks == set(site.load().frameworks)
    assert any(path.suffix == ".R" for _, (path, _) in files["cnn"].items())
    assert any(path.suffix == ".jl" for _, (path, _) in files["gru"].items())


@pytest.mark.unit
def test_a_runner_without_its_markers_is_named(tmp_path):
    text = (ROOT / "runners" / "pytorch" / "cnn.py").read_text().replace("# ==== Evaluate ====", "# evaluate")
    (tmp_path / "cnn.py").write_text(text)
    with pytest.raises(site.SiteError, match=r"cnn.py: sections .*'Train step', 'Main'.*Evaluate"):
        site.sections(tmp_path / "cnn.py")


@pytest.mark.unit
def test_the_lessons_a_section_cites_are_found():
    assert site.lessons_in(
        "ReLU after pooling (lesson 10), dropout off (lessons 4), TNC (lesson RNN 2), lesson 99"
    ) == ["cnn-4", "cnn-10", "rnn-2"]


# ---------------------------------------------------------------- the Rosetta index's markers


@pytest.mark.unit
@pytest.mark.parametrize("task, package", [(t, p) for t, runners in site.runner_files().items() for p in runners])
def test_every_runner_marks_every_concept_of_its_task(task, package):
    """`# rosetta: CONCEPT` above the lines that do it, in the task module or its package's shared files; a runner
    that truly cannot have a concept is an explicit exception in scripts/results/rosetta.py, with the reason."""
    path, _ = site.runner_files()[task][package]
    found = rosetta.concepts_of(task, path)
    missing = [
        c for c in rosetta.TASK_CONCEPTS[task] if c not in found and (package, task, c) not in rosetta.EXCEPTIONS
    ]
    assert not missing, f"{path.relative_to(ROOT)} marks no {missing} (docs/style.md: the Rosetta markers)"
    for concept, snippets in found.items():
        assert all(text.strip() for _, _, text in snippets), (concept, path)


@pytest.mark.unit
def test_every_marker_in_the_runners_names_a_concept_of_its_file():
    """A task module may name only its task's concepts; a shared file (`__init__.py`, keras.R, common.jl) any."""
    files = [p for p in (ROOT / "runners").rglob("*") if p.suffix in rosetta.SOURCES]
    assert len(files) > 40
    for path in files:
        rosetta.markers(path, rosetta.TASK_CONCEPTS.get(path.stem))  # raises with the file and line
    assert not set().union(*rosetta.TASK_CONCEPTS.values()) - set(rosetta.CONCEPTS)
    assert all((t in rosetta.TASK_CONCEPTS) for t in site.TASKS)


@pytest.mark.unit
def test_a_marker_naming_no_concept_fails_with_its_file_and_line(tmp_path):
    lines = (ROOT / "runners" / "pytorch" / "cnn.py").read_text().splitlines()
    lines.insert(3, "# rosetta: optimiser")
    (tmp_path / "cnn.py").write_text("\n".join(lines))
    with pytest.raises(rosetta.MarkerError, match=r"cnn.py:4: `# rosetta: optimiser` names no concept"):
        rosetta.concepts_of("cnn", tmp_path / "cnn.py")
    lines[3] = "    #rosetta: data-parallel"  # a concept, but not the cnn's
    (tmp_path / "cnn.py").write_text("\n".join(lines))
    with pytest.raises(rosetta.MarkerError, match=r"cnn.py:4: .*data-parallel"):
        rosetta.concepts_of("cnn", tmp_path / "cnn.py")


@pytest.mark.unit
def test_a_cell_ends_at_a_blank_line_a_dedent_the_next_marker_or_end(tmp_path):
    (tmp_path / "cnn.R").write_text("""# rosetta: model
model <- function(x) {
  # rosetta: loss
  loss <- f(x)
  g(loss)
  # rosetta: end
  h(x)
}

# rosetta: device
device <- 1
# rosetta: init
w <- 2
x <- 3
""")
    assert rosetta.cells(tmp_path / "cnn.R") == {
        "model": [(2, "model <- function(x) {\n  loss <- f(x)\n  g(loss)\n  h(x)\n}")],  # nested: goes on
        "loss": [(4, "loss <- f(x)\ng(loss)")],
        "device": [(11, "device <- 1")],
        "init": [(13, "w <- 2\nx <- 3")],
    }
    (tmp_path / "gru.py").write_text("# rosetta: model\n\nx = 1\n")
    with pytest.raises(rosetta.MarkerError, match=r"gru.py:1: .* marks no lines"):
        rosetta.cells(tmp_path / "gru.py")


@pytest.fixture(scope="session")  # once: xdist interleaves modules, which would rebuild a module's
def run_folders(tmp_path_factory, synthetic_data):
    """A run folder of the fake runners (records and logs), and a copy of it whose records claim another machine."""
    root = tmp_path_factory.mktemp("runs")
    data = synthetic_data.parent  # the session's twins (tests/conftest.py), not a second set
    first = root / "demo-20261204-100000"
    subprocess.run(
        [sys.executable, str(ROOT / "tests" / "fake_run.py"), str(first), str(data)], check=True, timeout=300
    )
    from dataclasses import replace

    from scripts.plan import planfile as plans
    from scripts.plan.matrix import load

    plan_file = plans.make(load(), "demo", first.name)  # the plan fake_run ran: PyTorch's demo cells
    cells = tuple(c for c in plan_file.cells if c.cell.framework == "pytorch")
    plans.write(
        first / "plan.json",
        replace(plan_file, cells=cells, plan=replace(plan_file.plan, cells=tuple(c.cell for c in cells))),
    )
    second = root / "demo-20261204-110000"
    shutil.copytree(first, second)
    for path in (second / "cells").glob("*.json"):
        record = json.loads(path.read_text())
        record["system"].update(
            cpu="Other CPU", cpu_flags=["avx2"], cpu_usable=8, cpu_family=None, machine_class="cpu:other-cpu:avx2:8c"
        )
        path.write_text(json.dumps(record))
    return first, second


@pytest.fixture(scope="session")  # once: xdist interleaves modules, which would rebuild a module's
def built(run_folders, tmp_path_factory):
    out = tmp_path_factory.mktemp("site") / "site"
    return out, site.build(out, run_folders)


@pytest.mark.unit
def test_the_site_builds_every_page_and_links_only_inside_itself(built):
    out, summary = built
    assert all((out / name).is_file() for name in PAGES) and summary["plots"] >= 1
    outside = []
    for path in out.rglob("*.html"):
        text = path.read_text()
        for tag, link in re.findall(r'<(\w+)[^>]*?(?:src|href)="([^"#]+)', text):
            if tag == "a" and link.startswith("https://github.com/"):
                outside.append(link)  # a link a reader may follow, never a request the page makes itself
                continue
            assert not re.match(r"[a-z]+:|//", link), f"{path.name} links outside the site: {link}"
            assert (path.parent / link).exists(), f"{path.name} links to {link}, which is not in the site"
    assert set(outside) == {site.ORIGINAL}  # and the repository's, where GitHub Actions builds it
    for path in [*out.rglob("*.css"), *out.rglob("*.js")]:
        assert not re.search(r"url\(|@import|https?://", path.read_text()), path
    for path in out.rglob("*.svg"):  # namespace names (http://www.w3.org/2000/svg …) are names, not requests
        assert not re.search(r"""href=["'](?!#)|url\((?!#)""", path.read_text()), path


@pytest.mark.unit
def test_the_rosetta_pages_show_every_concept_linked_to_its_line(built):
    """Rows the task's concepts with their descriptions, a cell per runner, each snippet linked to its source page at
    the marked line (an anchor that exists there, on the line after the marker)."""
    out, _ = built
    for task in site.TASKS:
        text = (out / f"rosetta-{task}.html").read_text()
        rows = re.findall(r'<tr id="concept-([\w-]+)">', text)
        assert rows == list(rosetta.TASK_CONCEPTS[task])
        links = re.findall(r'href="(src/[^"#]+)#(L-\d+)"', text)
        assert len(links) >= len(rows) * len(site.runner_files()[task])
        for page, anchor in set(links):
            assert f'id="{anchor}"' in (out / page).read_text(), (task, page, anchor)
            source = (ROOT / page[len("src/") : -len(".html")]).read_text().splitlines()
            line = int(anchor[2:])
            assert rosetta.MARKER.match(source[line - 2]) and source[line - 1].strip(), (page, line)
    index = (out / "index.html").read_text()
    assert all(f'href="rosetta-{t}.html"' in index for t in site.TASKS)


@pytest.mark.unit
def test_results_of_two_machine_classes_are_two_columns_with_their_records(built, run_folders):
    out, _ = built
    text = (out / "results-cnn.html").read_text()
    (group,) = re.findall(r'<section class="group"[^>]*data-scale="demo">(.*?)</section>', text, re.S)
    assert "cpu:other-cpu:avx2:8c · run/demo-20261204-110000" in group
    head = re.search(r"<thead>(.*?)</thead>", group, re.S).group(1)
    assert head.count("data-col=") >= 2 + 1  # each run's column, besides the committed CPU reference
    record = re.search(r'href="(records/run/demo-20261204-110000/[^"]+\.json)"', group).group(1)
    assert json.loads((out / record).read_text())["system"]["machine_class"] == "cpu:other-cpu:avx2:8c"
    assert re.search(r'href="logs/run/demo-20261204-100000/[^"]+\.log"', group)


@pytest.mark.unit
def test_accepted_submissions_are_a_source_and_rejected_ones_are_not(synthetic_data, tmp_path, monkeypatch):
    """A submission is a whole profile (the checker re-derives the plan): the smoke profile, run by the fake runners."""
    from scripts.launch.executors import LocalExecutor, RunSettings
    from scripts.plan import planfile as plans
    from scripts.plan.matrix import load
    from scripts.results import submission
    from scripts.run import execute

    if submission.checkout_code_hash() != submission.committed_code_hash("HEAD"):
        pytest.skip("runners/ or shared/ differ from HEAD: a submission is made from committed runner code")
    plan_file = plans.make(load(), "smoke", "smoke-20261204-100000")
    run_dir = tmp_path / plan_file.run_id
    plans.write(run_dir / "plan.json", plan_file)
    execute(
        plan_file.plan,
        LocalExecutor({"pytorch": sys.executable}, root=ROOT / "tests" / "fake"),
        run_dir,
        RunSettings(plan_file.run_id, 1, 60.0, synthetic_data.parent),
    )
    community = tmp_path / "community"
    submission.submit(run_dir, "someone-cpu", community=community)
    tampered = Path(shutil.copytree(community / "someone-cpu", community / "tampered"))
    record = next((tampered / "cells").glob("*.json"))
    record.write_text(record.read_text().replace('"ok"', '"okay"', 1))
    monkeypatch.setattr(site, "COMMUNITY", community)
    out = tmp_path / "site"
    site.build(out)
    assert "someone-cpu" in (out / "index.html").read_text() and "tampered" not in (out / "index.html").read_text()
    results = (out / "results-cnn.html").read_text()
    assert "community/someone-cpu" in results
    # docs/site.md: unsigned submissions are marked, with the commit their runners are from
    head = submission.summary(community / "someone-cpu")["git_commit"][:10]
    assert f"community/someone-cpu (unsigned · runners of commit {head})" in results
    assert "(unsigned · runners of commit" in (out / "index.html").read_text()


@pytest.mark.unit
def test_the_committed_community_example_says_its_runners_are_not_todays(built):
    """It was made at an older commit whose Keras ResNet-50 runners differ (81.8 against 45.1 s per 1,000 images on
    one machine class): its columns name the commit and how many runner files changed since."""
    out, _ = built
    text = (out / "results-resnet50.html").read_text()
    assert re.search(
        r"community/example-[\w-]+ \(unsigned · runners of commit [0-9a-f]{10} · \d+ runner files "
        r"changed since\)",
        text,
    )


@pytest.mark.unit
def test_a_reference_made_before_todays_calibration_is_marked_in_its_column_heads(built):
    """The H200 reference calibrated with 1024² GEMMs and tf32 as float32: its columns say so; the CPU one's do not."""
    out, _ = built
    text = (out / "results-cnn.html").read_text()
    assert "reference/gpu-nvidia-h200-140g-x1 (calibrated before today: 1024² GEMMs, now 8192²" in text
    assert "reference/cpu-amd-epyc-f25-m17-s1-avx512-bf16-2c (" not in text


@pytest.mark.unit
def test_make_site_refuses_a_folder_that_is_not_a_run(tmp_path, capsys):
    assert site.main([str(tmp_path), "--out", str(tmp_path / "site")]) == 2
    assert "not run folders" in capsys.readouterr().err


# ---------------------------------------------------------------- a real browser


@pytest.fixture(scope="module")
def browser():
    if not (shutil.which("chromium") and shutil.which("chromedriver")):
        message = "Debian's chromium and chromium-driver are not installed (make test installs them as root)"
        pytest.fail(message) if IN_CI else pytest.skip(message)
    webdriver = pytest.importorskip("selenium.webdriver")
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1400,900"):
        options.add_argument(argument)
    options.binary_location = shutil.which("chromium")
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(options=options, service=Service(shutil.which("chromedriver")))
    yield driver
    driver.quit()


def visible_columns(browser):
    """The systems whose cells show, by the first row's cells (a phone hides the header row: the rows stack)."""
    return [
        td.get_attribute("class")[2:]
        for td in browser.find_elements("css selector", "table.code tbody tr:first-child td")
        if td.get_attribute("class").startswith("c-") and td.is_displayed()
    ]


def open_page(browser, out, name, shots):
    browser.get((out / name).as_uri())
    browser.save_screenshot(str(shots / f"{name}.png"))


def only_local_requests(browser):
    names = browser.execute_script(
        "return performance.getEntriesByType('navigation').concat("
        "performance.getEntriesByType('resource')).map(function (e) { return e.name; })"
    )
    assert names, "the page reported no request at all: the check would prove nothing"
    return [n for n in names if not n.startswith("file://")]


@pytest.mark.integration
def test_in_a_browser_the_choosers_pick_columns_and_nothing_leaves_file(built, browser, tmp_path):
    out, _ = built
    for name in PAGES:
        open_page(browser, out, name, tmp_path)
        assert browser.get_log("browser") == [], name
        assert only_local_requests(browser) == [], name
    open_page(browser, out, "code-cnn.html", tmp_path)
    assert visible_columns(browser) == ["pytorch", "tensorflow"]
    rows = [th.text for th in browser.find_elements("css selector", "table.code tbody th.section")]
    assert rows[:6] == list(site.SECTIONS)
    for package in ("cntk", "jax", "r_keras"):
        browser.find_element("css selector", f'label[for="pick-{package}"]').click()
    assert visible_columns(browser) == ["tensorflow", "jax", "cntk", "r_keras"]  # at most four: the oldest pick goes
    browser.save_screenshot(str(tmp_path / "code-cnn-four.png"))
    assert browser.get_log("browser") == []


@pytest.mark.integration
def test_in_a_browser_the_filters_hide_columns_and_groups(built, browser, tmp_path):
    out, _ = built
    open_page(browser, out, "results-resnet50.html", tmp_path)
    from selenium.webdriver.support.ui import Select

    columns = lambda: [th for th in browser.find_elements("css selector", "th[data-col]") if th.is_displayed()]
    everything = len(columns())
    assert everything >= 2
    Select(browser.find_element("css selector", 'select[name="source"]')).select_by_visible_text(
        "run/demo-20261204-110000"
    )
    shown = columns()
    assert 0 < len(shown) < everything and {th.get_attribute("data-source") for th in shown} == {
        "run/demo-20261204-110000"
    }
    groups = [g for g in browser.find_elements("css selector", "section.group") if g.is_displayed()]
    assert [g.get_attribute("data-scale") for g in groups] == ["demo"]  # the full-scale GPU group has no such column
    Select(browser.find_element("css selector", 'select[name="source"]')).select_by_visible_text("all")
    assert len(columns()) == everything
    browser.save_screenshot(str(tmp_path / "results-filtered.png"))
    assert browser.get_log("browser") == []


@pytest.mark.unit
def test_the_first_page_says_what_this_is_and_what_was_found(built):
    """A headline per task and reference (fastest, slowest, the factor), the systems, the date and commit, the
    original project, and the words the pages use."""
    out, _ = built
    text = (out / "index.html").read_text()
    assert re.search(r"fastest <b>[\w-]+</b> \([\d.]+ s\), slowest <b>[\w-]+</b> \([\d.]+ s\): ×[\d.]+ between", text)
    assert all(f"<code>{fid}</code>" in text for fid in site.FRAMEWORKS)
    assert site.ORIGINAL in text and re.search(r"at commit <code>[0-9a-f]{7,}</code>", text)
    for term in ("machine class", "reference", "verify", "steady state", "efficiency"):
        assert f"<dt>{term}" in text, term


@pytest.mark.unit
def test_filters_are_hidden_until_javascript_shows_them_and_versions_have_one_spelling(built):
    out, _ = built
    text = (out / "results-resnet50.html").read_text()
    assert '<form class="filters" hidden' in text and "form.hidden = false" in (out / "site.js").read_text()
    assert "CUDA —" not in text and "lower is better" in text and "(×1.00)" in text
    assert report.version_text(13000, "cuda") == "13.0" and report.version_text("13.0", "cuda") == "13.0"
    assert report.version_text(91900, "cudnn") == "9.19.0" and report.version_text(8902, "cudnn") == "8.9.2"


# What a page's layout does in the window, measured by the browser: every figure the assertions below read.
LAYOUT = """
function zero(el) {  // the width of "0" in the element's own font: CSS's 1ch
  var context = document.createElement('canvas').getContext('2d');
  context.font = getComputedStyle(el).font;
  return context.measureText('0').width;
}
function scrolls(el) {  // a box that scrolls sideways itself (its overflow is its own, not the page's)
  for (var a = el.parentElement; a && a !== document.body; a = a.parentElement) {
    var x = getComputedStyle(a).overflowX;
    if ((x === 'auto' || x === 'scroll' || x === 'hidden') && a.getBoundingClientRect().right <= innerWidth + 1)
      return true;
  }
  return false;
}
var view = document.documentElement.clientWidth, wider = [], narrow = [], broken = [], nav = [];
document.querySelectorAll('body *').forEach(function (el) {
  var r = el.getBoundingClientRect();
  if (r.width && r.right > view + 1 && !scrolls(el)) wider.push([el.tagName + '.' + el.className, r.right]);
});
document.querySelectorAll('th, td').forEach(function (cell) {
  var r = cell.getBoundingClientRect();
  if (!cell.checkVisibility() || !r.width) return;
  var chars = r.width / zero(cell);
  if (chars < 12) narrow.push([cell.textContent.trim().slice(0, 30), Math.round(chars * 10) / 10]);
});
document.querySelectorAll('th, .name').forEach(function (el) {  // names: a word on two lines is broken mid-name
  if (!el.checkVisibility()) return;
  var walker = document.createTreeWalker(el, NodeFilter.SHOW_TEXT), node;
  while ((node = walker.nextNode())) {
    var re = /[^\\s\\/·,-]{2,}/g, m;
    while ((m = re.exec(node.data))) {
      var range = document.createRange();
      range.setStart(node, m.index); range.setEnd(node, m.index + m[0].length);
      var tops = new Set(Array.from(range.getClientRects()).map(function (q) { return Math.round(q.top); }));
      if (tops.size > 1) broken.push(m[0]);
    }
  }
});
document.querySelectorAll('header a').forEach(function (a) {
  var r = a.getBoundingClientRect();
  var hit = document.elementFromPoint(r.left + r.width / 2, r.top + r.height / 2);
  nav.push({href: a.getAttribute('href'), inside: r.width > 0 && r.left >= 0 && r.right <= view && r.top >= 0 &&
            r.bottom <= innerHeight, clickable: !!hit && (hit === a || a.contains(hit))});
});
return {scroll: document.documentElement.scrollWidth, view: view, height: document.documentElement.scrollHeight,
        wider: wider.slice(0, 5), narrow: narrow, broken: broken, nav: nav,
        labels: Array.from(document.querySelectorAll('table.code td .label')).filter(
          function (l) { return l.checkVisibility(); }).length};
"""
LAYOUT_PAGES = (
    "rosetta-cnn.html",
    "code-cnn.html",
    "results-cnn.html",
    "index.html",
    "rosetta-densenet121.html",
    "results-resnet50.html",
)


def layout(browser):
    """The LAYOUT figures of the open page; asserts what every page owes every window."""
    found = browser.execute_script(LAYOUT)
    name = browser.current_url.rsplit("/", 1)[1]
    assert found["scroll"] <= found["view"], f"{name} is {found['scroll'] - found['view']} px wider than the window"
    assert found["wider"] == [], f"{name}: elements past the window's right edge, not in a box that scrolls"
    assert found["narrow"] == [], f"{name}: cells narrower than 12 characters (text, width in '0's)"
    assert found["broken"] == [], f"{name}: names broken mid-word"
    pages = {n["href"] for n in found["nav"]}
    assert pages >= {p for p in PAGES}, f"{name}: the navigation lacks {set(PAGES) - pages}"
    hidden = [n["href"] for n in found["nav"] if not (n["inside"] and n["clickable"])]
    assert hidden == [], f"{name}: navigation links outside the window, clipped or covered"
    return found


@pytest.mark.integration
@pytest.mark.parametrize("width, height", [(1440, 900), (390, 844)])
def test_in_a_browser_pages_fit_the_window(built, browser, width, height, tmp_path):
    """At a desktop's 1440×900 and a phone's 390×844: no page wider than the window (a wide results table scrolls in
    its own box), no table cell narrower than 12 characters, no name broken mid-word, every page's navigation link
    in view and clickable (the groups wrap), the Rosetta CNN page a few screens tall. On the phone the side-by-side
    rows stack, each cell labelled with its system; on the desktop they are columns, also with four picked."""
    from scripts.results.screenshots import set_viewport

    out, _ = built
    set_viewport(browser, width, height)
    phone = width < 800
    try:
        for name in LAYOUT_PAGES:
            browser.get((out / name).as_uri())
            browser.save_screenshot(str(tmp_path / f"{width}-{name}.png"))
            found = layout(browser)
            if name.startswith(("rosetta-", "code-")):
                cells = len(browser.find_elements("css selector", "table.code tbody tr")) * 2  # two systems picked
                assert found["labels"] == (cells if phone else 0), (name, found["labels"])
            if name == "rosetta-cnn.html":  # 9,976 px at 390 before the rows stacked
                assert found["height"] <= (6 if phone else 4) * height, found["height"]
        browser.get((out / "code-cnn.html").as_uri())
        for package in ("jax", "cntk"):
            browser.find_element("css selector", f'label[for="pick-{package}"]').click()
        assert len(visible_columns(browser)) == 4
        layout(browser)
        browser.get((out / "rosetta-gru.html").as_uri())
        assert visible_columns(browser) == ["pytorch", "tensorflow"]  # two columns at first, as the code page
        for package in ("jax", "r_mxnet"):
            browser.find_element("css selector", f'label[for="pick-{package}"]').click()
        assert len(visible_columns(browser)) == 4
        layout(browser)
        browser.get((out / "results-cnn.html").as_uri())
        assert browser.find_element("css selector", "form.filters").is_displayed()
        layout(browser)  # the filters shown
        browser.find_element("css selector", 'header a[href="lessons.html"]').click()  # the last link, clicked
        assert browser.current_url.endswith("/lessons.html")
        assert browser.find_element("css selector", 'header a[aria-current="page"]').text == "lessons"
    finally:
        browser.set_window_size(1400, 900)
