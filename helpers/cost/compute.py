"""Checklist step 6, cost: $/Mtok per measured point, fleet size at the profiled peak, monthly TCO.

The per-token cost is seed 003 §4.4's formula: GPU $/hour ÷ (tok/s × 3600) × 1,000,000. Prices
come from the config (``cost.gpu_price_per_hour``) or the sourced table ``data/gpu_prices.yaml``.
Fleet sizing uses each configuration's best point within the SLA ("tuned throughput"). Operations
cost = engineer hours (config, or the family defaults in ``data/engine_facts.yaml``, which are
assumptions) plus the time spent rebuilding/restarting on every model update (measured cold start
when the run has one). Everything here is a pure function of results, config and profile.
"""

from __future__ import annotations

import math
import statistics
from typing import Any

import pandas as pd

from helpers.benchmark.sla import grid_points, meets_sla, representative, settle_estimates, sla_share
from helpers.core.config import PlaybookConfig
from helpers.core.errors import ConfigError
from helpers.core.text import knob_text
from helpers.engines import ENGINES
from helpers.model.gpu_specs import gpu_spec
from helpers.model.reference_data import GPU_PRICES_FILE, FamilyFacts, load_engine_facts, load_gpu_prices
from helpers.run.records import EngineResult, Figure, Point
from helpers.workload.facts import facts_of

HOURS_PER_MONTH = 730.0  # 8,760 h / 12
CPU_PRICE_KEY = "cpu"


def cost_per_million(price_per_hour: float, tok_s: float) -> float:
    """Seed 003 §4.4: $/hour ÷ (tok/s × 3600) × 1,000,000; NaN when there is no throughput."""
    if not tok_s or tok_s <= 0 or math.isnan(tok_s):
        return math.nan
    return price_per_hour / (tok_s * 3600.0) * 1_000_000.0


def family_of(engine: str) -> str:
    """Return the decision-tree family of an engine adapter name (vllm-cpu → vllm); '' when unknown."""
    adapter = ENGINES.get(engine)
    return adapter.family if adapter else ""


def price_for(engine: str, cfg: PlaybookConfig, prices: dict | None = None) -> tuple[float, str, str]:
    """(price per accelerator-hour, its source, what is priced) for a configuration of ``engine``.

    The config's ``cost.gpu_price_per_hour`` wins; a CPU engine is priced with the ``cpu`` entry;
    otherwise ``cost.gpu`` is looked up in the price table.
    """
    if cfg.cost.gpu_price_per_hour is not None:
        return cfg.cost.gpu_price_per_hour, "config cost.gpu_price_per_hour", cfg.cost.gpu
    prices = load_gpu_prices() if prices is None else prices
    adapter = ENGINES.get(engine)
    key = CPU_PRICE_KEY if adapter is not None and adapter.runs_on_cpu else cfg.cost.gpu
    if key not in prices:  # accept an alias or NVML name from the GPU specs table
        spec = gpu_spec(key)
        key = spec.name if spec is not None else key
    if key not in prices:
        raise ConfigError(
            f"cost.gpu: {key!r} is not in {GPU_PRICES_FILE} (known: {', '.join(sorted(prices))}); "
            "add it there with its source, or set cost.gpu_price_per_hour"
        )
    p = prices[key]
    return p.price_per_hour, f"{p.provider} {p.kind}, {p.date}: {p.source}", key


def _gpus_per_replica(point: Point | None, label: str, cfg: PlaybookConfig) -> int:
    """Accelerators one replica uses: the point's tensor-parallel knob, else the config's, else 1."""
    if point is not None and point.knobs.get("tensor_parallel"):
        return int(point.knobs["tensor_parallel"])
    for spec in cfg.engines:
        if spec.label == label:
            return spec.knobs.tensor_parallel
    return 1


def within_sla(point: Point, cfg: PlaybookConfig) -> bool:
    """Whether ``point`` meets the run's SLA (the one definition: ``helpers.benchmark.sla.meets_sla``)."""
    return meets_sla(point, cfg.sla)


_COST_COLUMNS = [
    "label", "engine", "family", "status", "phase", "concurrency", "knobs", "gpus_per_replica",
    "price_per_hour", "priced_as", "price_source", "output_tok_s", "total_tok_s", "ttft_ms_p95",
    "within_sla", "usd_per_hour", "usd_per_mtok_output", "usd_per_mtok_total",
]  # fmt: skip


