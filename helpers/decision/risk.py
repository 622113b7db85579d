"""Checklist step 8, risk: a risk register per engine family and a migration plan from primary to backup.

Baseline likelihoods and the dated facts come from ``data/engine_facts.yaml``; the config's answers
raise them (AMD planned raises hardware binding, frequent updates raise model-support lag, a small
or low-MLOps team raises ops complexity). Cold starts are step 6's (``CostAnalysis.cold_starts``: this
run's measurements where it has them, the dated facts otherwise); a source that
names a file outside the repository is marked as such rather than cited. The migration plan reads
what changes straight from the engine adapters: launch flags (``knob_flags``, with real weights:
never ``--load-format dummy``), entry point, image, ports and metric names; its rollback triggers are
the rollout's one set of criteria (``helpers.decision.rollback``).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, fields
from typing import Any

import pandas as pd

from helpers.core.config import Knobs, PlaybookConfig
from helpers.core.paths import REPO_ROOT
from helpers.cost.records import CostAnalysis
from helpers.decision.rollback import criteria_of_result, schedule_text
from helpers.decision.tree import DISPLAY, DecisionResult
from helpers.engines import ENGINES, EngineAdapter
from helpers.model.reference_data import FamilyFacts, load_engine_facts
from helpers.run.records import EngineResult

LEVELS = ["low", "medium", "high"]
LONG_BUILD_S = 600  # a target whose build/cold start exceeds this needs a build pipeline
_FILE = re.compile(r"[\w.-]+(?:/[\w.-]+)+\.(?:md|txt|json|ya?ml|py|csv)\b|\b[\w-]+\.(?:md|txt|json|ya?ml|csv)\b")
OUTSIDE = "notes outside this repository"


@dataclass(frozen=True)
class ColdStart:
    """A family's cold start as the register uses it: seconds and where the number comes from."""

    seconds: float
    source: str
    measured: bool


def citable(source: str) -> str:
    """``source`` with every file it names that is not in this repository replaced by a plain statement."""
    return _FILE.sub(lambda m: m.group(0) if (REPO_ROOT / m.group(0)).is_file() else OUTSIDE, source)


def cold_start(family: str, f: FamilyFacts | None, cost: CostAnalysis | None) -> ColdStart:
    """``family``'s cold start as step 6 saved it (``cost.fleet.cold_starts``, the one definition), in words.

    Measured: the median over the family's configurations, each named; else the dated fact, its source cited.
    A record saved before step 6 kept cold starts says so; nothing is measured again here.
    """
    saved = cost.cold_start(family) if cost is not None else None
    if saved is not None and saved.measured:
        who = ", ".join(f"{label} {s:,.0f} s" for label, s in saved.by_label.items())
        return ColdStart(saved.seconds, f"measured in this run: {who}", True)
    if f is None:
        return ColdStart(0.0, "no cold start measured or on file", False)
    if cost is not None and cost.cold_starts is None:
        return ColdStart(f.cold_start.seconds, "step 6's record has no cold starts (not recorded); the dated fact: "
                         + citable(f"{f.cold_start.source}; {f.cold_start.date}"), False)  # fmt: skip
    return ColdStart(f.cold_start.seconds, citable(f"{f.cold_start.source}; {f.cold_start.date}"), False)


def _family(engine: str) -> str:
    return ENGINES[engine].family if engine in ENGINES else ""


def _up(level: str, cond: bool) -> str:
    """One level higher when ``cond``."""
    return LEVELS[min(LEVELS.index(level) + 1, 2)] if cond else level


def _evidence(f: FamilyFacts, *topics: str) -> str:
    items = [f"{x.text} ({citable(x.source)}; {x.date})" for x in f.facts if x.topic in topics]
    return "; ".join(items) or "no dated fact on file (add one to engine_facts.yaml)"


