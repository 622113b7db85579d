"""The record of step 6: every priced measurement, each configuration's representative, the fleet and break-even.

Rows are typed and keyed by the configuration's representative (``helpers.benchmark.sla.representative``,
saved whole in ``representatives``). Two figures are defined here once and saved, so that later steps
read them instead of computing them again: throughput per GPU (``per_gpu``, on ``PricedRepresentative``
and ``FleetRow``) and each engine family's cold start (``ColdStart``, in ``cold_starts``). ``frame``
turns a list of rows into a DataFrame for tables and plots; ``rows_of`` reads a DataFrame's rows as
plain JSON values (NaN and pandas' NA become None).
"""

from __future__ import annotations

import json
import math
from typing import Any, ClassVar

import pandas as pd
from pydantic import BaseModel, ConfigDict, Field, model_validator

from helpers.run.records import Artifact, Representative


def per_gpu(value: float | None, gpus: int | None) -> float | None:
    """Throughput per GPU (or per CPU replica): ``value`` ÷ the replica's accelerators; the one definition.

    None when either is unknown or the replica has no accelerator count.
    """
    if value is None or not gpus or math.isnan(value):
        return None
    return value / float(gpus)


def _fill_per_gpu(row: PricedRepresentative | FleetRow) -> None:
    """A row's per-GPU fields from its own throughput and accelerators (``per_gpu``), where not given.

    Every row is filled this way when it is made, and so is a record saved before the fields existed.
    """
    if row.output_tok_s_per_gpu is None:
        row.output_tok_s_per_gpu = per_gpu(row.output_tok_s, row.gpus_per_replica)
    if row.request_rate_per_gpu is None:
        row.request_rate_per_gpu = per_gpu(row.request_rate, row.gpus_per_replica)


class _Row(BaseModel):
    model_config = ConfigDict(extra="forbid")


class PricedPoint(_Row):
    """One measured point, priced (seed 003 §4.4)."""

    label: str
    engine: str
    family: str = ""
    status: str = ""
    phase: str | None = None
    concurrency: int | None = None
    knobs: str | None = None
    gpus_per_replica: int | None = None
    price_per_hour: float | None = None
    priced_as: str | None = None
    price_source: str | None = None
    output_tok_s: float | None = None
    total_tok_s: float | None = None
    ttft_ms_p95: float | None = None
    within_sla: bool | None = None
    usd_per_hour: float | None = None
    usd_per_mtok_output: float | None = None
    usd_per_mtok_total: float | None = None


class PricedRepresentative(PricedPoint):
    """A configuration's representative measurement (``helpers.benchmark.sla``), priced."""

    points: int = 0
    sla_share: float = 0.0
    meets_sla: bool = False
    representative: str = Field(default="", description="Identity of the representative measurement.")
    request_rate: float | None = Field(default=None, description="Sustained req/s of the representative.")
    output_tok_s_low: float | None = None
    output_tok_s_high: float | None = None
    request_rate_low: float | None = None
    request_rate_high: float | None = None
    lower_bound: bool = Field(default=False, description="The representative's capacity is known from below only.")
    source: str = Field(
        default="grid",
        description="capacity (search + trials), fixed (trials at a fixed load) or grid (a schema-1 archive's point).",
    )
    output_tok_s_per_gpu: float | None = Field(default=None, description="``per_gpu`` of ``output_tok_s``.")
    request_rate_per_gpu: float | None = Field(default=None, description="``per_gpu`` of ``request_rate``.")

    @model_validator(mode="after")
    def _per_gpu(self) -> PricedRepresentative:
        """The per-GPU fields (``_fill_per_gpu``)."""
        _fill_per_gpu(self)
        return self


