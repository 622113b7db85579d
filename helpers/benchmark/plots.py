"""Benchmark plots (matplotlib): throughput and TTFT p95 against concurrency, per engine configuration."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.figure import Figure

from helpers.benchmark.stats import mean_ci
from helpers.run.records import EngineResult, Point


def _sweeps(results: list[EngineResult]):
    for r in results:
        pts = sorted((p for p in r.points if p.phase == "sweep"), key=lambda p: p.concurrency)
        if pts:
            yield r.label, pts


def throughput_vs_concurrency(results: list[EngineResult]) -> Figure:
    """Output tokens/s against concurrency, one line per engine configuration."""
    fig, ax = plt.subplots(figsize=(7, 4))
    for label, pts in _sweeps(results):
        ax.plot([p.concurrency for p in pts], [p.output_tok_s for p in pts], marker="o", label=label)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("concurrency (streams)")
    ax.set_ylabel("output tokens/s")
    ax.set_title("Throughput vs concurrency")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def ttft_vs_concurrency(results: list[EngineResult], sla_ms: float) -> Figure:
    """TTFT p95 against concurrency with the SLA line."""
    fig, ax = plt.subplots(figsize=(7, 4))
    for label, pts in _sweeps(results):
        xs = [p.concurrency for p in pts if p.ttft_ms_p95 is not None]
        ys = [p.ttft_ms_p95 for p in pts if p.ttft_ms_p95 is not None]
        ax.plot(xs, ys, marker="o", label=label)
    ax.axhline(sla_ms, color="crimson", linestyle="--", label=f"SLA: TTFT p95 ≤ {sla_ms:,.0f} ms")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("concurrency (streams)")
    ax.set_ylabel("TTFT p95 (ms)")
    ax.set_title("Time to first token (p95) vs concurrency")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def tuning_curve(result: EngineResult, sla_ms: float, target: int) -> Figure | None:
    """Throughput and TTFT p95 for each batch size tried at the target concurrency (None if none was)."""
    pts = sorted(tuning_candidates(result, target), key=lambda p: p.knobs.get("max_num_seqs") or 0)
    if not any(p.phase == "tune" for p in pts):
        return None
    fig, ax = plt.subplots(figsize=(6, 3.5))
    xs = [p.knobs.get("max_num_seqs") for p in pts]
    ax.plot(xs, [p.output_tok_s for p in pts], marker="o", color="tab:blue")
    ax.set_xlabel("max_num_seqs")
    ax.set_ylabel("output tokens/s", color="tab:blue")
    ax2 = ax.twinx()
    ax2.plot(xs, [p.ttft_ms_p95 or 0 for p in pts], marker="s", color="tab:orange")
    ax2.axhline(sla_ms, color="crimson", linestyle="--")
    ax2.set_ylabel("TTFT p95 (ms)", color="tab:orange")
    ax.set_title(f"Tuning {result.label}")
    fig.tight_layout()
    return fig


def tuning_candidates(result: EngineResult, target: int) -> list[Point]:
    """The points tuning chose among: the tune points and the sweep point at the target concurrency."""
    return [p for p in result.points if p.phase == "tune" or (p.phase == "sweep" and p.concurrency == target)]


def capacity_curve(result: EngineResult, sla_ms: float) -> Figure | None:
    """TTFT p95 against offered load for every capacity-search probe, the SLA line and the capacity.

    Passing probes are filled, failing ones hollow, probes measured again under interference grey crosses;
    the estimated capacity is a vertical line with its 95% interval shaded (else the search's bracket);
    fixed-load trials are drawn as their mean with the 95% interval as an error bar.
    """
    cap = result.capacity
    if cap is None or not cap.probes:
        return None
    fig, ax = plt.subplots(figsize=(6.4, 3.6))
    unit = "offered load (req/s, Poisson arrivals)" if cap.axis == "rate" else "concurrent streams"
    aside = [p for p in cap.probes if p.get("superseded")]
    live = [p for p in cap.probes if not p.get("superseded")]
    ok = [p for p in live if p.get("passed", p.get("meets_sla") and p.get("sustained") and p.get("delivered", True))]
    bad = [p for p in live if p not in ok]
    styles = (
        (ok, {"color": "tab:green", "label": "meets the SLA, sustained"}),
        (bad, {"facecolors": "none", "edgecolors": "tab:red", "label": "misses or not sustained"}),
        (aside, {"color": "grey", "marker": "x", "label": "measured again (other load on the machine)"}),
    )
    for group, style in styles:
        pts = [(p["load"], p.get("ttft_p95_ms")) for p in group if p.get("ttft_p95_ms") is not None]
        if pts:
            ax.scatter(*zip(*pts, strict=True), s=36, zorder=3, **style)
    ax.axhline(sla_ms, color="grey", linestyle="--", label=f"SLA {sla_ms:,.0f} ms")
    est = cap.estimate
    if est is not None and est.value is not None:
        ax.axvline(est.value, color="tab:blue", label=f"capacity {est.value:.3g}")
        if est.low is not None and est.high is not None:
            ax.axvspan(est.low, est.high, color="tab:blue", alpha=0.15, label="95% interval")
    elif cap.bracket_low is not None and cap.bracket_high is not None:
        ax.axvspan(cap.bracket_low, cap.bracket_high, color="tab:blue", alpha=0.12, label="bracket")
    trials = [p for p in result.points if p.phase == "trial" and p.ttft_ms_p95 is not None]
    if not cap.searched and cap.trial_load is not None and trials:
        mean = mean_ci([p.ttft_ms_p95 for p in trials])
        ax.errorbar([cap.trial_load], [mean.mean], yerr=[mean.half_width or 0.0], fmt="D", color="tab:blue",
                    capsize=4, label=f"{mean.n} trials at the fixed load (95% interval)")  # fmt: skip
    ax.set_xlabel(unit)
    ax.set_ylabel("TTFT p95 (ms)")
    ax.set_title(f"{result.label}: SLA capacity search", fontsize=10)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


def capacity_bars(rows: list[tuple[str, float, float | None, float | None]], ylabel: str) -> Figure:
    """One bar per configuration (label, mean, low, high) with its 95% interval as an error bar."""
    fig, ax = plt.subplots(figsize=(6.4, 3.2))
    labels = [r[0] for r in rows]
    means = np.array([r[1] for r in rows], dtype=float)
    lows = np.array([max(0.0, r[1] - r[2]) if r[2] is not None else 0.0 for r in rows])
    highs = np.array([max(0.0, r[3] - r[1]) if r[3] is not None else 0.0 for r in rows])
    ax.bar(labels, means, yerr=[lows, highs], capsize=5, color="tab:blue", alpha=0.8)
    ax.set_ylabel(ylabel)
    ax.tick_params(axis="x", labelrotation=15, labelsize=8)
    ax.grid(True, axis="y", alpha=0.3)
    fig.tight_layout()
    return fig
