"""Trends for ``reports/index.html``: throughput and $/M output tokens over time, per workload and engine.

Rows come from the same snapshots as the quarterly review (``helpers.review.snapshot.snapshot``), so the
index and the review agree on every number. ``trend_charts`` gives each workload's chart as a PNG data URI,
which the index's template inlines, so the index stays one self-contained file.
"""

from __future__ import annotations

import base64
import io
from typing import Any

import pandas as pd

from helpers.review.snapshot import snapshot
from helpers.run.summary import RunSummary


def trend_rows(archive: list[RunSummary]) -> list[dict[str, Any]]:
    """One row per archived run and configuration: date, workload, version, throughput, TTFT p95, $/Mtok."""
    rows = []
    for s in archive:
        run = snapshot(s)
        for e in run.engines:
            rows.append(
                {
                    "workload": run.workload,
                    "run_id": run.run_id,
                    "created_utc": run.created_utc,
                    "is_primary": e.label == run.primary,
                    **e.model_dump(exclude={"cost_source", "representative"}),
                }
            )
    return sorted(rows, key=lambda r: (r["workload"], r["created_utc"] or "", r["run_id"], r["label"]))


def trend_figure(archive: list[RunSummary], workload: str):
    """Throughput and $/Mtok over time for ``workload``, one line per configuration (a matplotlib Figure)."""
    # matplotlib is heavy: imported only where a figure is drawn
    import matplotlib.pyplot as plt

    df = pd.DataFrame([r for r in trend_rows(archive) if r["workload"] == workload])
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.6))
    if df.empty:
        for ax in axes:
            ax.text(0.5, 0.5, f"no archived run of {workload}", ha="center", va="center", transform=ax.transAxes)
        return fig
    df["when"] = pd.to_datetime(df["created_utc"], utc=True, errors="coerce")
    panels = ((axes[0], "output_tok_s", "output tokens/s"), (axes[1], "usd_per_mtok", "$/M output tokens"))
    for ax, col, ylabel in panels:
        for label, g in df.groupby("label", sort=True):
            g = g.dropna(subset=["when", col]).sort_values("when")
            if g.empty:
                continue
            ax.plot(g["when"], g[col], marker="o", label=label)
            prim = g[g["is_primary"]]
            ax.scatter(prim["when"], prim[col], marker="*", s=140, color="black", zorder=3)
        ax.set_ylabel(ylabel)
        ax.grid(True, alpha=0.3)
        ax.tick_params(axis="x", labelrotation=30, labelsize=8)
    axes[0].set_title(f"{workload}: throughput of the representative measurement")
    axes[1].set_title("cost per million output tokens (★ = primary)")
    axes[0].legend(fontsize=7)
    fig.tight_layout()
    return fig


def trend_png_data_uri(archive: list[RunSummary], workload: str) -> str:
    """``trend_figure`` as a ``data:image/png;base64,...`` URI (the index page stays one file)."""
    # matplotlib is heavy: imported only where a figure is drawn
    import matplotlib.pyplot as plt

    fig = trend_figure(archive, workload)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90)
    plt.close(fig)
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


def trend_charts(archive: list[RunSummary]) -> list[tuple[str, int, str]]:
    """One chart per workload that has a measured point: (workload, its runs, the chart as a PNG data URI).

    ``reports/index.html`` shows them (``helpers.report.index``, template ``trends_section.html.j2``).
    """
    workloads = sorted({r["workload"] for r in trend_rows(archive) if r["output_tok_s"] is not None})
    return [
        (w, sum(1 for s in archive if snapshot(s).workload == w), trend_png_data_uri(archive, w)) for w in workloads
    ]
