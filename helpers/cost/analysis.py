"""Checklist step 6 as one function: ``analyse`` prices the run and returns its record, ``CostAnalysis``.

Each configuration's representative (``helpers.benchmark.sla.representatives``) is taken once, here, and
everything the record holds is keyed by it: the priced representative (``best``), the fleet and TCO
(``fleet``), the break-even pairs and each family's cold start. Later steps read the saved record;
none of them prices again.
"""

from __future__ import annotations

from typing import Any

from helpers.benchmark.sla import representatives, settle_estimates
from helpers.core.config import PlaybookConfig
from helpers.cost.break_even import break_even
from helpers.cost.compute import best_points, cost_table, traffic_demand
from helpers.cost.fleet import cold_starts, fleet_and_tco
from helpers.cost.records import CostAnalysis, Demand
from helpers.model.reference_data import load_engine_facts
from helpers.run.records import EngineResult


def analyse(results: list[EngineResult], cfg: PlaybookConfig, profile: Any = None) -> CostAnalysis | None:
    """Step 6's record from step 5's results, the config and step 1's profile; None when nothing was measured."""
    if not any(r.points for r in results):
        return None
    results = settle_estimates(results, cfg)
    reps = representatives(results, cfg)
    demand = Demand.model_validate(traffic_demand(cfg, profile))
    facts = load_engine_facts()
    best = best_points(results, cfg, reps)
    cold = cold_starts(results, facts)
    fleet = fleet_and_tco(best, results, cfg, demand, cold, facts)
    return CostAnalysis(
        points=cost_table(results, cfg),
        best=best,
        fleet=fleet,
        break_even=break_even(fleet, demand),
        demand=demand,
        representatives=[reps[r.label] for r in results],
        cold_starts=cold,
    )