class FleetRow(_Row):
    """Replicas and GPUs to serve the demand within the SLA, and the monthly TCO, of one configuration."""

    label: str
    engine: str
    family: str = ""
    status: str = ""
    meets_sla: bool = False
    representative: str = Field(default="", description="Identity of the representative measurement sized from.")
    source: str = Field(default="", description="capacity, fixed or grid: the representative's source.")
    concurrency: int | None = None
    request_rate: float | None = Field(default=None, description="Sustained req/s per replica within the SLA.")
    lower_bound: bool = Field(default=False, description="The capacity is known from below only (at least).")
    output_tok_s: float | None = None
    ttft_ms_p95: float | None = None
    sla_share: float | None = None
    priced_as: str | None = None
    usd_per_mtok_output: float | None = None
    gpus_per_replica: int | None = None
    price_per_hour: float | None = None
    demand_output_tok_s: float | None = None
    demand_concurrency: float | None = None
    demand_requests_per_s: float | None = None
    sizing_basis: str = ""
    replicas: int | None = None
    replicas_low: int | None = Field(default=None, description="Replicas at the capacity CI's upper end.")
    replicas_high: int | None = Field(default=None, description="Replicas at the capacity CI's lower end.")
    replicas_at_estimate: int | None = Field(default=None, description="Replicas at the capacity's estimate.")
    gpus: int | None = None
    gpu_monthly_usd: float | None = None
    build_s: float | None = None
    build_source: str = ""
    rebuilds_per_month: float | None = None
    base_ops_hours: float | None = None
    ops_hours_source: str = ""
    ops_hours_per_month: float | None = None
    ops_monthly_usd: float | None = None
    tco_monthly_usd: float | None = None
    output_tok_s_per_gpu: float | None = Field(default=None, description="``per_gpu`` of ``output_tok_s``.")
    request_rate_per_gpu: float | None = Field(default=None, description="``per_gpu`` of ``request_rate``.")

    @model_validator(mode="after")
    def _per_gpu(self) -> FleetRow:
        """The per-GPU fields (``_fill_per_gpu``)."""
        _fill_per_gpu(self)
        return self


class BreakEvenRow(_Row):
    """The sustained traffic at which a faster-but-harder configuration pays for its operations cost."""

    harder: str
    easier: str
    harder_family: str = ""
    easier_family: str = ""
    extra_ops_usd_month: float | None = None
    gpu_saving_per_token_pct: float | None = None
    break_even_output_tok_s: float | None = None
    break_even_mtok_month: float | None = None
    break_even_requests_per_s: float | None = None
    break_even_gpus_easier: float | None = None
    demand_output_tok_s: float | None = None
    pays_off_now: bool | None = None
    verdict: str = ""


class Demand(_Row):
    """The traffic the fleet is sized for, and where it comes from."""

    output_tok_s: float | None = None
    concurrency: float | None = None
    requests_per_s: float | None = None
    output_tokens_mean: float
    source: str = "none"
    basis: str


class ColdStart(_Row):
    """An engine family's cold start (the restart on every model update): seconds and where they come from.

    The one definition (``cost.fleet.cold_starts``): the median of the run's measured cold starts of the
    family's configurations, else the dated default of ``data/engine_facts.yaml``.
    """

    family: str
    seconds: float
    source: str
    measured: bool = False
    by_label: dict[str, float] = Field(
        default_factory=dict, description="The measured cold start of each configuration."
    )


class CostAnalysis(Artifact):
    """Step 6's record, read by the decision (step 7), the rollout (step 10) and the run summary."""

    artifact: ClassVar[str] = "cost.json"

    points: list[PricedPoint] = Field(default_factory=list)
    best: list[PricedRepresentative] = Field(default_factory=list)
    fleet: list[FleetRow] = Field(default_factory=list)
    break_even: list[BreakEvenRow] = Field(default_factory=list)
    demand: Demand
    representatives: list[Representative] | None = Field(
        default=None,
        description="Each configuration's representative as step 6 priced it; None in a record saved before it.",
    )
    cold_starts: list[ColdStart] | None = Field(
        default=None, description="Each engine family's cold start; None in a record saved before it."
    )

    def fleet_row(self, label: str) -> FleetRow | None:
        """The fleet sizing of configuration ``label``."""
        return next((f for f in self.fleet if f.label == label), None)

    def best_row(self, label: str) -> PricedRepresentative | None:
        """The priced representative of configuration ``label``."""
        return next((b for b in self.best if b.label == label), None)

    def cold_start(self, family: str) -> ColdStart | None:
        """The cold start of engine family ``family`` (None: not recorded, or the family not in the run)."""
        return next((c for c in self.cold_starts or [] if c.family == family), None)


def rows_of(df: pd.DataFrame) -> list[dict[str, Any]]:
    """A DataFrame's rows as plain JSON values (NaN/NA → None, numpy scalars → Python)."""
    return json.loads(df.to_json(orient="records")) if not df.empty else []


def frame(rows: list[BaseModel] | list[dict[str, Any]]) -> pd.DataFrame:
    """Rows back as a DataFrame (None stays missing)."""
    data = [r.model_dump() if isinstance(r, BaseModel) else r for r in rows]
    return pd.DataFrame(data)
