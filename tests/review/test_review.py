"""Steps 11-12: quarterly review against archived runs, trends for the index, version currency."""

from __future__ import annotations

import math

import pytest
from matplotlib.figure import Figure

from helpers.core.config import parse_config
from helpers.review.compare import review, snapshot
from helpers.review.trend import trend_charts, trend_figure, trend_rows
from helpers.review.versions import currency_sentences as stale_lines
from helpers.review.versions import version_currency

PRICE = 5.01  # $/GPU-hour in the archived configs


def _engine(label, engine, version, tok_s, ttft, tp=1, concurrency=50):
    point = None
    if tok_s is not None:
        point = {"label": label, "engine": engine, "concurrency": concurrency, "phase": "tune",
                 "knobs": {"tensor_parallel": tp} if tp > 1 else {}, "output_tok_s": tok_s,
                 "ttft_ms_p95": ttft, "requests": 100, "errors": 0}  # fmt: skip
    return {"label": label, "engine": engine, "version": version, "status": "ok" if point else "failed",
            "tuned_knobs": None, "representative_point": point}  # fmt: skip


def priced_as_step_6(engines):
    """The cost section step 6 saved for ``engines``: a fleet row each, $/h × GPUs ÷ (tok/s × 3600) × 1e6."""
    fleet = []
    for e in engines:
        p = e["representative_point"]
        if p is not None:
            gpus = p["knobs"].get("tensor_parallel", 1)
            fleet.append({"label": e["label"], "usd_per_mtok_output": PRICE * gpus / (p["output_tok_s"] * 3600) * 1e6})
    return {"points": [], "fleet": fleet, "break_even": [], "demand": {}}


def summary(run_id, created, engines, primary, backup, workload="chat-prod", cost=None, family=None):
    """A hand-built summary.json of the shape helpers.run.summary writes (its cost section as step 6 saved it)."""
    cost = priced_as_step_6(engines) if cost is None else cost
    s = {
        "schema": 1,
        "run_id": run_id,
        "created_utc": created,
        "workload": workload,
        "recommendation": {"primary": primary, "backup": backup, "sentences": []},
        "engines": engines,
        "cost": cost,
        "decision": {"primary_family": family} if family else None,
        "config": {"name": workload, "cost": {"gpu": "H100-SXM5-80GB", "gpu_price_per_hour": PRICE},
                   "engines": [{"label": e["label"], "engine": e["engine"]} for e in engines]},
    }  # fmt: skip
    s["_dir"] = run_id
    return s


Q1 = summary(
    "2026-01-10-chat",
    "2026-01-10T09:00:00+00:00",
    [_engine("vllm-h100", "vllm", "0.26.0", 12500, 900, tp=2), _engine("sglang-h100", "sglang", "0.5.16", 16200, 800)],
    "sglang-h100",
    "vllm-h100",
    family="sglang",
)


def cfg(threshold=0.10, current=None):
    return parse_config(
        {
            "name": "chat-prod",
            "model": {"path": "tiny-llama"},
            "engines": [{"label": "x", "engine": "vllm", "launcher": {"python": "python3"}}],
            "review": {"regression_threshold": threshold, "current_versions": current or {}},
        }
    )


def test_run_without_history_says_so():
    r = review(Q1, [Q1], cfg())
    assert not r.has_history and r.previous is None
    assert r.flags == []
    assert "No earlier run of workload 'chat-prod'" in r.headline()[0]
    assert r.changes().empty


def test_other_workloads_and_later_runs_are_not_history():
    other = summary("2025-12-01-batch", "2025-12-01T00:00:00+00:00", Q1["engines"], "vllm-h100", None, workload="batch")
    later = {**Q1, "run_id": "2026-07-01-chat", "_dir": "2026-07-01-chat", "created_utc": "2026-07-01T00:00:00+00:00"}
    r = review(Q1, [other, Q1, later], cfg())
    assert not r.has_history