def cost_table(results: list[EngineResult], cfg: PlaybookConfig) -> pd.DataFrame:
    """One row per measured point: price, $/M output tokens and $/M total tokens, SLA flag.

    A configuration without points (failed, skipped) keeps one row with its status and no numbers.
    """
    prices = load_gpu_prices() if cfg.cost.gpu_price_per_hour is None else {}
    rows: list[dict[str, Any]] = []
    for r in settle_estimates(results, cfg):
        price, source, priced_as = price_for(r.engine, cfg, prices)
        base = {"label": r.label, "engine": r.engine, "family": family_of(r.engine), "status": r.status}
        if not r.points:
            rows.append({**base, "price_per_hour": price, "priced_as": priced_as, "price_source": source})
            continue
        for p in r.points:
            gpus = _gpus_per_replica(p, r.label, cfg)
            hourly = price * gpus
            rows.append(
                {
                    **base,
                    "phase": p.phase,
                    "concurrency": p.concurrency,
                    "knobs": knob_text(p.knobs, ","),
                    "gpus_per_replica": gpus,
                    "price_per_hour": price,
                    "priced_as": priced_as,
                    "price_source": source,
                    "output_tok_s": p.output_tok_s,
                    "total_tok_s": p.total_tok_s,
                    "ttft_ms_p95": p.ttft_ms_p95,
                    "within_sla": within_sla(p, cfg),
                    "usd_per_hour": hourly,
                    "usd_per_mtok_output": cost_per_million(hourly, p.output_tok_s),
                    "usd_per_mtok_total": cost_per_million(hourly, p.total_tok_s),
                }
            )
    df = pd.DataFrame(rows, columns=_COST_COLUMNS)
    for col in ("concurrency", "gpus_per_replica"):
        df[col] = df[col].astype("Int64")
    return df


def best_points(results: list[EngineResult], cfg: PlaybookConfig) -> pd.DataFrame:
    """Per configuration with points: its representative measurement (``helpers.benchmark.sla``), priced.

    Columns add ``points`` (grid points measured), ``sla_share`` (share of them within the SLA),
    ``meets_sla`` (whether the representative meets it) and ``representative`` (its identity key).
    """
    prices = load_gpu_prices() if cfg.cost.gpu_price_per_hour is None else {}
    rows = []
    for r in results:
        rep = representative(r, cfg)
        if rep.source == "none":
            continue
        price, source, priced_as = price_for(r.engine, cfg, prices)
        gpus = int(rep.knobs.get("tensor_parallel") or _gpus_per_replica(None, r.label, cfg))
        hourly = price * gpus
        out, total = (
            rep.output_tok_s.mean if rep.output_tok_s else math.nan,
            rep.total_tok_s.mean if rep.total_tok_s else math.nan,
        )
        rows.append(
            {
                "label": r.label, "engine": r.engine, "family": family_of(r.engine), "status": r.status,
                "phase": rep.phase, "concurrency": rep.concurrency, "knobs": knob_text(rep.knobs, ","),
                "gpus_per_replica": gpus, "price_per_hour": price, "priced_as": priced_as, "price_source": source,
                "output_tok_s": out, "total_tok_s": total,
                "ttft_ms_p95": rep.ttft_ms_p95.mean if rep.ttft_ms_p95 else None, "within_sla": rep.meets_sla,
                "usd_per_hour": hourly, "usd_per_mtok_output": cost_per_million(hourly, out),
                "usd_per_mtok_total": cost_per_million(hourly, total), "points": len(grid_points(r)),
                "sla_share": sla_share(r, cfg) or 0.0, "meets_sla": rep.meets_sla, "representative": rep.key,
                "source": rep.source,
                **_bounds("request_rate", rep.request_rate), **_bounds("output_tok_s", rep.output_tok_s, mean=False),
            }
        )  # fmt: skip
    extra = ["points", "sla_share", "meets_sla", "representative", "source", "request_rate", "request_rate_low",
             "request_rate_high", "output_tok_s_low", "output_tok_s_high"]  # fmt: skip
    return pd.DataFrame(rows, columns=[*_COST_COLUMNS, *extra])


def _bounds(name: str, fig: Figure | None, mean: bool = True) -> dict[str, float | None]:
    """``name`` (the mean, when asked), ``name_low`` and ``name_high`` of a figure (None where unknown)."""
    out = {f"{name}_low": fig.low if fig else None, f"{name}_high": fig.high if fig else None}
    return {name: fig.mean if fig else None, **out} if mean else out


