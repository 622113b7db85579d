"""Whether the measurements decide: the two cheapest configurations compared with their noise.

The comparison is on output throughput per GPU at each configuration's representative measurement
(its SLA capacity trials, ``helpers.benchmark.sla``): per GPU-hour it is the inverse of $/M tokens at
equal GPU price. The difference's 95% interval comes from the trials (Welch, ``benchmark.stats``):

* interval excludes 0 → the faster one is *measurably* cheaper per token; it decides unless its extra
  operations cost outweighs the saving at the sized demand (the break-even);
* otherwise → a tie within noise (±x%): the seed's tree and the operations cost decide.

A configuration measured once (a grid point) has no interval: its difference cannot be told from
noise, so it never decides alone.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from helpers.benchmark.sla import standing_trials
from helpers.benchmark.stats import compare
from helpers.run.records import EngineResult


class EvidenceVerdict(BaseModel):
    """The comparison of the two best measured configurations, and what it means for the decision."""

    model_config = ConfigDict(extra="forbid")

    faster: str | None = Field(default=None, description="The configuration with more throughput per GPU.")
    slower: str | None = None
    metric: str = "output tok/s per GPU at the SLA capacity"
    faster_mean: float | None = None
    slower_mean: float | None = None
    difference_pct: float | None = Field(default=None, description="(faster − slower) / slower, %.")
    low_pct: float | None = None
    high_pct: float | None = None
    trials: dict[str, int] = Field(default_factory=dict, description="Trials behind each figure.")
    significant: bool = False
    decided_by: Literal["measurement", "tree and operations cost", "nothing measured"] = "nothing measured"
    text: str = ""


def _per_gpu(result: EngineResult, gpus: int) -> list[float]:
    """Output tok/s per GPU of the trials that stand for the configuration (none without trials)."""
    return [p.output_tok_s / gpus for p in standing_trials(result)]


def compare_best(
    candidates: list[dict[str, Any]], results: list[EngineResult], break_even: list[dict[str, Any]]
) -> EvidenceVerdict:
    """Compare the two eligible configurations with the most output per GPU (``candidates``: fleet rows).

    ``break_even`` rows say whether a faster-but-harder configuration pays for its operations at the
    sized demand (``pays_off_now``); a measured winner that does not pay off there does not decide.
    """
    by_label = {r.label: r for r in results}
    rows = [
        c
        for c in candidates
        if c.get("meets_sla") and c.get("output_tok_s") and c.get("gpus_per_replica") and c["label"] in by_label
    ]
    if len(rows) < 2:
        only = rows[0]["label"] if rows else None
        return EvidenceVerdict(
            faster=only,
            decided_by="nothing measured" if not rows else "tree and operations cost",
            text="Fewer than two configurations meet the SLA: there is nothing to compare." if len(rows) < 2 else "",
        )
    rows.sort(key=lambda c: -c["output_tok_s"] / c["gpus_per_replica"])
    a, b = rows[0], rows[1]
    va, vb = (
        _per_gpu(by_label[a["label"]], a["gpus_per_replica"]),
        _per_gpu(by_label[b["label"]], b["gpus_per_replica"]),
    )
    fixed = "fixed" in (a.get("source"), b.get("source"))  # trials at a fixed load (search disabled)
    verdict = EvidenceVerdict(
        metric="output tok/s per GPU at a fixed load (no capacity search)" if fixed else EvidenceVerdict().metric,
        faster=a["label"],
        slower=b["label"],
        faster_mean=a["output_tok_s"] / a["gpus_per_replica"],
        slower_mean=b["output_tok_s"] / b["gpus_per_replica"],
        trials={a["label"]: len(va), b["label"]: len(vb)},
    )
    if len(va) < 2 or len(vb) < 2:
        verdict.decided_by = "tree and operations cost"
        verdict.difference_pct = 100 * (verdict.faster_mean / verdict.slower_mean - 1)
        verdict.text = (
            f"`{a['label']}` and `{b['label']}` differ by {verdict.difference_pct:+.1f}% in output per GPU, but "
            "from single measurements with no interval: not a measured difference; the tree and operations cost "
            "decided."
        )
        return verdict
    c = compare(va, vb)
    verdict.difference_pct, verdict.low_pct, verdict.high_pct = c.rel_diff_pct, c.rel_low_pct, c.rel_high_pct
    verdict.significant = c.significant and (c.rel_low_pct or 0) > 0
    n = f"{len(va)} and {len(vb)} trials"
    if not verdict.significant:
        hw = max(abs(c.rel_low_pct or 0), abs(c.rel_high_pct or 0))
        verdict.decided_by = "tree and operations cost"
        verdict.text = (
            f"`{a['label']}` and `{b['label']}` are a tie within noise (±{hw:.1f}%, {n}): output per GPU "
            f"{c.rel_diff_pct:+.1f}% [{c.rel_low_pct:+.1f}%, {c.rel_high_pct:+.1f}%]; the seed's tree and the "
            "operations cost decided."
        )
        return verdict
    pays = next(
        (x.get("pays_off_now") for x in break_even if x.get("harder") == a["label"] and x.get("easier") == b["label"]),
        None,
    )
    if pays is False:
        verdict.decided_by = "tree and operations cost"
        verdict.text = (
            f"`{a['label']}` serves {c.rel_diff_pct:+.1f}% [{c.rel_low_pct:+.1f}%, {c.rel_high_pct:+.1f}%] more "
            f"per GPU ({n}), a measured difference, but at the sized demand its extra operations cost outweighs "
            "the saving (break-even): the tree and operations cost decided."
        )
        return verdict
    verdict.decided_by = "measurement"
    where = "their trials' loads, not searched SLA capacities" if fixed else "their SLA capacities"
    verdict.text = (
        f"`{a['label']}` serves {c.rel_diff_pct:+.1f}% [{c.rel_low_pct:+.1f}%, {c.rel_high_pct:+.1f}%] more "
        f"output per GPU than `{b['label']}` at {where} ({n}, 95% interval): the measurement decides."
    )
    return verdict