def _risks(family: str, f: FamilyFacts, cfg: PlaybookConfig, backup: str, cold: ColdStart) -> list[dict[str, Any]]:
    """Build the five register entries for one family, adjusted by the config's answers."""
    lv = f.risk_levels
    non_nvidia = cfg.hardware.vendors != "nvidia-only"
    frequent = (
        cfg.cadence.updates_per_month >= cfg.decision.frequent_updates_per_month or cfg.cadence.concurrent_models > 1
    )
    small = cfg.team.size < 5 or cfg.team.mlops_maturity == "low"
    build_h = cfg.cadence.updates_per_month * cfg.cadence.concurrent_models * cold.seconds / 3600
    return [
        {
            "risk": "ecosystem lock-in",
            "likelihood": lv.lock_in,
            "impact": "medium",
            "evidence": _evidence(f, "ecosystem", "hardware"),
            "mitigation": "Keep clients on the OpenAI-compatible API and dashboards on the playbook's "
            f"normalised metrics; re-benchmark the backup `{backup}` every quarter (checklist step 11).",
        },
        {
            "risk": "hardware binding",
            "likelihood": _up(lv.hardware_binding, non_nvidia and lv.hardware_binding != "low"),
            "impact": "high" if f.nvidia_only else "medium",
            "evidence": f"runs on: {', '.join(f.hardware)}; " + _evidence(f, "hardware"),
            "mitigation": "Keep a vLLM configuration measured on the planned hardware before any AMD purchase"
            if f.nvidia_only or lv.hardware_binding != "low"
            else "None needed beyond re-measuring on new hardware.",
        },
        {
            "risk": "community activity",
            "likelihood": lv.community,
            "impact": "medium",
            "evidence": _evidence(f, "community"),
            "mitigation": "Update the dated facts in engine_facts.yaml at each quarterly review; pin engine versions.",
        },
        {
            "risk": "model-support lag",
            "likelihood": _up(lv.model_support_lag, frequent),
            "impact": "high" if frequent else "medium",
            "evidence": _evidence(f, "model_support"),
            "mitigation": f"Test each new model on {f.display_name} before committing to a release date; "
            f"fall back to `{backup}` for models it does not support yet.",
        },
        {
            "risk": "ops complexity",
            "likelihood": _up(lv.ops_complexity, small),
            "impact": "high" if small else "medium",
            "evidence": (
                f"{f.ops_hours_per_month.hours:g} engineer h/month (assumption); restart/build "
                f"{cold.seconds:,.0f} s per update ({cold.source}) = {build_h:.2f} h/month at "
                f"{cfg.cadence.updates_per_month:g} update(s) × {cfg.cadence.concurrent_models} model(s); "
                + _evidence(f, "ops")
            ),
            "mitigation": "Build engine images in CI ahead of rollout (seed 003 §5.2); write the runbook in step 10.",
        },
    ]


def risk_register(decision: DecisionResult, cfg: PlaybookConfig, cost: CostAnalysis | None = None) -> pd.DataFrame:
    """One row per (engine family, risk): likelihood, impact, dated evidence, mitigation, role.

    ``cost`` (step 6's record) supplies the cold starts it saved; without it the dated facts do.
    """
    facts = load_engine_facts()
    roles: dict[str, list[str]] = {}
    for s in decision.scores:
        roles.setdefault(s.family, []).append(s.label)
    roles.setdefault(decision.primary_family, [decision.primary or decision.primary_family])
    rows = []
    for family, labels in roles.items():
        if family not in facts:
            continue
        role = (
            "primary"
            if family == decision.primary_family
            else "backup"
            if family == decision.backup_family
            else "other"
        )
        fallback = decision.backup if role == "primary" else decision.primary
        cold = cold_start(family, facts[family], cost)
        for r in _risks(family, facts[family], cfg, fallback or "the backup", cold):
            rows.append(
                {
                    "family": family,
                    "engine": DISPLAY[family],
                    "role": role,
                    "configurations": ", ".join(labels),
                    **r,
                }
            )
    order = {"primary": 0, "backup": 1, "other": 2}
    df = pd.DataFrame(rows)
    return df.sort_values("role", key=lambda c: c.map(order), kind="stable").reset_index(drop=True) if rows else df


def _adapter_for(label: str | None, family: str, decision: DecisionResult) -> EngineAdapter:
    """Find the adapter of a label from the scores, or the first GPU adapter of the family."""
    for s in decision.scores:
        if s.label == label and s.engine in ENGINES:
            return ENGINES[s.engine]
    return next(a for a in ENGINES.values() if a.family == family and not a.runs_on_cpu)


def _knobs(label: str | None, cfg: PlaybookConfig) -> tuple[Knobs | None, list[str]]:
    """The configuration's knobs as deployed (real weights, never dummy) and its extra flags."""
    for spec in cfg.engines:
        if spec.label == label:
            return spec.knobs.model_copy(update={"dummy_weights": False}), list(spec.extra_args)
    return None, []


def _options(adapter: EngineAdapter, knobs: Knobs) -> str:
    """Show the settings an adapter passes through a file rather than flags (e.g. trtllm's LLM-API YAML)."""
    extra = getattr(adapter, "extra_options", None)
    return str(extra(knobs)) if callable(extra) and extra(knobs) else "(none)"


