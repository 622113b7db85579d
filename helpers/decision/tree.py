"""Checklist step 7, decision: seed 003 §3.5's tree step by step, a score per configuration, the verdict.

The tree reads the config answers (hardware, cadence, team) and the workload profile's MEASURED
prefix-reuse ratio. Each measured configuration then gets a score on the tree's four dimensions
(seed 003 §7.3 step 7, rubric ``FIT``) plus measured cost and SLA compliance (``WEIGHTS``), so that
measurements can overrule the tree; ``DecisionResult.overruled`` and a reason say so when they do.
Primary and backup are configuration labels whenever measurements exist. The sentences and the
three-phase plan are written by ``helpers.decision.text``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

import pandas as pd
from pydantic import BaseModel, ConfigDict, Field

from helpers.benchmark.sla import representative
from helpers.core.config import PlaybookConfig
from helpers.cost.compute import family_of
from helpers.decision.departures import Departure, concurrency_evidence
from helpers.decision.evidence import EvidenceVerdict
from helpers.environment.team import BIG_TEAM_ABOVE, SMALL_TEAM_BELOW, team_leaning, team_size_class
from helpers.run.records import Artifact, EngineResult
from helpers.workload.facts import facts_of

FAMILIES = ("vllm", "sglang", "trtllm", "lmdeploy")
DISPLAY = {"vllm": "vLLM", "sglang": "SGLang", "trtllm": "TensorRT-LLM", "lmdeploy": "LMDeploy", "": "unknown engine"}

# Fit of each family per dimension and answer (0-1): the playbook's reading of seed 003 §3.1-3.4.
# lmdeploy (the seeds give only its throughput, seed 000 §5.2: ~130% of vLLM): the playbook's reading of
# LMDeploy's source and the H200 probe: TurboMind is CUDA-only, the PyTorch engine also has ROCm/Ascend
# paths (hardware 0.4 off NVIDIA, like SGLang); new architectures reach the PyTorch engine first (stability
# 0.7 when frequent); prefix caching is opt-in in both backends (prefix_heavy 0.8); two backends, a CUDA 12
# TurboMind build and its silent fallback to PyTorch cost a small team (team 0.6).
FIT: dict[str, dict[str, dict[str, float]]] = {
    "hardware": {
        "nvidia-only": {"vllm": 1.0, "sglang": 1.0, "trtllm": 1.0, "lmdeploy": 1.0},
        "amd-planned": {"vllm": 1.0, "sglang": 0.4, "trtllm": 0.0, "lmdeploy": 0.4},
        "mixed": {"vllm": 1.0, "sglang": 0.4, "trtllm": 0.0, "lmdeploy": 0.4},
    },
    "stability": {
        "frequent": {"vllm": 1.0, "sglang": 0.8, "trtllm": 0.2, "lmdeploy": 0.7},
        "stable": {"vllm": 0.8, "sglang": 0.8, "trtllm": 1.0, "lmdeploy": 0.8},
    },
    "workload": {
        "prefix_heavy": {"vllm": 0.6, "sglang": 1.0, "trtllm": 0.5, "lmdeploy": 0.8},
        "high_concurrency": {"vllm": 0.8, "sglang": 0.8, "trtllm": 1.0, "lmdeploy": 0.8},
        "low_concurrency": {"vllm": 1.0, "sglang": 0.8, "trtllm": 0.8, "lmdeploy": 0.8},
        "unknown": {"vllm": 0.8, "sglang": 0.8, "trtllm": 0.8, "lmdeploy": 0.8},
    },
    "team": {
        "small": {"vllm": 1.0, "sglang": 0.7, "trtllm": 0.2, "lmdeploy": 0.6},
        "middle": {"vllm": 1.0, "sglang": 0.8, "trtllm": 0.5, "lmdeploy": 0.7},
        "large_peak": {"vllm": 0.8, "sglang": 0.8, "trtllm": 1.0, "lmdeploy": 0.8},
    },
}
THRESHOLD_BASIS = (
    "the playbook's default, decision.prefix_reuse_threshold; the seeds name no number: with that share of prompt "
    "tokens served from cache, prefill work falls by about as much, enough for RadixAttention's advantage to show"
)
UNKNOWN_FIT = 0.5  # a family the rubric does not know (e.g. a bare endpoint)
WEIGHTS = {"hardware": 0.125, "stability": 0.125, "workload": 0.125, "team": 0.125, "cost": 0.3, "sla": 0.2}


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


Scalar = float | int | str | bool | None


class TreeStep(_Model):
    """One step of the decision tree: the inputs it read, their thresholds and where it went."""

    step: int
    dimension: str
    question: str
    inputs: dict[str, Scalar]
    thresholds: dict[str, Scalar] = Field(default_factory=dict)
    condition: str = Field(description="Which answer the inputs gave (a key of FIT[dimension]).")
    outcome: str = Field(description="vllm, sglang, trtllm, or 'continue'.")
    reason: str
    reached: bool = True


class EngineScore(_Model):
    """Scores of one configuration: four tree dimensions, measured cost and SLA, weighted total."""

    label: str
    engine: str
    family: str
    status: str
    measured: bool
    eligible: bool
    why_not: str = ""
    hardware: float
    stability: float
    workload: float
    team: float
    cost: float
    sla: float
    total: float
    cost_value: float | None = Field(default=None, description="Monthly TCO or $/Mtok, lower is better.")
    usd_per_mtok: float | None = Field(
        default=None, description="$/M output tokens at the tuned point (breaks ties of equal TCO)."
    )
    cost_basis: str = ""
    sla_share: float | None = None


class Phase(_Model):
    """One phase of seed 000 §5.4's three-phase plan, with this workload's numbers."""

    phase: int
    months: str
    family: str
    configuration: str | None
    action: str
    numbers: dict[str, Scalar] = Field(default_factory=dict)
    applies: bool
    note: str = ""


class DecisionResult(Artifact):
    """The outcome of step 7: the path, the scores, the verdict, its reasons and its caveats."""

    artifact: ClassVar[str] = "decision.json"

    steps: list[TreeStep]
    tree_family: str
    tree_end_step: int
    scores: list[EngineScore]
    measured: bool
    primary: str | None = Field(description="Configuration label (or the tree's family when nothing was measured).")
    primary_family: str
    backup: str | None
    backup_family: str | None
    overruled: bool
    reasons: list[str]
    sentences: list[str]
    warnings: list[str]
    phase_plan: list[Phase]
    sla_ttft_p95_ms: float
    evidence: list[dict[str, Any]] = Field(description="Measured numbers per configuration, as displayed.")
    break_even: list[dict[str, Any]] = Field(default_factory=list)
    verdict: EvidenceVerdict | None = Field(default=None, description="The two best compared with their noise.")
    contradiction: str | None = Field(default=None, description="Where the measurement overrules the seed's tree.")
    rubric: dict[str, Any] = Field(default_factory=dict, description="The scoring rubric: fit table and weights.")
    departures: list[Departure] = Field(
        default_factory=list, description="Where this report departs from the seed, and borderline inputs."
    )

    def tables(self) -> dict[str, pd.DataFrame]:
        """Return the tables behind the answer: path, scores, evidence, break_even."""
        path = [
            {
                "step": s.step,
                "dimension": s.dimension,
                "input": k,
                "value": v,
                "threshold": s.thresholds.get(k),
                "condition": s.condition,
                "outcome": s.outcome if s.reached else "not reached",
            }
            for s in self.steps
            for k, v in s.inputs.items()
        ]
        return {
            "path": pd.DataFrame(path),
            "scores": pd.DataFrame([s.model_dump() for s in self.scores]),
            "evidence": pd.DataFrame(self.evidence),
            "break_even": pd.DataFrame(self.break_even),
        }


def rubric() -> dict[str, Any]:
    """The scoring rubric as shown in the report: each dimension's weight and the fit table behind it."""
    return {"weights": dict(WEIGHTS), "fit": FIT, "unknown_family_fit": UNKNOWN_FIT}


