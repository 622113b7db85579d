"""The report as people see it: a re-rendered archived run and the reports index in headless Chromium.

An archived H200 run is copied, its step 9-12 notebooks (06_rollout, 07_review) are executed again
with papermill against the copy (the other steps keep their archived outputs; nothing is launched),
and the report is rendered. In Chromium: no console error, every step section (``#step-1`` …
``#step-12``) has output beyond its heading, no machine path anywhere in the page, nothing wider than
1,400 px, and each step heading once. Screenshots go to ``test-artifacts/browser/`` (git-ignored).
Skipped, with the reason, where Chromium is not installed (``make tools`` installs it).
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from headless import Browser, find_chromium

from helpers.core.paths import PLAYBOOK_DIR
from helpers.report.html import render_report
from helpers.report.index import write_index

REPO = Path(__file__).resolve().parents[2]
ARCHIVED = REPO / "reports" / "h200-20261129-chat-8b"
ARTIFACTS = REPO / "test-artifacts" / "browser"
RERUN = ("06_rollout.ipynb", "07_review.ipynb")
MACHINE_PATH = re.compile(r"(?<![\w.])(/work|/tmp|/home|/root)/")
MAX_WIDTH = 1400
CHROMIUM = find_chromium()
pytestmark = pytest.mark.skipif(
    CHROMIUM is None, reason="no headless Chromium (apt-get install -y chromium; `make tools` does it)"
)

SECTIONS_JS = """
(() => {
  const heads = [...document.querySelectorAll('h2[id^="step-"]')];
  return heads.map((h, i) => {
    const r = document.createRange();
    r.setStartAfter(h);
    if (i + 1 < heads.length) r.setEndBefore(heads[i + 1]); else r.setEndAfter(document.body.lastChild);
    const frag = r.cloneContents();
    const outputs = [...frag.querySelectorAll('.jp-OutputArea-output')];
    return {id: h.id, heading: h.textContent.trim(),
            text: outputs.map(o => o.textContent.trim()).join(' ').length,
            images: frag.querySelectorAll('img').length};
  });
})()
"""
HEADINGS_JS = """
[...document.querySelectorAll('h1, h2, h3, h4, h5, h6')].map(h => h.textContent.trim())
  .filter(t => /^Steps? [0-9]/.test(t))
"""
WIDTH_JS = """
(() => {
  const wide = [...document.querySelectorAll('table, pre, img, .pb-table, .jp-Cell')]
    .map(e => [e.tagName + '.' + e.className, Math.round(e.getBoundingClientRect().width)])
    .filter(([, w]) => w > MAX_WIDTH);
  return {scroll: document.documentElement.scrollWidth, wide: wide.slice(0, 5)};
})()
""".replace("MAX_WIDTH", str(MAX_WIDTH))


@pytest.fixture(scope="module")
def rendered(tmp_path_factory) -> Path:
    """A copy of the archived run with steps 9-12 executed again and the report rendered."""
    papermill = pytest.importorskip("papermill")
    reports = tmp_path_factory.mktemp("reports")
    run = reports / ARCHIVED.name
    shutil.copytree(ARCHIVED, run, ignore=shutil.ignore_patterns("report.html", "rollout", "rollout*.json", "tables"))
    for name in RERUN:
        papermill.execute_notebook(
            str(PLAYBOOK_DIR / name),
            str(run / "notebooks" / name),
            parameters={"config_path": str(run / "config.yaml"), "run_dir": str(run)},
            kernel_name="python3",
            cwd=str(PLAYBOOK_DIR),
            progress_bar=False,
        )
    render_report(run)
    write_index(reports)
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    shutil.copy2(run / "report.html", ARTIFACTS / "report.html")  # for a person to open after the test
    return run


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    b = Browser(CHROMIUM, tmp_path_factory.mktemp("chromium-profile"))
    yield b
    b.close()


def _shot(browser: Browser, name: str) -> Path:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    return browser.screenshot(ARTIFACTS / name)


def test_report_opens_clean_with_every_step_filled(rendered, browser):
    browser.open((rendered / "report.html").as_uri())
    shot = _shot(browser, "report.png")
    assert shot.stat().st_size > 10_000
    assert browser.errors() == []
    sections = browser.evaluate(SECTIONS_JS)
    assert [s["id"] for s in sections] == [f"step-{n}" for n in range(1, 13)]  # each step heading once
    empty = [s["heading"] for s in sections if s["text"] < 40 and not s["images"]]
    assert empty == [], f"step sections with no content beyond the heading: {empty}"
    html = browser.evaluate("document.documentElement.outerHTML")
    assert not MACHINE_PATH.findall(html), sorted(set(MACHINE_PATH.findall(html)))
    headings = browser.evaluate(HEADINGS_JS)
    assert len(headings) == 12, f"one heading per step, got: {headings}"


def test_report_is_no_wider_than_1400_px(rendered, browser):
    browser.open((rendered / "report.html").as_uri())
    width = browser.evaluate(WIDTH_JS)
    assert width["wide"] == [] and width["scroll"] <= 1600, width


@pytest.mark.parametrize("which", ["rendered", "archive"])
def test_index_opens_clean(rendered, browser, which):
    index = rendered.parent / "index.html" if which == "rendered" else REPO / "reports" / "index.html"
    browser.open(index.as_uri())
    _shot(browser, f"index-{which}.png")
    assert browser.errors() == []
    assert browser.evaluate("document.querySelectorAll('a[href*=\"report.html\"]').length") >= 1
    html = browser.evaluate("document.documentElement.outerHTML")
    assert not MACHINE_PATH.findall(html)


def test_rollout_validation_names_no_machine_path(rendered):
    checks = json.loads((rendered / "rollout_validation.json").read_text())["checks"]
    assert checks and all(not MACHINE_PATH.search(c["message"]) for c in checks.values())