def _effort(changes: list[tuple[str, str, str]], family: str, cost: CostAnalysis | None) -> list[tuple]:
    """The migration's tasks (task, days, basis): a canary, a re-run, the remapping, and a build pipeline when slow."""
    renamed = sum(1 for _, a, b in changes if a != b)
    cold = cold_start(family, load_engine_facts().get(family), cost)
    effort = [
        ("deploy the new image and flags to a canary", 1.0, "assumption"),
        ("re-run the playbook benchmark and SLA tuning on the target", 1.0, "assumption: one playbook run"),
        ("remap dashboards, alerts and autoscaling signals", 0.25 * renamed, f"0.25 day × {renamed} changed items"),
    ]
    if cold.seconds > LONG_BUILD_S:
        effort.append(
            ("set up an engine build pipeline in CI", 5.0, f"assumption; build {cold.seconds:,.0f} s ({cold.source})")
        )
    return effort


def migration_plan(
    decision: DecisionResult,
    cfg: PlaybookConfig,
    results: list[EngineResult] | None = None,
    cost: CostAnalysis | None = None,
) -> dict[str, Any]:
    """Plan the move from primary to backup: what changes, the effort, and when to roll back.

    ``cost`` (step 6's record) supplies the target's cold start (else the dated fact); ``results`` the
    backup's measured baseline. The rollback triggers are
    ``helpers.decision.rollback``'s criteria with the backup's measured baseline, and the traffic steps are
    the rollout's one schedule (``helpers.decision.rollback.TRAFFIC_STEPS``).

    Returns ``{"from", "to", "changes" (DataFrame: aspect, from, to), "effort_days", "effort"
    (DataFrame: task, days, basis), "rollback_triggers" (list), "steps" (list)}``.
    """
    if not decision.backup_family:
        return {
            "from": decision.primary,
            "to": None,
            "changes": pd.DataFrame(),
            "effort_days": math.nan,
            "effort": pd.DataFrame(),
            "rollback_triggers": [],
            "steps": ["No backup was measured: measure one."],
        }
    src = _adapter_for(decision.primary, decision.primary_family, decision)
    dst = _adapter_for(decision.backup, decision.backup_family, decision)
    k_src, x_src = _knobs(decision.primary, cfg)
    k_dst, x_dst = _knobs(decision.backup, cfg)
    k_src = k_src or Knobs(dummy_weights=False)
    k_dst = k_dst or k_src  # the same tuning intent, expressed in the target's flags

    def entry(a: EngineAdapter) -> str:
        return " ".join(a.container_entrypoint) or (f"python -m {a.module}" if a.module else "(not started)")

    changes = [
        ("deployment image", src.default_image or "(none)", dst.default_image or "(none)"),
        ("entry point", entry(src), entry(dst)),
        ("launch flags (knobs)", " ".join(src.knob_flags(k_src)), " ".join(dst.knob_flags(k_dst))),
        ("extra flags", " ".join(x_src), " ".join(x_dst)),
        ("options file", _options(src, k_src), _options(dst, k_dst)),
        ("default port", str(src.default_port), str(dst.default_port)),
        ("health path", src.health_path, dst.health_path),
        ("metrics path", src.metrics_path, dst.metrics_path),
    ]
    for fld in fields(src.metrics):
        a, b = getattr(src.metrics, fld.name), getattr(dst.metrics, fld.name)
        changes.append((f"metric: {fld.name}", a or "(none)", b or "(none)"))
    effort = _effort(changes, dst.family, cost)
    target = next((r for r in results or [] if r.label == decision.backup), None)
    crit = criteria_of_result(cfg, target)
    triggers = crit.triggers()
    return {
        "from": decision.primary,
        "to": decision.backup,
        "changes": pd.DataFrame(changes, columns=["aspect", "from", "to"]),
        "effort_days": sum(d for _, d, _ in effort),
        "effort": pd.DataFrame(effort, columns=["task", "days", "basis"]),
        "rollback_triggers": triggers,
        "steps": [
            f"Deploy `{decision.backup}` beside `{decision.primary}` behind one OpenAI-compatible route.",
            f"Shift traffic in the rollout's steps, each held at least as long as given: {schedule_text()} "
            "(the same steps as step 10's `canary.md`), watching the triggers.",
            f"On any trigger, route all traffic back to `{decision.primary}` (kept warm until the end).",
        ],
    }