def test_two_runs_name_the_differences():
    q2 = summary(
        "2026-04-10-chat",
        "2026-04-10T09:00:00+00:00",
        [
            _engine("vllm-h100", "vllm", "0.27.1", 13000, 850, tp=2),
            _engine("sglang-h100", "sglang", "0.5.16", 16000, 780),
        ],
        "sglang-h100",
        "vllm-h100",
        family="sglang",
    )
    r = review(q2, [Q1, q2], cfg())
    assert r.has_history and r.previous.run_id == "2026-01-10-chat"
    assert r.flags == []  # +4% and -1.2% are within the 10% threshold
    assert "vllm-h100: vllm 0.26.0 → 0.27.1." in r.notes
    assert r.notes[0].startswith("No flipped decision and no regression beyond 10% since run 2026-01-10-chat")
    ch = r.changes().set_index("label")
    assert ch.loc["vllm-h100", "version before"] == "0.26.0" and ch.loc["vllm-h100", "version now"] == "0.27.1"
    assert ch.loc["vllm-h100", "output throughput before"] == 12500
    assert ch.loc["vllm-h100", "output throughput change"] == pytest.approx(0.04)
    assert ch.loc["sglang-h100", "TTFT p95 change"] == pytest.approx(-0.025)
    # $/Mtok computed from the point and the archived price (the cost section is None): $/h ÷ (tok/s × 3600) × 1e6
    assert ch.loc["sglang-h100", "$/M output tokens now"] == pytest.approx(PRICE / (16000 * 3600) * 1e6)
    assert ch.loc["vllm-h100", "$/M output tokens before"] == pytest.approx(2 * PRICE / (12500 * 3600) * 1e6)
    dt = r.decision_table().set_index("role")
    assert dt.loc["primary", "before"] == dt.loc["primary", "now"] == "sglang-h100"


def test_flipped_decision_is_flagged_and_changes_without_an_interval_are_not_judged():
    q2 = summary(
        "2026-04-10-chat",
        "2026-04-10T09:00:00+00:00",
        [
            _engine("vllm-h100", "vllm", "0.27.1", 13000, 850, tp=2),
            _engine("sglang-h100", "sglang", "0.5.17", 12000, 1500),
        ],
        "vllm-h100",
        "sglang-h100",
        family="vllm",
    )
    r = review(q2, [Q1, q2], cfg())
    flip = [f for f in r.flags if f.startswith("Decision flipped")]
    assert flip == ["Decision flipped since run 2026-01-10-chat (2026-01-10): primary was sglang-h100, now vllm-h100 "
                    "(sglang → vllm)."]  # fmt: skip
    # schema-1 grid points are single samples: no interval, so no change is ever flagged as a regression
    assert [f for f in r.flags if f.startswith("Regression")] == []
    since = "since run 2026-01-10-chat (2026-01-10)"
    assert (f"sglang-h100 output throughput 16,200 tok/s → 12,000 tok/s (-26%) {since}: no interval: not judged "
            "(neither run's figure has a 95% interval).") in r.notes  # fmt: skip
    assert any(n.startswith(f"sglang-h100 TTFT p95 800 ms → 1,500 ms (+88%) {since}: no interval") for n in r.notes)
    assert any(n.startswith("sglang-h100 $/M output tokens") and "not judged" in n for n in r.notes)
    assert not any(n.startswith("vllm-h100 output throughput") for n in r.notes)  # +4%: better, nothing to say
    ch = r.changes().set_index("label")
    assert ch.loc["sglang-h100", "output throughput verdict"] == "no interval: not judged"
    assert ch.loc["sglang-h100", "output throughput change"] == pytest.approx(12000 / 16200 - 1)
    assert ch.loc["sglang-h100", "output throughput change low"] is None
    assert "Backup changed since run 2026-01-10-chat (2026-01-10): vllm-h100 → sglang-h100." in r.notes
    # a looser threshold keeps the flip and has nothing to say about changes below it
    loose = review(q2, [Q1, q2], cfg(threshold=0.9))
    assert not any("not judged" in n for n in loose.notes)
    assert any(f.startswith("Decision flipped") for f in loose.flags)


