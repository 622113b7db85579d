"""Checklist step 7, compute: the tree, the scores, the choice and the written answer from the saved records.

The fleet and the break-even are step 6's record (``cost.json``), read as saved: nothing is priced again
here, and a run with measured points but no cost record is an error naming step 6.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from helpers.benchmark.quality_phase import QualityGate
from helpers.benchmark.sla import settle_estimates
from helpers.core.config import PlaybookConfig
from helpers.cost.records import CostAnalysis, frame
from helpers.decision.choice import choose
from helpers.decision.scores import score_engines
from helpers.decision.text import build_answer, config_warnings
from helpers.decision.tree import DecisionResult, run_tree, tree_verdict
from helpers.run.reader import MissingRecordError
from helpers.run.records import EngineResult


def decide(
    results: list[EngineResult],
    cfg: PlaybookConfig,
    profile: Any = None,
    cost: CostAnalysis | None = None,
    quality: QualityGate | None = None,
) -> DecisionResult:
    """Run the tree, score the configurations, choose primary and backup, and word the answer.

    ``cost`` is step 6's record (``cost.analysis.analyse``, saved as ``cost.json``); the decision quotes
    exactly its numbers. Without it, a run that measured something raises ``MissingRecordError``. A
    configuration that failed step 5's quality gate (``quality``) is not eligible.
    """
    if cost is None and any(r.points for r in results):
        raise MissingRecordError(CostAnalysis.artifact, "step 7's decision")
    settle_estimates(results, cfg)
    steps = run_tree(cfg, profile, results)
    family, end = tree_verdict(steps)
    fleet = frame(cost.fleet) if cost is not None else pd.DataFrame()
    be = frame(cost.break_even) if cost is not None else pd.DataFrame()
    scores = score_engines(results, cfg, steps, fleet, quality.failed() if quality is not None else None)
    warnings = config_warnings(cfg, profile, family, results)
    choice = choose(cfg, profile, results, steps, family, scores, fleet, be, warnings)
    return build_answer(cfg, profile, steps, end, scores, fleet, be, choice)
