"""Benchmark plots (matplotlib): throughput and TTFT p95 against concurrency, per engine configuration."""

from __future__ import annotations

import matplotlib.pyplot as plt
from matplotlib.figure import Figure

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
