"""The review flags a regression only when the two runs' 95% intervals show it; otherwise "within noise".

Run summaries are built as records (``RunSummary`` with each configuration's ``Representative`` and its
``Figure``s), or read from the archived H200 runs. The rule (``helpers.review.significance``): a
regression is worse than the threshold and the 95% interval of the relative change excludes zero; the
interval combines the two figures' log half-widths in quadrature.
"""

from __future__ import annotations

import copy
import math
from pathlib import Path

import pytest

from helpers.core.config import load_config, parse_config
from helpers.review.compare import changes_for_people, review
from helpers.review.significance import change_interval, judge, noise_text
from helpers.review.snapshot import snapshot
from helpers.run.records import Figure, Representative
from helpers.run.summary import EngineSummary, Recommendation, RunSummary, read_summary

REPORTS = Path(__file__).resolve().parents[2] / "reports"
LABEL = "prefix-cache on"
SINCE = "since run before (2026-12-04)"
TOKENS = 250  # output tokens per request


def cfg(threshold: float = 0.10):
    return parse_config(
        {
            "name": "shared-prefix",
            "model": {"path": "tiny-llama"},
            "engines": [{"label": LABEL, "engine": "vllm-cpu", "launcher": {"python": "python3"}}],
            "review": {"regression_threshold": threshold},
        }
    )


def fig(mean: float, low: float | None = None, high: float | None = None, n: int = 1) -> Figure:
    return Figure(mean=mean, low=low, high=high, n=n)


def run(run_id: str, created: str, capacity: Figure, ttft: Figure, usd: float) -> RunSummary:
    """One run of one configuration at its SLA capacity: throughput = capacity (req/s) × tokens, same interval."""
    out = capacity.model_copy(update={k: v * TOKENS for k, v in capacity.model_dump().items() if k != "n" and v})
    rep = Representative(label=LABEL, engine="vllm-cpu", source="capacity", meets_sla=True, capacity=capacity,
                         request_rate=capacity, output_tok_s=out, ttft_ms_p95=ttft)  # fmt: skip
    engine = EngineSummary(label=LABEL, engine="vllm-cpu", version="0.26.0", status="ok", representative=rep,
                           usd_per_mtok_output=usd, cost_source="summary cost section")  # fmt: skip
    return RunSummary(run_id=run_id, created_utc=created, workload="shared-prefix", engines=[engine],
                      recommendation=Recommendation(primary=LABEL))  # fmt: skip


def pair(before_cap: Figure, now_cap: Figure, before_ttft: Figure, now_ttft: Figure, usd=(1.0, 1.0)):
    before = run("before", "2026-12-04T10:00:00+00:00", before_cap, before_ttft, usd[0])
    now = run("now", "2026-12-04T10:03:00+00:00", now_cap, now_ttft, usd[1])
    return before, now


def test_the_change_interval_combines_the_log_half_widths_in_quadrature():
    before, now = fig(30, 27, 33, n=9), fig(20, 18, 22, n=9)
    low, high = change_interval(before, now)
    w = math.hypot(math.log(33 / 27) / 2, math.log(22 / 18) / 2)
    assert low == pytest.approx(math.exp(math.log(20 / 30) - w) - 1)
    assert high == pytest.approx(math.exp(math.log(20 / 30) + w) - 1)
    assert -0.45 < low < high < -0.2
    # an interval that reaches zero (two trials, a t interval wider than its mean) excludes no ratio
    assert change_interval(before, fig(20, -5, 45, n=2)) == (-1.0, math.inf)
    assert noise_text(-1.0, math.inf) == "an interval reaches zero"
    # one sample, or no bounds: no interval to combine
    assert change_interval(before, fig(20)) is None
    assert change_interval(fig(30, 27, 33, n=1), now) is None