def test_renamed_configuration_matches_by_engine_and_failed_one_is_handled():
    q2 = summary(
        "2026-04-10-chat",
        "2026-04-10T09:00:00+00:00",
        [
            _engine("vllm-h100-v2", "vllm", "0.27.1", 12600, 880, tp=2),
            _engine("sglang-h100", "sglang", "0.5.17", None, None),
        ],
        "vllm-h100-v2",
        None,
        family="vllm",
    )
    r = review(q2, [Q1, q2], cfg())
    ch = r.changes().set_index("label")
    assert ch.loc["vllm-h100-v2", "output throughput before"] == 12500  # matched to vllm-h100
    assert math.isnan(ch.loc["sglang-h100", "output throughput now"])  # failed now: no number, no crash
    assert not any("sglang-h100 output" in f for f in r.flags)


def test_cost_section_is_read_and_a_missing_price_is_not_recomputed():
    # the shape helpers.cost.view writes to cost.json: a row per point, and a fleet row per configuration
    points = [
        {"label": "sglang-h100", "phase": "tune", "concurrency": 10, "knobs": "", "usd_per_mtok_output": 9.9},
        {"label": "sglang-h100", "phase": "tune", "concurrency": 50, "knobs": "", "usd_per_mtok_output": 0.123},
    ]
    fleet = [{"label": "vllm-h100", "usd_per_mtok_output": 0.456}]
    s = snapshot({**Q1, "cost": {"points": points, "fleet": fleet, "break_even": [], "demand": {}}})
    by = {e.label: e for e in s.engines}
    assert by["sglang-h100"].usd_per_mtok == 0.123 and by["sglang-h100"].cost_source == "summary cost section"
    assert by["vllm-h100"].usd_per_mtok == 0.456
    # a run whose step 6 priced nothing: the review says so and never prices it itself from the archived config
    unpriced = {e.label: e for e in snapshot({**Q1, "cost": {"points": [], "fleet": []}}).engines}
    assert unpriced["vllm-h100"].usd_per_mtok is None and unpriced["vllm-h100"].output_tok_s == 12500
    assert unpriced["vllm-h100"].cost_source.startswith("not recorded")
    assert "usd_per_mtok" not in unpriced["vllm-h100"].figures


def test_trend_rows_figure_and_index_section():
    q2 = summary(
        "2026-04-10-chat",
        "2026-04-10T09:00:00+00:00",
        [_engine("vllm-h100", "vllm", "0.27.1", 13000, 850, tp=2)],
        "vllm-h100",
        None,
    )
    batch = [_engine("v", "vllm", "0.26.0", 900, 90)]
    other = summary("2026-02-01-batch", "2026-02-01T00:00:00+00:00", batch, "v", None, workload="batch")
    archive = [Q1, other, q2]
    rows = trend_rows(archive)
    assert len(rows) == 4
    chat = [r for r in rows if r["workload"] == "chat-prod" and r["label"] == "vllm-h100"]
    assert [r["output_tok_s"] for r in chat] == [12500, 13000]
    assert [r["is_primary"] for r in chat] == [False, True]
    fig = trend_figure(archive, "chat-prod")
    assert isinstance(fig, Figure) and len(fig.axes) == 2
    assert sorted(line.get_label() for line in fig.axes[0].get_lines()) == ["sglang-h100", "vllm-h100"]
    charts = trend_charts(archive)
    assert [(w, n) for w, n, _ in charts] == [("batch", 1), ("chat-prod", 2)]
    assert all(src.startswith("data:image/png;base64,") for _, _, src in charts)
    assert trend_charts([]) == []


def test_version_currency_marks_stale_results():
    c = cfg(current={"vllm": "0.27.1", "sglang": "0.5.16"})
    df = version_currency(Q1, c).set_index("label")
    assert df.loc["vllm-h100", "status"] == "stale" and df.loc["sglang-h100", "status"] == "current"
    lines = stale_lines(version_currency(Q1, c))
    assert lines == ["Stale: vllm-h100 was measured on vllm 0.26.0; current is 0.27.1."]
    unknown = version_currency(Q1, cfg())
    assert set(unknown["status"]) == {"unknown"}
    assert stale_lines(unknown) == ["No stale results: every measured engine version is current (2 without a "
                                    "listed current version)."]  # fmt: skip
    newer = version_currency(Q1, cfg(current={"vllm": "0.25.0", "sglang": "v0.5.16"})).set_index("label")
    assert newer.loc["vllm-h100", "status"] == "current" and "newer" in newer.loc["vllm-h100", "note"]
    assert newer.loc["sglang-h100", "status"] == "current"
