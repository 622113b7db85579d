"""Checklist step 7, the choice: primary and backup from the scores, and the evidence verdict that can swap them.

``choose`` is where the decision is made (``decision.compute.decide`` calls it and saves the result);
``decision.text`` only words what it chose. A measured difference between the two best configurations
decides; equivalent or not conclusive, the better estimate wins where the tree and the operations cost
do not separate the two (``_better_estimate_wins``).
"""

from __future__ import annotations

from typing import Any

import pandas as pd
from pydantic import BaseModel, ConfigDict, Field

from helpers.core.config import PlaybookConfig
from helpers.decision.departures import Departure, concurrency_evidence, departures
from helpers.decision.evidence import EvidenceVerdict, compare_best, same_standing
from helpers.decision.scores import rank_candidates
from helpers.decision.tree import WEIGHTS, EngineScore, TreeStep, reuse_evidence
from helpers.run.records import EngineResult


class Choice(BaseModel):
    """What step 7 chose: primary and backup (None: nothing eligible), the verdict, and the warnings so far."""

    model_config = ConfigDict(extra="forbid")

    tree_family: str
    primary: EngineScore | None = None
    backup: EngineScore | None = None
    verdict: EvidenceVerdict
    warnings: list[str] = Field(default_factory=list)
    departures: list[Departure] = Field(default_factory=list)


def _pick(scores: list[EngineScore], tree_family: str, warnings: list[str]):
    """Primary and backup scores (backup prefers a different family), or (None, None)."""
    ranked = rank_candidates(scores, tree_family)
    if not ranked:
        return None, None
    primary = ranked[0]
    others = [s for s in ranked[1:] if s.family != primary.family] or ranked[1:]
    if not others:
        warnings.append(f"Only `{primary.label}` is eligible: there is no measured backup.")
    return primary, others[0] if others else None


def _better_estimate_wins(verdict: EvidenceVerdict, primary: str, rows: list[dict[str, Any]]) -> bool:
    """Whether the configuration with the better estimate must be the primary (``decision.evidence``).

    A measured difference decides. Equivalent or not conclusive, the two compared are alike for the tree and
    the operations cost when one engine family has both at the same operations cost: then the better estimate
    wins (never the worse one), and the verdict says so.
    """
    if verdict.faster is None or verdict.slower is None or verdict.faster_mean == verdict.slower_mean:
        return False  # nothing to compare, or no better estimate: the scores (then the labels) decide
    if verdict.decided_by == "measurement":
        return verdict.faster != primary
    if verdict.verdict not in ("equivalent", "not_conclusive") or primary not in (verdict.faster, verdict.slower):
        return False
    rows_by = {r["label"]: r for r in rows}
    if not same_standing(rows_by.get(verdict.faster, {}), rows_by.get(verdict.slower, {})):
        return False
    if verdict.verdict == "equivalent":
        verdict.decided_by = "better estimate"
        verdict.text += (
            f" The tree and the operations cost do not separate them (one engine family, the same operations "
            f"cost): the better estimate, `{verdict.faster}`, is the primary."
        )
    else:
        verdict.text += f" Until it is resolved, the better estimate, `{verdict.faster}`, is the primary."
    return verdict.faster != primary


def choose(
    cfg: PlaybookConfig,
    profile: Any,
    results: list[EngineResult],
    steps: list[TreeStep],
    tree_family: str,
    scores: list[EngineScore],
    fleet: pd.DataFrame,
    be: pd.DataFrame,
    warnings: list[str],
) -> Choice:
    """Pick primary and backup from ``scores``; the verdict of the two best can make the better estimate primary.

    ``warnings`` (the config's) gain the borderline departures from the seed and a missing backup.
    """
    warnings = list(warnings)
    reuse = reuse_evidence(profile, results)[0]
    departed = departures(cfg, steps, WEIGHTS, concurrency_evidence(profile, results), reuse)
    warnings += [f"Borderline: {x.report}; {x.why}." for x in departed if x.borderline]
    primary, backup = _pick(scores, tree_family, warnings)
    eligible = {s.label for s in scores if s.eligible}
    rows = [r for r in fleet.to_dict("records") if r.get("label") in eligible] if not fleet.empty else []
    verdict = compare_best(rows, results, be.to_dict("records") if not be.empty else [], cfg)
    by_label = {s.label: s for s in scores}
    if primary is not None and verdict.faster in by_label and _better_estimate_wins(verdict, primary.label, rows):
        winner = by_label[verdict.faster]
        backup = primary if primary.family != winner.family or backup is None else backup
        primary = winner
    return Choice(tree_family=tree_family, primary=primary, backup=backup, verdict=verdict, warnings=warnings,
                  departures=departed)  # fmt: skip
