"""Checklist step 6, break-even: the traffic at which a faster-but-harder engine pays for its ops cost.

For two configurations H (more ops cost per month) and E (less), monthly cost at a sustained
output rate T is ``ops + T × g`` where ``g`` = GPU $/month per output tok/s of the tuned point
(GPUs per replica × $/h × 730 ÷ tuned tok/s). H pays off once T ≥ (ops_H − ops_E) ÷ (g_E − g_H);
if H is not cheaper per token it never does. This is the continuous approximation (fractional
GPUs); ``tco_curve`` gives the stepped whole-GPU view for plotting.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from helpers.core.config import PlaybookConfig
from helpers.cost.compute import HOURS_PER_MONTH, fleet_and_tco, traffic_demand
from helpers.run.records import EngineResult


def _usable(results: list[EngineResult], cfg: PlaybookConfig, profile: Any) -> pd.DataFrame:
    """Fleet rows whose tuned point meets the SLA, with their GPU $/month per output tok/s."""
    fleet = fleet_and_tco(results, cfg, profile)
    if fleet.empty:
        return fleet
    fleet = fleet[fleet["meets_sla"].astype(bool)].copy()
    fleet["gpu_usd_month_per_tok_s"] = (
        fleet["gpus_per_replica"] * fleet["price_per_hour"] * HOURS_PER_MONTH / fleet["output_tok_s"]
    )
    return fleet


def break_even(results: list[EngineResult], cfg: PlaybookConfig, profile: Any = None) -> pd.DataFrame:
    """One row per pair (harder = more ops $/month, easier): the sustained traffic where they cost the same.

    ``break_even_output_tok_s`` is NaN when the harder one is not cheaper per token (``verdict``
    says "never"); ``pays_off_now`` compares it with the profiled peak when one is known.
    """
    fleet = _usable(results, cfg, profile)
    demand = traffic_demand(cfg, profile)
    rows = []
    recs = fleet.to_dict("records") if not fleet.empty else []
    for h in recs:
        for e in recs:
            if h["label"] == e["label"] or not h["ops_monthly_usd"] > e["ops_monthly_usd"]:
                continue
            extra_ops = h["ops_monthly_usd"] - e["ops_monthly_usd"]
            gh, ge = h["gpu_usd_month_per_tok_s"], e["gpu_usd_month_per_tok_s"]
            saving = 1.0 - gh / ge
            if gh < ge:
                t = extra_ops / (ge - gh)
                now = None if demand["output_tok_s"] is None else demand["output_tok_s"] >= t
                verdict = f"{h['label']} pays off at ≥ {t:,.0f} output tok/s sustained"
            else:
                t, now = math.nan, False
                verdict = f"never: {h['label']} is not cheaper per token than {e['label']}"
            rows.append(
                {
                    "harder": h["label"],
                    "easier": e["label"],
                    "harder_family": h["family"],
                    "easier_family": e["family"],
                    "extra_ops_usd_month": extra_ops,
                    "gpu_saving_per_token_pct": 100.0 * saving,
                    "break_even_output_tok_s": t,
                    "break_even_mtok_month": t * 3600.0 * HOURS_PER_MONTH / 1e6,
                    "break_even_requests_per_s": t / demand["output_tokens_mean"],
                    "break_even_gpus_easier": t / e["output_tok_s"] * e["gpus_per_replica"],
                    "demand_output_tok_s": demand["output_tok_s"],
                    "pays_off_now": now,
                    "verdict": verdict,
                }
            )
    return pd.DataFrame(rows)


def tco_curve(results: list[EngineResult], cfg: PlaybookConfig, profile: Any = None, steps: int = 60) -> pd.DataFrame:
    """Monthly TCO per configuration over a range of sustained output rates, in whole replicas.

    The range runs to twice the larger of the profiled peak, the finite break-even rates and four
    times the best tuned throughput, so the crossing points are visible.
    """
    fleet = _usable(results, cfg, profile)
    if fleet.empty:
        return pd.DataFrame(columns=["label", "output_tok_s", "replicas", "gpu_monthly_usd", "tco_monthly_usd"])
    be = break_even(results, cfg, profile)
    demand = traffic_demand(cfg, profile)["output_tok_s"] or 0.0
    finite = be["break_even_output_tok_s"].dropna().tolist() if not be.empty else []
    top = 2.0 * max([demand, *finite, 4.0 * float(fleet["output_tok_s"].max())])
    grid = np.linspace(0.0, top, steps + 1)
    rows = []
    for f in fleet.to_dict("records"):
        for t in grid:
            replicas = max(1, math.ceil(t / f["output_tok_s"]))
            gpu = replicas * f["gpus_per_replica"] * f["price_per_hour"] * HOURS_PER_MONTH
            rows.append(
                {
                    "label": f["label"],
                    "output_tok_s": float(t),
                    "replicas": replicas,
                    "gpu_monthly_usd": gpu,
                    "ops_monthly_usd": f["ops_monthly_usd"],
                    "tco_monthly_usd": gpu + f["ops_monthly_usd"],
                }
            )
    return pd.DataFrame(rows)