def test_a_68_percent_drop_with_wide_overlapping_intervals_is_within_noise_and_not_flagged():
    # the case: 52 → 17 tok/s between two runs of the same code; 17 ± 14 from three trials
    before, now = pair(
        fig(52 / TOKENS, 30 / TOKENS, 74 / TOKENS, n=3),
        fig(17 / TOKENS, 3 / TOKENS, 31 / TOKENS, n=3),
        fig(900, 700, 1100, n=3),
        fig(2200, 300, 4100, n=3),
        usd=(1.674, 5.12),
    )
    r = review(now, [before, now], cfg())
    assert r.flags == []
    assert (
        r.notes[0] == f"No flipped decision and no regression beyond 10% {SINCE} that the two runs' 95% intervals show."
    )
    ch = r.changes().set_index("label")
    low, high = ch.loc[LABEL, "output throughput change low"], ch.loc[LABEL, "output throughput change high"]
    assert ch.loc[LABEL, "output throughput change"] == pytest.approx(17 / 52 - 1)
    assert low < -0.68 and 0 < high  # the interval reaches across zero
    x = f"±{(high - low) / 2:.0%}"
    assert ch.loc[LABEL, "output throughput verdict"] == f"within noise ({x})"
    assert f"{LABEL} output throughput 52 tok/s → 17 tok/s (-67%) {SINCE}: within noise ({x}), not a regression." in (
        r.notes
    )
    # $/M output tokens carries the throughput's interval, inverted: the same noise on a ratio scale
    assert ch.loc[LABEL, "$/M output tokens verdict"].startswith("within noise (±")
    assert ch.loc[LABEL, "$/M output tokens change low"] == pytest.approx(1 / (1 + high) - 1, rel=1e-3)
    assert ch.loc[LABEL, "$/M output tokens change high"] == pytest.approx(1 / (1 + low) - 1, rel=1e-3)
    assert ch.loc[LABEL, "TTFT p95 verdict"].startswith("within noise (±")
    shown = changes_for_people(r.changes()).set_index("label")
    assert shown.loc[LABEL, "output throughput change"] == f"-67.3% (95%: {low:+.0%} to {high:+.0%})"
    assert "output throughput change low" not in shown.columns


def test_a_real_drop_is_flagged_with_its_interval():
    before, now = pair(
        fig(30, 28.5, 31.5, n=12),
        fig(20, 19, 21, n=12),
        fig(400, 380, 420, n=8),
        fig(410, 380, 440, n=8),
        usd=(0.20, 0.30),
    )
    r = review(now, [before, now], cfg())
    ch = r.changes().set_index("label")
    low, high = ch.loc[LABEL, "output throughput change low"], ch.loc[LABEL, "output throughput change high"]
    assert -0.40 < low < high < -0.25  # excludes zero, point estimate -33% beyond the 10% threshold
    assert r.flags[0] == (f"Regression: {LABEL} output throughput 7,500 tok/s → 5,000 tok/s (-33%, 95% interval "
                          f"{low:+.0%} to {high:+.0%}) {SINCE}, beyond the 10% threshold.")  # fmt: skip
    assert any(
        f.startswith(f"Regression: {LABEL} $/M output tokens $0.200 → $0.300 (+50%, 95% interval +") for f in r.flags
    )
    assert not any("TTFT" in f for f in r.flags)  # +2.5% within ±7%: noise
    assert ch.loc[LABEL, "output throughput verdict"] == f"regression (95% interval {low:+.0%} to {high:+.0%})"
    assert ch.loc[LABEL, "TTFT p95 verdict"].startswith("within noise")
    assert not any(n.startswith("No flipped decision") for n in r.notes)
    # the same significant drop under a 60% threshold: measured, worse, but not a regression
    loose = review(now, [before, now], cfg(threshold=0.60))
    assert loose.flags == []
    assert (
        loose.changes()
        .set_index("label")
        .loc[LABEL, "output throughput verdict"]
        .startswith("worse, within the 60% threshold (95% interval -")
    )
    # and the reverse: a significant gain is better, never a regression
    gain = review(before.model_copy(update={"run_id": "later", "created_utc": "2026-12-05T00:00:00+00:00"}),
                  [now, before], cfg())  # fmt: skip
    assert (
        gain.changes().set_index("label").loc[LABEL, "output throughput verdict"].startswith("better (95% interval +")
    )