def _team_condition(cfg: PlaybookConfig) -> str:
    """The team's condition at tree step 4, from the one reading of the team answers (``team_leaning``)."""
    return {"trtllm": "large_peak", "vllm": "small", "either": "middle"}[team_leaning(cfg.team)]


def achieved_reuse(results: list[EngineResult] | None) -> tuple[float, str] | None:
    """The highest prefix-cache hit rate an engine achieved on a structured replay of the traffic, and who.

    Only replays with prefix caching not switched off count; the engine's counters first, else its
    per-request ``cached_tokens``. This is the reuse the traffic really allowed once an engine of finite
    cache served it, which is what tree step 3 asks about.
    """
    best: tuple[float, str] | None = None
    for r in results or []:
        for p in r.points:
            s = p.structure
            if p.phase != "structured" or s is None or s.prefix_caching is False:
                continue
            rate = p.server.prefix_cache_hit_rate
            if rate is None and s.usage is not None:
                rate = s.usage.hit_rate
            if rate is not None and (best is None or rate > best[0]):
                best = (float(rate), f"{r.label}, {s.workload} replay")
    return best


def reuse_evidence(profile: Any, results: list[EngineResult] | None = None) -> tuple[float | None, str, str]:
    """The prefix-reuse share tree step 3 judges, its input key and its words.

    Step 5's achieved hit rate once a structured replay measured it; before that step 1's prediction for a
    cache of the engine's KV capacity (a real cache evicts); the unbounded upper bound only when neither exists.
    """
    facts = facts_of(profile)
    achieved = achieved_reuse(results)
    if achieved is not None:
        rate, where = achieved
        return rate, "step5.achieved_prefix_hit_rate", f"prefix-cache hit rate achieved in step 5 ({where})"
    if facts.finite_cache_hit_rate is not None:
        return facts.finite_cache_hit_rate, "profile.finite_cache_hit_rate", "finite-cache predicted prefix reuse"
    return facts.prefix_reuse_ratio, "profile.prefix_reuse_ratio", "measured (unbounded-cache) prefix reuse"


