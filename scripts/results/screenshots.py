"""`make screenshots`: the site's first screen at a desktop's and a phone's width, for docs/site.md and the README.

    python -m scripts.results.screenshots               # builds the site from the references in a temporary folder
    python -m scripts.results.screenshots --site site --out docs/images

Writes PAGE-WIDTH.png for the Rosetta, code and results pages of the CNN at 1440×900 and 390×844 (the viewport, not
the whole page), and code-side-by-side.png, the README's picture: PyTorch beside CNTK on code-cnn.html at the Model
section. Each is quantised to a palette and optimised by Pillow (about 50–150 KB). Needs Debian's chromium and
chromedriver and Selenium, as tests/test_site.py does.
"""

import argparse
import io
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

from scripts.paths import ROOT

SIZES = ((1440, 900), (390, 844))
PAGES = ("rosetta-cnn.html", "code-cnn.html", "results-cnn.html")
HERO = "code-side-by-side.png"
COLOURS = 256


def driver() -> Any:
    """A headless Debian chromium through Selenium; a RuntimeError that says what is missing."""
    chromium, chromedriver = shutil.which("chromium"), shutil.which("chromedriver")
    if not (chromium and chromedriver):
        raise RuntimeError("Debian's chromium and chromium-driver are not installed (apt-get install chromium-driver)")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--hide-scrollbars"):
        options.add_argument(argument)
    options.binary_location = chromium
    return webdriver.Chrome(options=options, service=Service(chromedriver))


def set_viewport(browser: Any, width: int, height: int) -> None:
    """Size the window so that the page's viewport (window.innerWidth × innerHeight) is width × height exactly."""
    browser.set_window_size(width, height)
    inner = browser.execute_script("return [window.innerWidth, window.innerHeight]")
    browser.set_window_size(2 * width - inner[0], 2 * height - inner[1])


def small_png(png: bytes, path: Path) -> int:
    """The screenshot as a palette PNG (COLOURS colours: text stays sharp), optimised; returns its size in bytes."""
    from PIL import Image

    image = Image.open(io.BytesIO(png)).convert("RGB")
    image.quantize(colors=COLOURS, method=Image.Quantize.MEDIANCUT, dither=Image.Dither.NONE).save(path, optimize=True)
    return path.stat().st_size


def capture(site: Path, out: Path) -> dict[str, int]:
    """{file name: bytes} of the screenshots written to `out` from the built site in `site`."""
    out.mkdir(parents=True, exist_ok=True)
    written = {}
    browser = driver()
    try:
        for width, height in SIZES:
            set_viewport(browser, width, height)
            for name in PAGES:
                browser.get((site / name).as_uri())
                shot = f"{name.removesuffix('.html')}-{width}.png"
                written[shot] = small_png(browser.get_screenshot_as_png(), out / shot)
        set_viewport(browser, 1440, 900)
        browser.get((site / "code-cnn.html").as_uri())
        for package in ("tensorflow", "cntk"):  # pytorch and tensorflow are ticked at first
            browser.find_element("css selector", f'label[for="pick-{package}"]').click()
        browser.execute_script(  # the Model row, under the sticky header of system names
            "var row = document.getElementById('section-model').getBoundingClientRect().top;"
            "var head = document.querySelector('table.code thead').offsetHeight;"
            "window.scrollTo(0, row + window.scrollY - head);"
        )
        written[HERO] = small_png(browser.get_screenshot_as_png(), out / HERO)
    finally:
        browser.quit()
    return written


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m scripts.results.screenshots", description=__doc__.split("\n")[0])
    ap.add_argument("--site", type=Path, help="a built site to capture (default: build one from the references)")
    ap.add_argument(
        "--out", type=Path, default=ROOT / "docs" / "images", help="where the PNGs go (default: docs/images)"
    )
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        site = args.site
        if site is None:
            from scripts.results import site as builder

            site = Path(tmp) / "site"
            builder.build(site)
        try:
            written = capture(site, args.out)
        except RuntimeError as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
    for name, size in written.items():
        print(f"{args.out / name}: {size / 1024:.0f} KiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
