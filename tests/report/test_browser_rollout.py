"""The 70B and multi-turn reports in headless Chromium: step 8, ``canary.md``, the rules and the ScaledObject agree.

Each archived run is copied, its steps 7-10 notebooks (05_decision, 06_rollout) are executed again with
papermill against the copy (nothing is launched), ``summary.json`` and the report are written, and the page
is read as a person sees it: the traffic schedule in step 8 and in step 10's table, every rollback criterion
shown in step 10 and the ``rollback="true"`` rule it names in ``alerts.rules.yaml``, the autoscaling bounds
shown against ``autoscaling.yaml``, step 7's departures from the seed, and the first page's borderline flag.
Screenshots go to ``test-artifacts/browser/`` (git-ignored). Skipped where Chromium is not installed.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
import yaml
from headless import Browser, find_chromium

from helpers.core.config import load_config
from helpers.core.paths import PLAYBOOK_DIR
from helpers.report.html import render_report
from helpers.report.run_summary import write_summary

REPO = Path(__file__).resolve().parents[2]
ARTIFACTS = REPO / "test-artifacts" / "browser"
# multiturn-8b, rendered again on 2026-12-05, has no measured configuration (single grid samples decide
# nothing): the tree's choice is rolled out, with no backup to migrate to
RUNS = ["h200-20261203-chat-70b-fp8", "h200-20261201-multiturn-8b", "h200-20261201-chat-8b-poisson"]
RERUN = ("05_decision.ipynb", "06_rollout.ipynb")
CHROMIUM = find_chromium()
pytestmark = pytest.mark.skipif(
    CHROMIUM is None, reason="no headless Chromium (apt-get install -y chromium; `make tools` does it)"
)
SCHEDULE = re.compile(r"(\d+)% \((?:smoke test, )?([^)]*)\)")

SECTION_JS = """
((id) => {
  const heads = [...document.querySelectorAll('h2[id^="step-"]')];
  const i = heads.findIndex(h => h.id === id);
  const r = document.createRange();
  r.setStartAfter(heads[i]);
  if (i + 1 < heads.length) r.setEndBefore(heads[i + 1]); else r.setEndAfter(document.body.lastChild);
  const f = r.cloneContents();
  return {
    text: f.textContent.replace(/\\s+/g, ' '),
    items: [...f.querySelectorAll('li')].map(li => li.textContent.replace(/\\s+/g, ' ').trim()),
    tables: [...f.querySelectorAll('table')].map(t => [...t.querySelectorAll('tr')].map(
      tr => [...tr.querySelectorAll('th, td')].map(c => c.textContent.trim()))),
  };
})
"""


@pytest.fixture(scope="module", params=RUNS)
def page(request, tmp_path_factory):
    """(run folder, browser with its report open): steps 7-10 executed again on a copy of the archived run."""
    papermill = pytest.importorskip("papermill")
    run = tmp_path_factory.mktemp("reports") / request.param
    skip = shutil.ignore_patterns("report.html", "rollout", "rollout*.json", "tables", "risk.json")
    shutil.copytree(REPO / "reports" / request.param, run, ignore=skip)
    for name in RERUN:
        papermill.execute_notebook(
            str(PLAYBOOK_DIR / name), str(run / "notebooks" / name),
            parameters={"config_path": str(run / "config.yaml"), "run_dir": str(run)},
            kernel_name="python3", cwd=str(PLAYBOOK_DIR), progress_bar=False,
        )  # fmt: skip
    write_summary(run, load_config(run / "config.yaml"))
    render_report(run)
    browser = Browser(CHROMIUM, tmp_path_factory.mktemp("chromium-profile"))
    browser.open((run / "report.html").as_uri())
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    browser.screenshot(ARTIFACTS / f"{request.param}-first-page.png")
    yield run, browser
    browser.close()


def _section(browser: Browser, n: int) -> dict:
    return browser.evaluate(f"{SECTION_JS}('step-{n}')")


def _table(section: dict, header: str) -> list[list[str]]:
    return next(t for t in section["tables"] if t and any(header in h for h in t[0]))


def test_step_8_and_step_10_show_one_traffic_schedule(page):
    _, browser = page
    assert browser.errors() == []
    text = _section(browser, 8)["text"]
    rows = _table(_section(browser, 10), "traffic to the new engine")[1:]
    assert len(rows) >= 3
    if "→ no backup" in text:  # no second configuration to migrate to: no traffic shifts in step 8
        assert "Shift traffic" not in text
        return
    step8 = text.split("Shift traffic")[1]
    shown = [(int(a), b.strip()) for a, b in SCHEDULE.findall(step8.split("watching")[0])]
    assert shown == [(int(r[1].rstrip("%")), r[2]) for r in rows]


def test_every_rollback_criterion_shown_names_a_rollback_rule_that_exists(page):
    run, browser = page
    rules = {r["alert"]: r for r in yaml.safe_load((run / "rollout" / "alerts.rules.yaml").read_text())["groups"][0]
             ["rules"]}  # fmt: skip
    items = [i for i in _section(browser, 10)["items"] if " — alert " in i or " — no alert rule" in i]
    assert len(items) >= 4
    named = {n for i in items for n in re.findall(r"\b(Engine\w+)\b", i.split(" — ")[-1])}
    assert named == {n for n, r in rules.items() if r["labels"]["rollback"] == "true"}
    assert any("failing" in i and "no alert rule" in i for i in items)  # the error share says where to watch it
    ttft = next(i for i in items if i.startswith("TTFT p95 above"))
    limit = float(re.search(r"above ([\d,]+) ms", ttft).group(1).replace(",", ""))
    assert rules["EngineTTFTP95High"]["expr"].endswith(f"> {limit:g}")


def test_autoscaling_shown_is_the_scaled_object(page):
    run, browser = page
    text = _section(browser, 10)["text"]
    so = yaml.safe_load((run / "rollout" / "autoscaling.yaml").read_text())["spec"]
    m = re.search(r"KEDA\): (\d+) to (\d+) replicas \(min (\d+): .*?; max (\d+):", text)
    assert m and {int(m.group(1)), int(m.group(3))} == {so["minReplicaCount"]}
    assert {int(m.group(2)), int(m.group(4))} == {so["maxReplicaCount"]}


def test_step_7_lists_its_departures_and_the_first_page_flags_the_borderline_input(page):
    _, browser = page
    departures = _table(_section(browser, 7), "the seed says")
    topics = {r[0] for r in departures[1:]}
    assert {"concurrency bands", "the concurrency the tree reads", "measured cost and SLA in the score",
            "heavy prefix reuse"} <= topics  # fmt: skip
    first = browser.evaluate("document.querySelector('h1').parentElement.textContent")
    assert "Borderline: cadence.updates_per_month is 1, on the threshold" in first
    assert "sglang ?" not in first