def _workload_step(cfg: PlaybookConfig, profile: Any, results: list[EngineResult] | None) -> TreeStep:
    """Tree step 3: prefix reuse (``reuse_evidence``) over the threshold chooses SGLang; else the concurrency band."""
    d = cfg.decision
    ratio, ratio_key, kind = reuse_evidence(profile, results)
    conc, conc_key, conc_words = concurrency_evidence(profile, results)
    ratio = None if ratio is None else round(float(ratio), 2)
    conc = None if conc is None else round(float(conc))
    if ratio is not None and ratio >= d.prefix_reuse_threshold:
        wl, wl_out = "prefix_heavy", "sglang"
        wl_reason = f"{kind} {ratio:.2f} ≥ threshold {d.prefix_reuse_threshold:g} ({THRESHOLD_BASIS}): choose SGLang"
    else:
        wl_out = "continue"
        wl = "unknown" if conc is None else ("high_concurrency" if conc >= d.high_concurrency else "low_concurrency")
        wl_reason = (
            "no measured prefix-reuse ratio in the profile, so heavy reuse cannot be claimed; falls through"
            if ratio is None
            else f"{kind} {ratio:.2f} < threshold {d.prefix_reuse_threshold:g} ({THRESHOLD_BASIS}); falls through"
        )
        if conc is not None:
            band = "high" if wl == "high_concurrency" else "low (below it counts as low here)"
            wl_reason += f"; concurrency {conc:,} ({conc_words}) is {band} against {d.high_concurrency}"
    return TreeStep(step=3, dimension="workload", question="Heavy prefix reuse (RAG, multi-turn, agents)?",
                    inputs={ratio_key: ratio, conc_key: conc},
                    thresholds={ratio_key: d.prefix_reuse_threshold, conc_key: d.high_concurrency},
                    condition=wl, outcome=wl_out, reason=wl_reason)  # fmt: skip


