"""Plots of a workload profile; each function returns a matplotlib ``Figure`` (no pyplot state)."""

from __future__ import annotations

import numpy as np
from matplotlib.figure import Figure

from helpers.workload.profile import Profile, TokenStats


def _hist(ax, stats: TokenStats, title: str) -> None:
    edges = np.asarray(stats.histogram_edges)
    ax.stairs(stats.histogram_counts, edges, fill=True, alpha=0.7)
    for name, x, style in (("p50", stats.p50, "-"), ("p95", stats.p95, "--"), ("p99", stats.p99, ":")):
        ax.axvline(x, color="k", linestyle=style, linewidth=1, label=f"{name} {x:,.0f}")
    ax.set_title(title)
    ax.set_xlabel("tokens")
    ax.set_ylabel("requests")
    ax.legend(fontsize="small")


def plot_lengths(profile: Profile) -> Figure:
    """Histograms of prompt and output lengths with p50/p95/p99 marked."""
    fig = Figure(figsize=(10, 3.5), layout="constrained")
    a, b = fig.subplots(1, 2)
    _hist(a, profile.input_tokens, "Input tokens per request")
    _hist(b, profile.output_tokens, "Output tokens per request")
    return fig


def plot_concurrency(profile: Profile) -> Figure:
    """Plot requests in flight over time (mean and max per bucket) with the arrival rate beside it."""
    tl = profile.timeline
    fig = Figure(figsize=(10, 3.5), layout="constrained")
    ax = fig.subplots()
    t = np.asarray(tl.t_s) + tl.bucket_s / 2
    ax.plot(t, tl.concurrency_mean, label="in flight (mean)")
    ax.plot(t, tl.concurrency_max, linewidth=0.8, alpha=0.6, label="in flight (max)")
    for name, y, style in (
        ("p50", profile.concurrency_p50, "-"),
        ("p95", profile.concurrency_p95, "--"),
        ("p99", profile.concurrency_p99, ":"),
    ):
        ax.axhline(y, color="gray", linestyle=style, linewidth=1, label=f"{name} {y:g}")
    how = "measured" if profile.concurrency_method == "measured" else f"estimated: {profile.concurrency_model}"
    ax.set_title(f"Concurrency over time ({how})", fontsize="medium")
    ax.set_xlabel(f"time (s), {tl.bucket_s:g} s buckets")
    ax.set_ylabel("requests in flight")
    rate = ax.twinx()
    rate.plot(t, tl.requests_per_s, color="tab:green", alpha=0.5, linewidth=0.8)
    rate.set_ylabel("arrivals (req/s)", color="tab:green")
    ax.legend(fontsize="small", loc="upper left")
    return fig


def plot_prefix_reuse(profile: Profile) -> Figure:
    """Reusable share of prompt tokens per time bucket and cumulatively; a note when unknown."""
    fig = Figure(figsize=(10, 3.5), layout="constrained")
    ax = fig.subplots()
    tl = profile.timeline
    if profile.prefix_reuse_ratio is None or tl.prefix_reuse_ratio is None:
        ax.text(
            0.5,
            0.5,
            f"Prefix reuse unknown:\n{profile.prefix_reuse_reason}",
            ha="center",
            va="center",
            wrap=True,
        )
        ax.set_axis_off()
        return fig
    t = np.asarray(tl.t_s) + tl.bucket_s / 2
    ratio = np.array([np.nan if r is None else r for r in tl.prefix_reuse_ratio])
    ax.plot(t, ratio, marker=".", linewidth=1, label="per bucket")
    ax.axhline(
        profile.prefix_reuse_ratio,
        color="k",
        linestyle="--",
        linewidth=1,
        label=f"overall {profile.prefix_reuse_ratio:.1%}",
    )
    detail = profile.prefix_reuse
    if detail is not None:
        ax.axhline(
            detail.system_prompt_ratio,
            color="tab:orange",
            linestyle=":",
            linewidth=1,
            label=f"system prompt {detail.system_prompt_ratio:.1%}",
        )
    ax.set_ylim(0, 1)
    ax.set_xlabel(f"time (s), {tl.bucket_s:g} s buckets")
    ax.set_ylabel("reusable share of prompt tokens")
    ax.set_title("Prefix reuse over time (block-level, unbounded cache)", fontsize="medium")
    ax.legend(fontsize="small")
    return fig
