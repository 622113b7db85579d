"""Checklist step 7, compute: the tree, the scores and the written answer from the measured results."""

from __future__ import annotations

import pandas as pd

from helpers.core.config import PlaybookConfig
from helpers.cost.break_even import break_even
from helpers.cost.compute import fleet_and_tco
from helpers.decision.text import build_answer
from helpers.decision.tree import DecisionResult, run_tree, score_engines, tree_verdict
from helpers.run.records import EngineResult


def decide(results: list[EngineResult], cfg: PlaybookConfig, profile: dict | None = None) -> DecisionResult:
    """Run the tree, score the configurations, pick primary and backup, and write the answer."""
    steps = run_tree(cfg, profile)
    family, end = tree_verdict(steps)
    fleet = fleet_and_tco(results, cfg, profile) if results else pd.DataFrame()
    be = break_even(results, cfg, profile) if results else pd.DataFrame()
    scores = score_engines(results, cfg, steps, fleet)
    return build_answer(cfg, profile or {}, results, steps, family, end, scores, fleet, be)