def traffic_demand(cfg: PlaybookConfig, profile: Any) -> dict[str, Any]:
    """Return the peak to size for, and where it comes from.

    The config's ``workload.peak_requests_per_s`` when given; else the peak measured on a real trace in
    step 1; never the peak of the synthetic stand-in sample (that would be an artefact of its random
    arrivals). Output tokens per request: the trace's mean when measured, else ``workload.output_tokens``.
    The p99 concurrency is used only when measured on a real trace.
    """
    f = facts_of(profile)
    out_mean = (f.output_tokens_mean if f.measured_trace else None) or cfg.workload.output_tokens
    if cfg.workload.peak_requests_per_s:
        rps, src = cfg.workload.peak_requests_per_s, "config workload.peak_requests_per_s"
    elif f.measured_trace and f.peak_requests_per_s:
        rps, src = f.peak_requests_per_s, f"peak measured on the trace ({f.source})"
    else:
        rps, src = None, ""
    conc = f.concurrency_p99 if f.measured_trace else None
    parts = []
    if rps:
        parts.append(f"peak {rps:g} req/s ({src}) × {out_mean:g} output tokens")
    if conc:
        parts.append(f"p99 concurrency {conc:g} (measured on the trace)")
    return {
        "output_tok_s": float(rps * out_mean) if rps else None,
        "concurrency": float(conc) if conc else None,
        "requests_per_s": float(rps) if rps else None,
        "output_tokens_mean": float(out_mean),
        "source": src or ("trace p99 concurrency" if conc else "none"),
        "basis": "; ".join(parts) or "no peak traffic given (workload.peak_requests_per_s) or measured: one replica",
    }


def _num(v: Any) -> float | None:
    """A finite number, or None (NaN and pandas' NA are missing)."""
    return float(v) if v is not None and not pd.isna(v) else None


def _ops_hours(label: str, engine: str, family: str, cfg: PlaybookConfig, facts: dict[str, FamilyFacts]):
    """Return base engineer hours/month: config by label, engine or family; else the family assumption."""
    for key in (label, engine, family):
        if key and key in cfg.cost.ops_hours_per_month:
            return cfg.cost.ops_hours_per_month[key], f"config cost.ops_hours_per_month[{key}]"
    if family in facts:
        f = facts[family].ops_hours_per_month
        return f.hours, f"assumption (engine_facts.yaml {family}): {f.basis}"
    return math.nan, f"unknown: engine family of {engine!r} has no default; set cost.ops_hours_per_month"


def _build_seconds(result: EngineResult, family: str, facts: dict[str, FamilyFacts], measured: dict[str, float]):
    """Restart/rebuild time per model update: the family's measured cold start, else the seed default.

    A model update restarts the engine whatever its knobs, so configurations of one family share the
    median of their measured cold starts (start-up noise between them is not an operations cost).
    """
    if family in measured:
        return measured[family], "measured cold start (this run; median over the engine's configurations)"
    if result.ready_s is not None:
        return result.ready_s, "measured launch-to-healthy (this run)"
    if family in facts:
        c = facts[family].cold_start
        return c.seconds, f"default: {c.what} ({c.source}, {c.date})"
    return 0.0, "unknown (no measurement, no default)"


def _measured_cold_starts(results: list[EngineResult]) -> dict[str, float]:
    """Median measured cold start per engine family."""
    by_family: dict[str, list[float]] = {}
    for r in results:
        if r.cold_start_s is not None:
            by_family.setdefault(family_of(r.engine), []).append(r.cold_start_s)
    return {f: statistics.median(v) for f, v in by_family.items()}


