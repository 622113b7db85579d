"""Checklist step 6, break-even: the traffic at which a faster-but-harder engine pays for its ops cost.

For two configurations H (more ops cost per month) and E (less), monthly cost at a sustained
output rate T is ``ops + T × g`` where ``g`` = GPU $/month per output tok/s of the tuned point
(GPUs per replica × $/h × 730 ÷ tuned tok/s). H pays off once T ≥ (ops_H − ops_E) ÷ (g_E − g_H);
if H is not cheaper per token it never does. This is the continuous approximation (fractional
GPUs); ``tco_curve`` gives the stepped whole-GPU view for plotting. Both read step 6's fleet rows.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from helpers.cost.compute import HOURS_PER_MONTH
from helpers.cost.records import BreakEvenRow, Demand, FleetRow


def _usable(fleet: list[FleetRow]) -> list[tuple[FleetRow, float]]:
    """Fleet rows whose representative meets the SLA, with their GPU $/month per output tok/s."""
    out = []
    for f in fleet:
        if f.meets_sla and f.output_tok_s:
            gpu_per = (f.gpus_per_replica or 0) * (f.price_per_hour or 0.0) * HOURS_PER_MONTH / f.output_tok_s
            out.append((f, gpu_per))
    return out


def _ops(f: FleetRow) -> float:
    """Monthly operations cost (NaN when unknown)."""
    return math.nan if f.ops_monthly_usd is None else f.ops_monthly_usd


def _none(x: float) -> float | None:
    return None if math.isnan(x) else x


def break_even(fleet: list[FleetRow], demand: Demand) -> list[BreakEvenRow]:
    """One row per pair (harder = more ops $/month, easier): the sustained traffic where they cost the same.

    ``break_even_output_tok_s`` is None when the harder one is not cheaper per token (``verdict``
    says "never"); ``pays_off_now`` compares it with the profiled peak when one is known.
    """
    usable = _usable(fleet)
    rows = []
    for h, gh in usable:
        for e, ge in usable:
            if h.label == e.label or not _ops(h) > _ops(e):
                continue
            extra_ops = _ops(h) - _ops(e)
            if gh < ge:
                t = extra_ops / (ge - gh)
                now = None if demand.output_tok_s is None else demand.output_tok_s >= t
                verdict = f"{h.label} pays off at ≥ {t:,.0f} output tok/s sustained"
            else:
                t, now = math.nan, False
                verdict = f"never: {h.label} is not cheaper per token than {e.label}"
            rows.append(
                BreakEvenRow(
                    harder=h.label, easier=e.label, harder_family=h.family, easier_family=e.family,
                    extra_ops_usd_month=_none(extra_ops), gpu_saving_per_token_pct=100.0 * (1.0 - gh / ge),
                    break_even_output_tok_s=_none(t), break_even_mtok_month=_none(t * 3600.0 * HOURS_PER_MONTH / 1e6),
                    break_even_requests_per_s=_none(t / demand.output_tokens_mean),
                    break_even_gpus_easier=_none(t / (e.output_tok_s or math.nan) * (e.gpus_per_replica or 0)),
                    demand_output_tok_s=demand.output_tok_s, pays_off_now=now, verdict=verdict,
                )
            )  # fmt: skip
    return rows


def tco_curve(fleet: list[FleetRow], break_evens: list[BreakEvenRow], demand: Demand, steps: int = 60) -> pd.DataFrame:
    """Monthly TCO per configuration over a range of sustained output rates, in whole replicas (for the plot).

    The range runs to twice the larger of the profiled peak, the finite break-even rates and four
    times the best tuned throughput, so the crossing points are visible.
    """
    usable = [f for f, _ in _usable(fleet)]
    if not usable:
        return pd.DataFrame(columns=["label", "output_tok_s", "replicas", "gpu_monthly_usd", "tco_monthly_usd"])
    finite = [b.break_even_output_tok_s for b in break_evens if b.break_even_output_tok_s is not None]
    top = 2.0 * max([demand.output_tok_s or 0.0, *finite, 4.0 * max(f.output_tok_s or 0.0 for f in usable)])
    rows = []
    for f in usable:
        for t in np.linspace(0.0, top, steps + 1):
            replicas = max(1, math.ceil(t / (f.output_tok_s or math.inf)))
            gpu = replicas * (f.gpus_per_replica or 0) * (f.price_per_hour or 0.0) * HOURS_PER_MONTH
            rows.append({"label": f.label, "output_tok_s": float(t), "replicas": replicas, "gpu_monthly_usd": gpu,
                         "ops_monthly_usd": _ops(f), "tco_monthly_usd": gpu + _ops(f)})  # fmt: skip
    return pd.DataFrame(rows)
