"""What the quarterly review and the trends read from one ``summary.json``: each configuration's figures.

``snapshot`` takes every configuration's representative (``helpers.run.records.Representative``, the
same measurement every output uses) and keeps its output throughput, TTFT p95, SLA capacity (when it
was searched) and $/M output tokens as plain numbers for tables and trends, and in ``figures`` as
``Figure`` records with their 95% interval and the n behind it, which the review judges changes by
(``helpers.review.significance``). The $/M figure's interval is the throughput's, inverted: $/M is
price ÷ throughput, so ``[usd × mean/high, usd × mean/low]`` (unbounded above when the throughput's
interval reaches zero). Archived runs from before intervals (schema 1, grid points, one trial) have
figures with n=1 and no bounds. The $/M figure is the one the run's step 6 saved (through its summary);
where it saved none, the snapshot says "not recorded" and prices nothing itself.
"""

from __future__ import annotations

import math
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from helpers.engines import ENGINES
from helpers.review.significance import has_interval
from helpers.run.records import Figure
from helpers.run.summary import EngineSummary, RunSummary, parse_summary

NOT_RECORDED = "not recorded (the run's step 6 priced no measurement for it)"


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class EngineSnapshot(_Model):
    """One configuration of one archived run, at its representative point."""

    label: str
    engine: str
    family: str = ""
    version: str | None = None
    status: str | None = None
    representative: str | None = Field(default=None, description="Identity of the representative measurement.")
    source: str | None = Field(default=None, description="capacity, fixed, grid or none: what kind it is.")
    concurrency: int | None = None
    capacity: float | None = Field(default=None, description="SLA capacity on the search's axis (req/s or streams).")
    output_tok_s: float | None = None
    ttft_ms_p95: float | None = None
    usd_per_mtok: float | None = Field(default=None, description="$/M output tokens at the representative point.")
    cost_source: str = ""
    figures: dict[str, Figure] = Field(
        default_factory=dict,
        description="output_tok_s, ttft_ms_p95, usd_per_mtok, capacity with their 95% interval and n (where known).",
    )

    def figure(self, key: str) -> Figure | None:
        """The figure of ``key`` with its interval, if the representative has one."""
        return self.figures.get(key)


class RunSnapshot(_Model):
    """What a review needs from one ``summary.json``."""

    run_id: str
    created_utc: str | None = None
    workload: str
    primary: str | None = None
    backup: str | None = None
    primary_family: str | None = None
    hardware: str | None = Field(default=None, description="What ran it, e.g. '1× H100-SXM5-80GB'; None: not recorded.")
    engines: list[EngineSnapshot] = Field(default_factory=list)


def as_summary(summary: RunSummary | dict[str, Any]) -> RunSummary:
    """``summary`` as a ``RunSummary`` (a dict is parsed as schema 1 or 2)."""
    return summary if isinstance(summary, RunSummary) else parse_summary(summary)


def usd_figure(usd: float, throughput: Figure | None) -> Figure:
    """$/M tokens with the throughput's interval, inverted ($/M = price ÷ throughput; see the module)."""
    if throughput is None or not has_interval(throughput) or throughput.mean <= 0:
        return Figure(mean=usd, n=throughput.n if throughput is not None else 1)
    assert throughput.low is not None and throughput.high is not None
    low = usd * throughput.mean / throughput.high if throughput.high > 0 else 0.0
    high = usd * throughput.mean / throughput.low if throughput.low > 0 else math.inf
    return Figure(mean=usd, low=low, high=high, n=throughput.n)


def _engine_snapshot(summary: RunSummary, e: EngineSummary) -> EngineSnapshot:
    """One configuration at its representative measurement (the same one every output uses)."""
    rep = e.representative
    out_fig = rep.output_tok_s if rep is not None else None
    out = out_fig.mean if out_fig is not None else None
    usd, source = e.usd_per_mtok_output, e.cost_source or "summary"
    if usd is None and out:
        source = NOT_RECORDED  # an archive whose step 6 priced nothing for it: said so, never priced again here
    elif usd is None:
        source = "no measured point"
    figures = {
        k: f
        for k, f in {
            "output_tok_s": out_fig,
            "ttft_ms_p95": rep.ttft_ms_p95 if rep is not None else None,
            "usd_per_mtok": usd_figure(usd, out_fig) if usd is not None else None,
            "capacity": rep.capacity if rep is not None else None,
        }.items()
        if f is not None
    }
    return EngineSnapshot(
        label=e.label,
        engine=e.engine,
        family=ENGINES[e.engine].family if e.engine in ENGINES else "",
        version=e.version,
        status=e.status,
        representative=rep.key if rep is not None else None,
        source=rep.source if rep is not None else None,
        concurrency=rep.concurrency if rep is not None else None,
        capacity=rep.capacity.mean if rep is not None and rep.capacity is not None else None,
        output_tok_s=out,
        ttft_ms_p95=rep.ttft_ms_p95.mean if rep is not None and rep.ttft_ms_p95 is not None else None,
        usd_per_mtok=usd,
        cost_source=source,
        figures=figures,
    )


def hardware_of(hardware: dict[str, Any]) -> str | None:
    """The GPUs a run measured on, as the review matches runs: ``'1× H100-SXM5-80GB'``, ``'CPU'``, or None.

    A GPU is named by its spec (``helpers/data/gpu_specs.yaml``) where one matched, else by NVML's name.
    """
    if not hardware:
        return None
    gpus = hardware.get("gpus") or []
    if not gpus:
        return "CPU" if hardware.get("gpu_count") == 0 else None
    names = sorted({str(g.get("spec") or g.get("name") or "unknown GPU") for g in gpus})
    return f"{len(gpus)}× {' + '.join(names)}"


def snapshot(summary: RunSummary | dict[str, Any]) -> RunSnapshot:
    """The review's view of one run summary (schema 1 or 2)."""
    s = as_summary(summary)
    rec = s.recommendation
    engines = [_engine_snapshot(s, e) for e in s.engines]
    fam = (s.decision or {}).get("primary_family")
    if not fam and rec.primary:
        fam = next((e.family for e in engines if e.label == rec.primary), None)
    return RunSnapshot(
        run_id=s.run_id,
        created_utc=s.created_utc,
        workload=s.workload,
        primary=rec.primary,
        backup=rec.backup,
        primary_family=fam or None,
        hardware=hardware_of(s.hardware),
        engines=engines,
    )
