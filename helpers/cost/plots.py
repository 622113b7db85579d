"""Plots of the cost step, drawn from the cost tables; each returns a matplotlib ``Figure``.

Figures are built with ``matplotlib.figure.Figure`` (no pyplot state), so they render the same in
a notebook, in papermill and in a headless test.
"""

from __future__ import annotations

import pandas as pd
from matplotlib.figure import Figure


def plot_cost_per_mtok(costs: pd.DataFrame) -> Figure:
    """$ per million output tokens vs concurrency, one line per configuration (``cost_table`` output).

    Filled markers are points within the SLA, hollow ones are outside it; the y axis is logarithmic
    because low-concurrency points cost orders of magnitude more.
    """
    fig = Figure(figsize=(7, 4.2))
    ax = fig.add_subplot()
    data = costs[costs["usd_per_mtok_output"].notna()]
    for label, grp in data.groupby("label", sort=True):
        grp = grp.sort_values("concurrency")
        (line,) = ax.plot(grp["concurrency"], grp["usd_per_mtok_output"], label=label)
        ok = grp["within_sla"].astype(bool)
        ax.scatter(grp.loc[ok, "concurrency"], grp.loc[ok, "usd_per_mtok_output"], color=line.get_color(), zorder=3)
        ax.scatter(
            grp.loc[~ok, "concurrency"], grp.loc[~ok, "usd_per_mtok_output"],
            facecolors="none", edgecolors=line.get_color(), zorder=3,
        )  # fmt: skip
    if len(data):
        ax.set_yscale("log")
        ax.legend(fontsize="small")
    else:
        ax.text(0.5, 0.5, "no measured points", ha="center", va="center", transform=ax.transAxes)
    ax.set_xlabel("concurrency")
    ax.set_ylabel("$ per million output tokens")
    ax.set_title("Cost per output token (filled: within SLA)")
    ax.grid(True, alpha=0.3)
    fig.tight_layout()
    return fig


def plot_tco_stacked(fleet: pd.DataFrame) -> Figure:
    """Monthly TCO per configuration as stacked bars: GPU bill and operations (``fleet_and_tco`` output)."""
    fig = Figure(figsize=(7, 4.2))
    ax = fig.add_subplot()
    data = fleet[fleet["gpu_monthly_usd"].notna()] if not fleet.empty else fleet
    if data.empty:
        ax.text(0.5, 0.5, "no configuration met the SLA", ha="center", va="center", transform=ax.transAxes)
    else:
        x = range(len(data))
        gpu, ops = data["gpu_monthly_usd"].astype(float), data["ops_monthly_usd"].astype(float)
        ax.bar(x, gpu, label="GPU")
        ax.bar(x, ops, bottom=gpu, label="operations")
        for i, (g, o, n) in enumerate(zip(gpu, ops, data["gpus"], strict=True)):
            ax.annotate(f"${g + o:,.0f}\n{n} GPU", (i, g + o), ha="center", va="bottom", fontsize="small")
        ax.set_xticks(list(x), data["label"], rotation=15, ha="right")
        ax.legend(fontsize="small")
        ax.margins(y=0.15)
    ax.set_ylabel("$ per month")
    ax.set_title("Monthly TCO at the profiled peak")
    fig.tight_layout()
    return fig


def plot_tco_vs_traffic(curve: pd.DataFrame, demand_output_tok_s: float | None = None) -> Figure:
    """Monthly TCO vs sustained output rate per configuration (``tco_curve`` output): the break-even view."""
    fig = Figure(figsize=(7, 4.2))
    ax = fig.add_subplot()
    for label, grp in curve.groupby("label", sort=True):
        ax.step(grp["output_tok_s"], grp["tco_monthly_usd"], where="post", label=label)
    if demand_output_tok_s:
        ax.axvline(demand_output_tok_s, color="grey", linestyle="--", label="profiled peak")
    if len(curve):
        ax.legend(fontsize="small")
    ax.set_xlabel("sustained output tok/s")
    ax.set_ylabel("$ per month (GPU + operations)")
    ax.set_title("Where a faster-but-harder engine pays off")
    ax.grid(True, alpha=0.3)
    fig.tight_layout()
    return fig
