"""Checklist step 6, fleet: replicas and GPUs at the demand within the SLA, monthly GPU, operations and TCO.

Each row is sized from one configuration's priced representative (``compute.best_points``). Operations
cost = engineer hours (config, or the family defaults in ``data/engine_facts.yaml``, which are
assumptions) plus the time spent restarting on every model update: the engine family's cold start,
defined once here (``cold_starts``) and saved in the record, which step 8's risk register reads.
"""

from __future__ import annotations

import math
import statistics

from helpers.core.config import PlaybookConfig
from helpers.cost.compute import HOURS_PER_MONTH, family_of
from helpers.cost.records import ColdStart, Demand, FleetRow, PricedRepresentative
from helpers.model.reference_data import FamilyFacts
from helpers.run.records import EngineResult

MEASURED = "measured cold start (this run; median over the engine's configurations)"


def cold_starts(results: list[EngineResult], facts: dict[str, FamilyFacts]) -> list[ColdStart]:
    """Each engine family's cold start, the one definition: the median measured in this run, else the dated default.

    A model update restarts the engine whatever its knobs, so configurations of one family share the
    median of their measured cold starts (start-up noise between them is not an operations cost).
    Families of the facts table that the run did not measure keep their dated default.
    """
    measured: dict[str, dict[str, float]] = {}
    for r in results:
        if r.cold_start_s:
            measured.setdefault(family_of(r.engine), {})[r.label] = r.cold_start_s
    out = []
    for family in sorted(set(facts) | set(measured)):
        if family in measured:
            secs = statistics.median(measured[family].values())
            out.append(
                ColdStart(family=family, seconds=secs, source=MEASURED, measured=True, by_label=measured[family])
            )
        else:
            c = facts[family].cold_start
            out.append(ColdStart(family=family, seconds=c.seconds, source=f"default: {c.what} ({c.source}, {c.date})"))
    return out


def _ops_hours(r: EngineResult, family: str, cfg: PlaybookConfig, facts: dict[str, FamilyFacts]) -> tuple[float, str]:
    """Return base engineer hours/month: config by label, engine or family; else the family assumption."""
    for key in (r.label, r.engine, family):
        if key and key in cfg.cost.ops_hours_per_month:
            return cfg.cost.ops_hours_per_month[key], f"config cost.ops_hours_per_month[{key}]"
    if family in facts:
        f = facts[family].ops_hours_per_month
        return f.hours, f"assumption (engine_facts.yaml {family}): {f.basis}"
    return math.nan, f"unknown: engine family of {r.engine!r} has no default; set cost.ops_hours_per_month"


def _by_rate(b: PricedRepresentative, demand: Demand) -> dict:
    """Replicas from the SLA capacity (req/s per replica) and its 95% interval, with the words that say so."""
    rps, mean, lo, hi = demand.requests_per_s or 0.0, b.request_rate or 0.0, b.request_rate_low, b.request_rate_high
    conservative = lo if lo and lo > 0 else mean
    estimate = math.ceil(rps / mean)
    if b.lower_bound:
        sized_on = (
            f"sized on the SLA capacity's lower bound, {conservative:.3g} req/s per replica (the highest load that "
            "passed: the capacity is known from below only, no estimate)"
        )
    elif lo and lo > 0:
        sized_on = (
            f"sized on the SLA capacity's conservative end, {conservative:.3g} req/s per replica (95% low; "
            f"{estimate} replica(s) at the estimate {mean:.3g})"
        )
    else:
        sized_on = f"sized on the SLA capacity, {mean:.3g} req/s per replica (no interval)"
    return {
        "needs": [math.ceil(rps / conservative)],
        "replicas_at_estimate": estimate,
        "replicas_low": math.ceil(rps / hi) if hi else None,
        "replicas_high": math.ceil(rps / lo) if lo and lo > 0 else None,
        "sized_on": sized_on,
    }


def _replicas(b: PricedRepresentative, demand: Demand) -> dict:
    """How many replicas serve ``demand`` at ``b`` (None when it misses the SLA), and from what."""
    by_rate = b.source == "capacity" and bool(b.request_rate)
    none = {"needs": [], "replicas_at_estimate": None, "replicas_low": None, "replicas_high": None, "sized_on": ""}
    if by_rate and demand.requests_per_s:
        sized = _by_rate(b, demand)
    else:
        sized = none
        if not by_rate and demand.output_tok_s and b.output_tok_s:
            sized["needs"].append(math.ceil(demand.output_tok_s / b.output_tok_s))
        if not by_rate and demand.concurrency and b.concurrency:
            sized["needs"].append(math.ceil(demand.concurrency / b.concurrency))
    replicas = (max(sized["needs"]) if sized["needs"] else 1) if b.meets_sla else None
    if replicas is None:
        sized.update(replicas_at_estimate=None, replicas_low=None, replicas_high=None)
    sized["replicas"] = replicas
    return sized


