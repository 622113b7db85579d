"""Checklist step 7, the scores: every configuration on the tree's four dimensions, its measured cost and SLA share.

The rubric (``tree.FIT``, ``tree.WEIGHTS``) is the tree module's; the cost and SLA share are step 6's fleet rows
as saved. ``rank_candidates`` orders the eligible ones, best first, for ``decision.choice.choose``.
"""

from __future__ import annotations

from collections.abc import Mapping

import pandas as pd

from helpers.benchmark.sla import representative
from helpers.core.config import PlaybookConfig
from helpers.cost.compute import family_of
from helpers.decision.tree import DISPLAY, FIT, UNKNOWN_FIT, WEIGHTS, EngineScore, TreeStep
from helpers.run.records import EngineResult


def _fit(dimension: str, condition: str, family: str) -> float:
    return FIT[dimension][condition].get(family, UNKNOWN_FIT)


def score_engines(
    results: list[EngineResult],
    cfg: PlaybookConfig,
    steps: list[TreeStep],
    fleet: pd.DataFrame,
    failed_gate: Mapping[str, str] | None = None,
) -> list[EngineScore]:
    """Score every configuration (measured ones from ``results``; configured ones when there are none).

    ``failed_gate`` maps the configurations that failed step 5's quality gate to why; they are not eligible.
    """
    failed_gate = failed_gate or {}
    cond = {s.dimension: s.condition for s in steps}
    rows = fleet.set_index("label").to_dict("index") if not fleet.empty else {}
    sized = bool(rows) and all(r["demand_output_tok_s"] or r["demand_concurrency"] for r in rows.values())
    key, basis = (
        ("tco_monthly_usd", "monthly TCO at the profiled peak")
        if sized
        else ("usd_per_mtok_output", "$/M output tokens at the measurement that stands for it")
    )
    any_sla = any(r["meets_sla"] for r in rows.values())
    costs = [r[key] for r in rows.values() if r["meets_sla"] and pd.notna(r[key])]
    best_cost = min(costs) if costs else None
    basis_of = {r.label: representative(r, cfg).basis for r in results}
    items = [(r.label, r.engine, r.status) for r in results] or [
        (e.label, e.engine, "not measured") for e in cfg.engines
    ]
    out = []
    for label, engine, status in items:
        fam = family_of(engine)
        dims = {d: round(_fit(d, cond[d], fam), 2) for d in ("hardware", "stability", "workload", "team")}
        row = rows.get(label)
        why = ""
        if row is None:
            why = "not measured" if status == "not measured" else f"status {status}: {basis_of.get(label, 'no result')}"
        elif status in ("failed", "skipped"):
            why = f"status {status}"
        elif label in failed_gate:
            why = failed_gate[label]
        elif any_sla and not row["meets_sla"]:
            why = "no measured point meets the SLA"
        elif dims["hardware"] == 0.0:
            why = f"{DISPLAY.get(fam, fam)} cannot run on the planned hardware ({cfg.hardware.vendors})"
        value = None if row is None or pd.isna(row[key]) else float(row[key])
        usd = None if row is None or pd.isna(row["usd_per_mtok_output"]) else float(row["usd_per_mtok_output"])
        cost = round(best_cost / value, 2) if value and best_cost and row["meets_sla"] else 0.0
        sla = round(float(row["sla_share"]), 2) if row is not None and "sla_share" in row else 0.0
        total = round(sum(WEIGHTS[d] * v for d, v in dims.items()) + WEIGHTS["cost"] * cost + WEIGHTS["sla"] * sla, 3)
        out.append(
            EngineScore(
                label=label, engine=engine, family=fam, status=status, measured=row is not None,
                eligible=not why, why_not=why, **dims, cost=cost, sla=sla, total=total,
                cost_value=value, usd_per_mtok=usd, cost_basis=basis, sla_share=sla if row is not None else None,
            )
        )  # fmt: skip
    return out


def rank_candidates(scores: list[EngineScore], tree_family: str) -> list[EngineScore]:
    """Order eligible configurations best first.

    Ties are broken by, in turn: the tree's family first, lower cost value, lower $/M output tokens
    (equal fleets at low traffic still differ in throughput), higher SLA share, label.
    """
    inf = float("inf")
    return sorted(
        (s for s in scores if s.eligible),
        key=lambda s: (-s.total, s.family != tree_family, s.cost_value if s.cost_value is not None else inf,
                       s.usd_per_mtok if s.usd_per_mtok is not None else inf, -(s.sla_share or 0.0), s.label),
    )  # fmt: skip