def fleet_and_tco(results: list[EngineResult], cfg: PlaybookConfig, profile: Any) -> pd.DataFrame:
    """Per configuration: replicas and GPUs to serve the peak within the SLA, monthly GPU, ops and TCO.

    With a measured SLA capacity (req/s per replica, estimated from every probe of the search): replicas =
    ceil(demand req/s ÷ the capacity's 95% low end), the conservative end, stated in ``sizing_basis``;
    ``replicas_low`` (from the high end) and ``replicas_at_estimate`` beside it. $/M tokens is priced from
    the same capacity (req/s × tokens per request, ``benchmark.sla.representative``): one quantity sizes
    and prices.
    From a grid point: max(ceil(demand tok/s ÷ its tok/s), ceil(p99 concurrency ÷ its concurrency)).
    One replica when no demand is known; None when the representative misses the SLA. Ops = (base
    hours + update hours) × engineer $/h + GPU time of the updates (updates/month × models × build time).
    """
    facts = load_engine_facts()
    demand = traffic_demand(cfg, profile)
    by_label = {r.label: r for r in settle_estimates(results, cfg)}
    rebuilds = cfg.cadence.updates_per_month * cfg.cadence.concurrent_models
    cold = _measured_cold_starts(results)
    rows = []
    for _, b in best_points(results, cfg).iterrows():
        r = by_label[b["label"]]
        family = b["family"]
        needs, low, high, estimate, sized_on = [], None, None, None, ""
        by_rate = b["source"] == "capacity" and _num(b["request_rate"])
        if by_rate and demand["requests_per_s"]:
            rps = demand["requests_per_s"]
            hi, lo, mean = _num(b["request_rate_high"]), _num(b["request_rate_low"]), float(b["request_rate"])
            conservative = lo if lo and lo > 0 else mean
            needs.append(math.ceil(rps / conservative))
            estimate = math.ceil(rps / mean)
            low = math.ceil(rps / hi) if hi else None
            high = math.ceil(rps / lo) if lo and lo > 0 else None
            sized_on = (
                f"sized on the SLA capacity's conservative end, {conservative:.3g} req/s per replica (95% low; "
                f"{estimate} replica(s) at the estimate {mean:.3g})"
                if lo and lo > 0
                else f"sized on the SLA capacity, {mean:.3g} req/s per replica (no interval)"
            )
        elif not by_rate:
            if demand["output_tok_s"]:
                needs.append(math.ceil(demand["output_tok_s"] / b["output_tok_s"]))
            if demand["concurrency"] and _num(b["concurrency"]):
                needs.append(math.ceil(demand["concurrency"] / b["concurrency"]))
        replicas = (max(needs) if needs else 1) if b["meets_sla"] else None
        gpus = None if replicas is None else replicas * b["gpus_per_replica"]
        gpu_monthly = math.nan if gpus is None else gpus * b["price_per_hour"] * HOURS_PER_MONTH
        build_s, build_src = _build_seconds(r, family, facts, cold)
        build_h = rebuilds * build_s / 3600.0
        base_h, ops_src = _ops_hours(r.label, r.engine, family, cfg, facts)
        ops_h = base_h + build_h
        ops_monthly = ops_h * cfg.cost.engineer_cost_per_hour + build_h * b["gpus_per_replica"] * b["price_per_hour"]
        rows.append(
            {
                "label": r.label,
                "engine": r.engine,
                "family": family,
                "status": r.status,
                "meets_sla": b["meets_sla"],
                "representative": b["representative"],
                "source": b["source"],
                "request_rate": _num(b["request_rate"]),
                "demand_requests_per_s": demand["requests_per_s"],
                "replicas_low": low if replicas is not None else None,
                "replicas_high": high if replicas is not None else None,
                "replicas_at_estimate": estimate if replicas is not None else None,
                "concurrency": b["concurrency"],
                "output_tok_s": b["output_tok_s"],
                "ttft_ms_p95": b["ttft_ms_p95"],
                "sla_share": b["sla_share"],
                "priced_as": b["priced_as"],
                "usd_per_mtok_output": b["usd_per_mtok_output"],
                "gpus_per_replica": b["gpus_per_replica"],
                "price_per_hour": b["price_per_hour"],
                "demand_output_tok_s": demand["output_tok_s"],
                "demand_concurrency": demand["concurrency"],
                "sizing_basis": "; ".join(x for x in (demand["basis"], sized_on) if x)
                if b["meets_sla"]
                else "no measured point meets the SLA",
                "replicas": replicas,
                "gpus": gpus,
                "gpu_monthly_usd": gpu_monthly,
                "build_s": build_s,
                "build_source": build_src,
                "rebuilds_per_month": rebuilds,
                "base_ops_hours": base_h,
                "ops_hours_source": ops_src,
                "ops_hours_per_month": ops_h,
                "ops_monthly_usd": ops_monthly,
                "tco_monthly_usd": gpu_monthly + ops_monthly,
            }
        )
    df = pd.DataFrame(rows)
    for col in ("replicas", "gpus"):
        if col in df:
            df[col] = df[col].astype("Int64")
    return df
