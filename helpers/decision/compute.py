"""Checklist step 7, compute: the tree, the scores and the written answer from the measured results."""

from __future__ import annotations

from typing import Any

import pandas as pd

from helpers.benchmark.quality_phase import QualityGate
from helpers.benchmark.sla import settle_estimates
from helpers.core.config import PlaybookConfig
from helpers.cost.break_even import break_even
from helpers.cost.compute import fleet_and_tco
from helpers.cost.records import CostAnalysis, frame
from helpers.decision.text import build_answer
from helpers.decision.tree import DecisionResult, run_tree, score_engines, tree_verdict
from helpers.run.records import EngineResult


def decide(
    results: list[EngineResult],
    cfg: PlaybookConfig,
    profile: Any = None,
    cost: CostAnalysis | None = None,
    quality: QualityGate | None = None,
) -> DecisionResult:
    """Run the tree, score the configurations, pick primary and backup, and write the answer.

    The fleet and break-even come from step 6's ``cost`` record when given (the notebook path), so the
    decision quotes exactly the numbers step 6 shows; without it (tests, tools) they are computed here
    by the same functions. A configuration that failed step 5's quality gate (``quality``) is not eligible.
    """
    settle_estimates(results, cfg)
    steps = run_tree(cfg, profile, results)
    family, end = tree_verdict(steps)
    if cost is not None:
        fleet, be = frame(cost.fleet), frame(cost.break_even)
    else:
        fleet = fleet_and_tco(results, cfg, profile) if results else pd.DataFrame()
        be = break_even(results, cfg, profile) if results else pd.DataFrame()
    scores = score_engines(results, cfg, steps, fleet, quality.failed() if quality is not None else None)
    return build_answer(cfg, profile, results, steps, family, end, scores, fleet, be)