def _team_step(cfg: PlaybookConfig) -> TreeStep:
    """Tree step 4: a large team chasing peak performance chooses TensorRT-LLM, else vLLM."""
    tc, team = _team_condition(cfg), cfg.team
    who = f"{team.size} engineers, MLOps maturity {team.mlops_maturity}"
    team_reason = {
        "large_peak": f"{who}, chasing peak: a big team (> {BIG_TEAM_ABOVE}), TensorRT-LLM",
        "small": f"{who}: small (< {SMALL_TEAM_BELOW}) or without automation, vLLM",
        "middle": f"{who}: {team_size_class(team.size)} team by the seed's lines (small < {SMALL_TEAM_BELOW}, "
        f"big > {BIG_TEAM_ABOVE}), no clear leaning; vLLM by default, the measurements may overrule",
    }[tc]
    return TreeStep(step=4, dimension="team",
                    question="Small fast-iterating team, or a large MLOps team chasing peak performance?",
                    inputs={"team.size": team.size, "team.mlops_maturity": team.mlops_maturity,
                            "team.chase_peak": team.chase_peak},
                    thresholds={"team.size": f"small < {SMALL_TEAM_BELOW}, big > {BIG_TEAM_ABOVE}"},
                    condition=tc, outcome="trtllm" if tc == "large_peak" else "vllm", reason=team_reason)  # fmt: skip


def run_tree(cfg: PlaybookConfig, profile: Any, results: list[EngineResult] | None = None) -> list[TreeStep]:
    """Walk the four steps of seed 003 §3.5; steps after the one that decides are recorded as not reached.

    Step 3's reuse is ``reuse_evidence``: what step 5 achieved on a structured replay when ``results`` hold one;
    its concurrency is ``departures.concurrency_evidence``: in flight at the SLA capacity when measured.
    """
    d, hw, cad = cfg.decision, cfg.hardware, cfg.cadence
    frequent = cad.updates_per_month >= d.frequent_updates_per_month or cad.concurrent_models > 1
    upd, models, nv = "cadence.updates_per_month", "cadence.concurrent_models", hw.vendors == "nvidia-only"
    steps = [
        TreeStep(
            step=1,
            dimension="hardware",
            question="Mixed hardware, or AMD possible in the next 12 months?",
            inputs={"hardware.vendors": hw.vendors},
            condition=hw.vendors,
            outcome="continue" if nv else "vllm",
            reason=f"hardware.vendors is {hw.vendors}: "
            + ("all three qualify" if nv else "only vLLM has a mature non-NVIDIA path"),
        ),
        TreeStep(
            step=2,
            dimension="stability",
            question="Frequent model updates, or several models served side by side?",
            inputs={upd: cad.updates_per_month, models: cad.concurrent_models},
            thresholds={upd: d.frequent_updates_per_month, models: 1},
            condition="frequent" if frequent else "stable",
            outcome="vllm" if frequent else "continue",
            reason=(
                f"{cad.updates_per_month:g} update(s)/month (frequent at ≥ {d.frequent_updates_per_month:g})"
                f" and {cad.concurrent_models} model(s): "
                + ("rebuilds would be a burden, vLLM" if frequent else "stable")
            ),
        ),
        _workload_step(cfg, profile, results),
        _team_step(cfg),
    ]
    done = False
    for s in steps:
        s.reached = not done
        done = done or s.outcome != "continue"
    return steps


def tree_verdict(steps: list[TreeStep]) -> tuple[str, int]:
    """(family, step number) where the tree stopped."""
    for s in steps:
        if s.reached and s.outcome != "continue":
            return s.outcome, s.step
    raise AssertionError("the last tree step always decides")


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
