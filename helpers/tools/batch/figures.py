"""The figures a batch shows per cell, read from the cell's ``summary.json``: the one place the batch reads summaries.

``cell_figures`` goes through ``helpers.run.summary.read_summary`` (the typed reader the index and the review
use), so a change of the summary's schema is absorbed there and here, nowhere else in the batch.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict

from helpers.run.summary import SummaryError, read_summary


class CellFigures(BaseModel):
    """What the batch index shows of one finished cell."""

    model_config = ConfigDict(extra="forbid")

    workload: str | None = None
    model: str | None = None
    primary: str | None = None
    primary_engine: str | None = None
    primary_version: str | None = None
    usd_per_mtok: float | None = None
    output_tok_s: float | None = None
    problem: str | None = None


def cell_figures(run_dir: Path) -> CellFigures:
    """The primary configuration of a cell's run and its $/M output tokens (``problem`` says why one is missing)."""
    path = Path(run_dir) / "summary.json"
    try:
        s = read_summary(path)
    except SummaryError as err:
        return CellFigures(problem=str(err))
    figures = CellFigures(workload=s.workload, model=s.model, primary=s.recommendation.primary)
    engine = s.engine(s.recommendation.primary) if s.recommendation.primary else None
    if engine is None:
        why = [f"{e.label}: {e.reason}" for e in s.engines if e.reason] + [f"{k}: {v}" for k, v in s.failures.items()]
        figures.problem = "no recommendation" + (f" ({'; '.join(why)})" if why else "")
        return figures
    rep = engine.representative
    figures.primary_engine = engine.engine
    figures.primary_version = engine.version
    figures.usd_per_mtok = engine.usd_per_mtok_output
    figures.output_tok_s = rep.output_tok_s.mean if rep is not None and rep.output_tok_s is not None else None
    if figures.usd_per_mtok is None:
        figures.problem = f"no $/M output tokens for {engine.label} ({engine.cost_source or 'not priced'})"
    return figures
