"""The review prints relative changes as percentages and compares only measurements of the same kind.

On the archived 70B runs: the run of 2026-11-29 has grid points only, which decide nothing (rendered again on
2026-12-05 it has no representative; its schema-1 summary had a grid point at concurrency 10), the run of
2026-12-03 has an SLA capacity. Nothing is compared as a change.
"""

from __future__ import annotations

import copy
from pathlib import Path

from helpers.core.config import load_config
from helpers.report.tables import for_people, table_html
from helpers.review.compare import changes_for_people, review
from helpers.run.summary import read_summary

REPORTS = Path(__file__).resolve().parents[2] / "reports"
OLD, NEW = REPORTS / "h200-20261129-chat-70b-fp8", REPORTS / "h200-20261203-chat-70b-fp8"


def _review(before, now):
    return review(now, [before, now], load_config(NEW / "config.yaml"))


def test_a_grid_point_and_capacity_trials_are_not_compared_as_a_change():
    res = _review(read_summary(OLD / "summary.json"), read_summary(NEW / "summary.json"))
    ch = res.changes().set_index("label")
    assert ch.loc["vLLM 0.26.0", "measured as before"] == "nothing"
    assert ch.loc["vLLM 0.26.0", "measured as now"] == "the SLA capacity"
    assert ch["output throughput change"].isna().all() and ch["$/M output tokens change"].isna().all()
    assert ch.loc["vLLM 0.26.0", "compared"] == "not comparable: nothing before, the SLA capacity now"
    assert not any("Regression" in f for f in res.flags)
    assert any("vLLM 0.26.0: not compared (nothing before, the SLA capacity now)" in n for n in res.notes)


def test_changes_are_percentages_never_dollars():
    now = read_summary(NEW / "summary.json")
    before = copy.deepcopy(now)
    before.run_id, before.created_utc = "earlier", "2026-12-01T00:00:00+00:00"
    for e in before.engines:  # the same kind of measurement, 4x dearer per token
        if e.usd_per_mtok_output:
            e.usd_per_mtok_output *= 4
    res = _review(before, now)
    shown = changes_for_people(res.changes())
    cost = shown.set_index("label")["$/M output tokens change"]
    for label in ("SGLang 0.5.16", "vLLM 0.26.0"):  # each capacity has its interval: the change carries one
        assert cost[label].startswith("-75.0% (95%: -") and cost[label].endswith("%)"), cost[label]
    html = table_html(for_people(shown))
    assert "-75.0%" in html and "$-" not in html and "$-0.75" not in html
    assert any("$/M output tokens" in f for f in res.flags) is False  # cheaper is no regression


def test_a_run_on_another_gpu_is_history_not_the_run_compared():
    """The 70B run on one H100 (2026-12-06) was reviewed against the 70B run on one H200 (2026-12-03): "vLLM
    output throughput −89%", "Decision flipped". Another GPU is not a regression: it is compared with nothing."""
    h100 = read_summary(REPORTS / "h100-20261206-chat-70b-fp8" / "summary.json")
    h200 = read_summary(NEW / "summary.json")
    res = review(h100, [h200, h100], load_config(NEW / "config.yaml"))
    assert res.previous is None and res.flags == [] and [r.run_id for r in res.history] == [h200.run_id]
    (note,) = res.notes
    assert "on this hardware (1× H100-SXM5-80GB)" in note and "ran on 1× H200-SXM-141GB" in note
    # the same hardware is compared: a copy of the H100 run made earlier is its previous run
    before = copy.deepcopy(h100)
    before.run_id, before.created_utc = "h100-earlier", "2026-12-05T00:00:00+00:00"
    res = review(h100, [h200, before, h100], load_config(NEW / "config.yaml"))
    assert res.previous is not None and res.previous.run_id == "h100-earlier"
    assert [r.run_id for r in res.history] == [h200.run_id, "h100-earlier"]
    assert not any("Decision flipped" in f for f in res.flags)
