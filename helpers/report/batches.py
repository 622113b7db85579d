"""The batch's record and page (``reports/batch-<id>/batch.json``, ``index.html``) and the list of batches.

``batches_section`` is the short list of batches that ``reports/index.html`` shows.

The page has one table (a row per cell: its axis values, state, primary engine, $/M output tokens, its
reason when it failed, a link to its report) and one chart ($/M output tokens per cell, bars named by the
primary engine), embedded as a PNG so the page is one file that opens offline. Both pages are rendered from
``helpers/report/templates/pages/`` (``batch_index.html.j2``, ``batches_section.html.j2``), autoescaped.
"""

from __future__ import annotations

import base64
import io
import json
from pathlib import Path
from typing import Any, Literal

from matplotlib.figure import Figure
from pydantic import BaseModel, ConfigDict, Field

from helpers.report.pages import render
from helpers.run.progress import duration_text
from helpers.run.records import write_json_atomic

CellStatus = Literal["ok", "failed", "running", "pending"]
RECORD = "batch.json"


class CellRow(BaseModel):
    """One cell as the batch index shows it."""

    model_config = ConfigDict(extra="forbid")

    cell: str
    run_id: str
    values: dict[str, str] = Field(default_factory=dict, description="Value name per axis.")
    status: CellStatus = "pending"
    kept: bool = Field(default=False, description="Finished in an earlier batch run and kept.")
    reason: str | None = None
    primary: str | None = None
    primary_engine: str | None = None
    primary_version: str | None = None
    usd_per_mtok: float | None = Field(default=None, description="$/M output tokens of the primary.")
    output_tok_s: float | None = None
    seconds: float | None = None
    where: str | None = None
    report: str | None = Field(default=None, description="Link to the cell's report, relative to the batch page.")


class BatchRecord(BaseModel):
    """``batch.json``: the batch and every cell's row."""

    model_config = ConfigDict(extra="forbid")

    schema_version: int = Field(default=1, alias="schema")
    batch: str
    name: str
    description: str = ""
    source: str
    executor: str
    address: str | None = None
    updated_utc: str
    axes: list[str] = Field(default_factory=list)
    cells: list[CellRow] = Field(default_factory=list)


def read_record(batch_dir: Path) -> BatchRecord | None:
    """A batch folder's ``batch.json``, or None if it is missing or unreadable."""
    try:
        return BatchRecord.model_validate(json.loads((Path(batch_dir) / RECORD).read_text(encoding="utf-8")))
    except (OSError, ValueError):
        return None


def chart_figure(record: BatchRecord) -> Figure:
    """$/M output tokens of each cell's primary, one horizontal bar per cell (a failed cell: a labelled gap)."""
    cells = list(reversed(record.cells))
    fig = Figure(figsize=(8, 0.5 * len(cells) + 1.4))
    ax = fig.subplots()
    values = [c.usd_per_mtok or 0.0 for c in cells]
    ax.barh(range(len(cells)), values, color=["#4c72b0" if c.usd_per_mtok else "#cccccc" for c in cells])
    top = max(values, default=0.0) or 1.0
    for i, c in enumerate(cells):
        missing = "no $/Mtok" if c.status == "ok" else c.status
        who = c.primary if c.primary == c.primary_engine else f"{c.primary} ({c.primary_engine})"
        text = f"{who}: ${c.usd_per_mtok:,.3f}" if c.usd_per_mtok else missing
        ax.text((c.usd_per_mtok or 0.0) + top * 0.01, i, text, va="center", fontsize=8)
    ax.set_yticks(range(len(cells)), [c.cell for c in cells], fontsize=8)
    ax.set_xlim(0, top * 1.6)
    ax.set_xlabel("$ per million output tokens (primary engine)")
    ax.set_title(f"{record.name}: cost per cell")
    ax.grid(True, axis="x", alpha=0.3)
    fig.tight_layout()
    return fig


def chart_png(record: BatchRecord) -> bytes:
    """The chart as PNG bytes."""
    buf = io.BytesIO()
    chart_figure(record).savefig(buf, format="png", dpi=90)
    return buf.getvalue()


def _money(v: float | None) -> str:
    return "–" if v is None else f"${v:,.3f}"


def _cell_row(c: CellRow, axes: list[str]) -> dict[str, Any]:
    """One cell as the page's table shows it (text only; the template escapes it)."""
    primary = f"{c.primary} ({c.primary_engine} {c.primary_version or '?'})" if c.primary else "–"
    return {
        "status": c.status, "status_text": c.status + (" (kept)" if c.kept else ""), "reason": c.reason,
        "cells": [c.cell, *(c.values.get(a, "") for a in axes)],
        "after": [primary, _money(c.usd_per_mtok), "–" if c.output_tok_s is None else f"{c.output_tok_s:,.0f}",
                  "–" if c.seconds is None else duration_text(c.seconds), c.where or "–"],
        "report": c.report, "run_id": c.run_id,
    }  # fmt: skip


def index_html(record: BatchRecord) -> str:
    """The batch page (``templates/pages/batch_index.html.j2``): counts, the chart, each cell linked to its report."""
    counts = {s: sum(1 for c in record.cells if c.status == s) for s in ("ok", "failed", "running", "pending")}
    heads = ["cell", *record.axes, "status", "primary", "$/M output tok", "output tok/s", "wall time", "ran on"]
    page = render(
        "batch_index.html.j2",
        record=record,
        counts=counts,
        heads=[*heads, "report"],
        rows=[_cell_row(c, record.axes) for c in record.cells],
        png=base64.b64encode(chart_png(record)).decode("ascii"),
    )
    return str(page)


def write_batch_index(batch_dir: Path, record: BatchRecord) -> Path:
    """Write ``batch.json`` and ``index.html`` into the batch folder; return the page's path."""
    batch_dir = Path(batch_dir)
    batch_dir.mkdir(parents=True, exist_ok=True)
    write_json_atomic(batch_dir / RECORD, record.model_dump(mode="json", by_alias=True))
    page = batch_dir / "index.html"
    page.write_text(index_html(record), encoding="utf-8")
    return page


def batches_section(reports_dir: Path) -> str:
    """The "Batches" section of ``reports/index.html``: one line per batch folder, linked; empty if none."""
    items = []
    for d in sorted(Path(reports_dir).glob("batch-*/")):
        rec = read_record(d)
        if rec is None:
            continue
        items.append(
            {"href": f"{d.name}/index.html", "name": rec.name, "cells": len(rec.cells),
             "ok": sum(1 for c in rec.cells if c.status == "ok"),
             "failed": sum(1 for c in rec.cells if c.status == "failed"),
             "executor": rec.executor, "updated": rec.updated_utc}
        )  # fmt: skip
    return str(render("batches_section.html.j2", batches=items)) if items else ""