def _fleet_row(
    b: PricedRepresentative, r: EngineResult, cfg: PlaybookConfig, demand: Demand, facts: dict, cold: ColdStart | None
) -> FleetRow:
    """One configuration's fleet, GPU, operations and TCO per month."""
    sized = _replicas(b, demand)
    replicas, gpus_per, price = sized["replicas"], b.gpus_per_replica or 1, b.price_per_hour or 0.0
    gpus = None if replicas is None else replicas * gpus_per
    gpu_monthly = math.nan if gpus is None else gpus * price * HOURS_PER_MONTH
    rebuilds = cfg.cadence.updates_per_month * cfg.cadence.concurrent_models
    build_s, build_src = (cold.seconds, cold.source) if cold else (0.0, "unknown (no measurement, no default)")
    build_h = rebuilds * build_s / 3600.0
    base_h, ops_src = _ops_hours(r, b.family, cfg, facts)
    ops_h = base_h + build_h
    ops_monthly = ops_h * cfg.cost.engineer_cost_per_hour + build_h * gpus_per * price
    basis = "; ".join(x for x in (demand.basis, sized["sized_on"]) if x)
    return FleetRow(
        label=r.label, engine=r.engine, family=b.family, status=r.status, meets_sla=b.meets_sla,
        representative=b.representative, source=b.source, request_rate=b.request_rate, lower_bound=b.lower_bound,
        demand_requests_per_s=demand.requests_per_s, replicas_low=sized["replicas_low"],
        replicas_high=sized["replicas_high"], replicas_at_estimate=sized["replicas_at_estimate"],
        concurrency=b.concurrency, output_tok_s=b.output_tok_s, ttft_ms_p95=b.ttft_ms_p95, sla_share=b.sla_share,
        priced_as=b.priced_as, usd_per_mtok_output=b.usd_per_mtok_output, gpus_per_replica=b.gpus_per_replica,
        price_per_hour=b.price_per_hour, demand_output_tok_s=demand.output_tok_s,
        demand_concurrency=demand.concurrency,
        sizing_basis=basis if b.meets_sla else "no measured point meets the SLA", replicas=replicas, gpus=gpus,
        gpu_monthly_usd=None if math.isnan(gpu_monthly) else gpu_monthly, build_s=build_s, build_source=build_src,
        rebuilds_per_month=rebuilds, base_ops_hours=None if math.isnan(base_h) else base_h,
        ops_hours_source=ops_src, ops_hours_per_month=None if math.isnan(ops_h) else ops_h,
        ops_monthly_usd=None if math.isnan(ops_monthly) else ops_monthly,
        tco_monthly_usd=None if math.isnan(gpu_monthly + ops_monthly) else gpu_monthly + ops_monthly,
    )  # fmt: skip


def fleet_and_tco(
    best: list[PricedRepresentative],
    results: list[EngineResult],
    cfg: PlaybookConfig,
    demand: Demand,
    cold: list[ColdStart],
    facts: dict[str, FamilyFacts],
) -> list[FleetRow]:
    """Per configuration: replicas and GPUs to serve the peak within the SLA, monthly GPU, ops and TCO.

    With a measured SLA capacity (req/s per replica, estimated from every probe of the search): replicas =
    ceil(demand req/s ÷ the capacity's 95% low end), the conservative end, stated in ``sizing_basis``;
    ``replicas_low`` (from the high end) and ``replicas_at_estimate`` beside it. $/M tokens is priced from
    the same capacity (req/s × tokens per request, ``benchmark.sla.representative``): one quantity sizes
    and prices.
    From a grid point: max(ceil(demand tok/s ÷ its tok/s), ceil(p99 concurrency ÷ its concurrency)).
    One replica when no demand is known; None when the representative misses the SLA. Ops = (base
    hours + update hours) × engineer $/h + GPU time of the updates (updates/month × models × cold start).
    """
    by_label = {r.label: r for r in results}
    by_family = {c.family: c for c in cold}
    return [_fleet_row(b, by_label[b.label], cfg, demand, facts, by_family.get(b.family)) for b in best]
