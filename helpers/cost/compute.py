"""Checklist step 6, cost: $/Mtok per measured point and per configuration's representative; the demand.

The per-token cost is seed 003 §4.4's formula: GPU $/hour ÷ (tok/s × 3600) × 1,000,000. Prices
come from the config (``cost.gpu_price_per_hour``) or the sourced table ``data/gpu_prices.yaml``.
The fleet and the operations cost are ``cost.fleet``'s; the whole record is ``cost.analysis.analyse``'s.
Everything here is a pure function of results, config and profile, returning typed rows.
"""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

from helpers.benchmark.sla import grid_points, meets_sla, sla_share
from helpers.core.config import PlaybookConfig
from helpers.core.errors import ConfigError
from helpers.core.text import knob_text
from helpers.cost.records import PricedPoint, PricedRepresentative
from helpers.engines import ENGINES
from helpers.model.gpu_specs import gpu_spec
from helpers.model.reference_data import GPU_PRICES_FILE, load_gpu_prices
from helpers.run.records import EngineResult, Figure, Point, Representative
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


def cost_table(results: list[EngineResult], cfg: PlaybookConfig) -> list[PricedPoint]:
    """One row per measured point: price, $/M output tokens and $/M total tokens, SLA flag.

    A configuration without points (failed, skipped) keeps one row with its status and no numbers.
    """
    prices = load_gpu_prices() if cfg.cost.gpu_price_per_hour is None else {}
    rows: list[PricedPoint] = []
    for r in results:
        price, source, priced_as = price_for(r.engine, cfg, prices)
        base = {"label": r.label, "engine": r.engine, "family": family_of(r.engine), "status": r.status,
                "price_per_hour": price, "priced_as": priced_as, "price_source": source}  # fmt: skip
        if not r.points:
            rows.append(PricedPoint(**base))
            continue
        for p in r.points:
            gpus = _gpus_per_replica(p, r.label, cfg)
            hourly = price * gpus
            rows.append(
                PricedPoint(
                    **base, phase=p.phase, concurrency=p.concurrency, knobs=knob_text(p.knobs, ","),
                    gpus_per_replica=gpus, output_tok_s=_num(p.output_tok_s), total_tok_s=_num(p.total_tok_s),
                    ttft_ms_p95=_num(p.ttft_ms_p95), within_sla=within_sla(p, cfg), usd_per_hour=hourly,
                    usd_per_mtok_output=_num(cost_per_million(hourly, p.output_tok_s)),
                    usd_per_mtok_total=_num(cost_per_million(hourly, p.total_tok_s)),
                )
            )  # fmt: skip
    return rows


def best_points(
    results: list[EngineResult], cfg: PlaybookConfig, reps: dict[str, Representative]
) -> list[PricedRepresentative]:
    """Per configuration with points: its representative measurement (``reps``, from ``benchmark.sla``), priced.

    Adds ``points`` (grid points measured), ``sla_share`` (share of them within the SLA), ``meets_sla``
    (whether the representative meets it), ``representative`` (its identity key) and the per-GPU figures
    (which the row fills from its own figures: ``records.per_gpu``, the one definition).
    """
    prices = load_gpu_prices() if cfg.cost.gpu_price_per_hour is None else {}
    rows = []
    for r in results:
        rep = reps[r.label]
        if rep.source == "none":
            continue
        price, source, priced_as = price_for(r.engine, cfg, prices)
        gpus = int(rep.knobs.get("tensor_parallel") or _gpus_per_replica(None, r.label, cfg))
        hourly = price * gpus
        out = rep.output_tok_s.mean if rep.output_tok_s else None
        total = rep.total_tok_s.mean if rep.total_tok_s else None
        rows.append(
            PricedRepresentative(
                label=r.label, engine=r.engine, family=family_of(r.engine), status=r.status,
                phase=rep.phase, concurrency=rep.concurrency, knobs=knob_text(rep.knobs, ","),
                gpus_per_replica=gpus, price_per_hour=price, priced_as=priced_as, price_source=source,
                output_tok_s=out, total_tok_s=total,
                ttft_ms_p95=rep.ttft_ms_p95.mean if rep.ttft_ms_p95 else None, within_sla=rep.meets_sla,
                usd_per_hour=hourly, usd_per_mtok_output=_num(cost_per_million(hourly, out or math.nan)),
                usd_per_mtok_total=_num(cost_per_million(hourly, total or math.nan)), points=len(grid_points(r)),
                sla_share=sla_share(r, cfg) or 0.0, meets_sla=rep.meets_sla, representative=rep.key,
                source=rep.source, request_rate=_mean(rep.request_rate), lower_bound=rep.lower_bound,
                request_rate_low=_end(rep.request_rate, "low"), request_rate_high=_end(rep.request_rate, "high"),
                output_tok_s_low=_end(rep.output_tok_s, "low"), output_tok_s_high=_end(rep.output_tok_s, "high"),
            )
        )  # fmt: skip
    return rows


def _mean(fig: Figure | None) -> float | None:
    """A figure's mean (None where unknown)."""
    return fig.mean if fig else None


def _end(fig: Figure | None, end: str) -> float | None:
    """A figure's ``low`` or ``high`` end (None where unknown)."""
    return getattr(fig, end) if fig else None


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
    """A finite number, or None (NaN, pandas' NA and None are missing)."""
    return float(v) if v is not None and not pd.isna(v) else None