def test_a_figure_without_an_interval_is_not_judged_archived_70b():
    # the archived 70B run, its output figures stripped of their intervals (as a run of single trials would have)
    now = read_summary(REPORTS / "h200-20261203-chat-70b-fp8" / "summary.json")
    for e in now.engines:
        e.representative.output_tok_s = e.representative.output_tok_s.model_copy(update={"low": None, "high": None})
    before = copy.deepcopy(now)
    before.run_id, before.created_utc = "earlier", "2026-12-01T00:00:00+00:00"
    for e in before.engines:  # the earlier run served 1.7x what this one does
        rep = e.representative
        rep.output_tok_s = rep.output_tok_s.model_copy(update={"mean": rep.output_tok_s.mean * 1.7})
    res = review(now, [before, now], load_config(REPORTS / "h200-20261203-chat-70b-fp8" / "config.yaml"))
    assert not any(f.startswith("Regression") for f in res.flags)
    ch = res.changes().set_index("label")
    for label in ("SGLang 0.5.16", "vLLM 0.26.0"):
        assert ch.loc[label, "output throughput verdict"] == "no interval: not judged"
        assert ch.loc[label, "output throughput change"] == pytest.approx(1 / 1.7 - 1)
    sg = next(e for e in now.engines if e.label == "SGLang 0.5.16").representative.output_tok_s.mean
    said = [n for n in res.notes if n.startswith("SGLang 0.5.16 output throughput")]
    assert said == [f"SGLang 0.5.16 output throughput {sg * 1.7:,.0f} tok/s → {sg:,.0f} tok/s (-41%) since run earlier "
                    "(2026-12-01): no interval: not judged (neither run's figure has a 95% interval)."]  # fmt: skip
    assert res.notes[0].startswith("No flipped decision and no regression beyond 10% since run earlier")


def test_one_side_without_an_interval_says_which():
    before, now = pair(fig(30, 28.5, 31.5, n=12), fig(20), fig(400, 380, 420, n=8), fig(410, 380, 440, n=8))
    r = review(now, [before, now], cfg())
    assert not any(f.startswith("Regression") and "throughput" in f for f in r.flags)
    assert any(n.endswith("no interval: not judged (this run's figure has no 95% interval).") for n in r.notes)
    snap = snapshot(now).engines[0]
    assert snap.figure("usd_per_mtok").n == 1 and snap.figure("usd_per_mtok").low is None  # nothing to invert


def test_the_archived_chat_8b_runs_no_longer_flag_their_ttft_noise():
    # two H200 runs of chat-8b on the same day: the old review flagged SGLang's TTFT p95 295 → 618 ms (+109%),
    # whose earlier interval (three trials) reached below zero; read again with the capacity estimate (2026-12-05),
    # the earlier TTFT stands on one probe near the capacity: no interval, not judged
    before = read_summary(REPORTS / "h200-20261201-chat-8b-capacity" / "summary.json")
    now = read_summary(REPORTS / "h200-20261201-chat-8b-poisson" / "summary.json")
    res = review(now, [before, now], load_config(REPORTS / "h200-20261201-chat-8b-poisson" / "config.yaml"))
    assert not any(f.startswith("Regression") for f in res.flags)
    ttft = [n for n in res.notes if n.startswith("SGLang 0.5.16 TTFT p95")]
    assert len(ttft) == 1
    assert ttft[0].endswith("no interval: not judged (the earlier run's figure has no 95% interval).")
    hist = res.history_table().set_index(["run", "label"])
    cell = hist.loc[("h200-20261201-chat-8b-capacity", "vLLM 0.26.0"), "output tok/s 95% interval"]
    assert cell == "6,719 to 7,982 (n=17)"  # the capacity's interval × 256 output tokens a request


def test_judge_states_each_verdict():
    tight_before, tight_now = fig(100, 98, 102, n=10), fig(95, 93, 97, n=10)
    assert judge(tight_before, tight_now, True, 0.10).verdict == "worse"  # significant -5%, under the threshold
    assert judge(tight_before, tight_now, False, 0.10).verdict == "better"  # lower TTFT is better
    assert judge(tight_before, fig(80, 78, 82, n=10), True, 0.10).flagged
    assert judge(fig(100, 60, 140, n=3), fig(80, 50, 110, n=3), True, 0.10).verdict == "within noise"
    assert judge(fig(100), fig(50), True, 0.10).text == "no interval: not judged"
