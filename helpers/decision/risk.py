"""Checklist step 8, risk: a risk register per engine family and a migration plan from primary to backup.

Baseline likelihoods and the dated facts come from ``data/engine_facts.yaml``; the config's answers
raise them (AMD planned raises hardware binding, frequent updates raise model-support lag, a small
or low-MLOps team raises ops complexity). The migration plan reads what changes straight from the
engine adapters: launch flags (``knob_flags``), entry point, image, ports and metric names.
"""

from __future__ import annotations

import math
from dataclasses import fields
from typing import Any

import pandas as pd

from helpers.core.config import Knobs, PlaybookConfig
from helpers.cost.compute import MAX_ERROR_SHARE
from helpers.decision.tree import DISPLAY, DecisionResult
from helpers.engines import ENGINES, EngineAdapter
from helpers.model.reference_data import FamilyFacts, load_engine_facts

LEVELS = ["low", "medium", "high"]
QUEUE_ALERT = 100  # seed 003 §5.3: queue length > 100
GPU_MEM_ALERT = 0.95  # seed 003 §5.3: GPU memory > 95%
LONG_BUILD_S = 600  # a target whose build/cold start exceeds this needs a build pipeline


def _up(level: str, cond: bool) -> str:
    """One level higher when ``cond``."""
    return LEVELS[min(LEVELS.index(level) + 1, 2)] if cond else level


def _evidence(f: FamilyFacts, *topics: str) -> str:
    items = [f"{x.text} ({x.source}; {x.date})" for x in f.facts if x.topic in topics]
    return "; ".join(items) or "no dated fact on file (add one to engine_facts.yaml)"


def _risks(family: str, f: FamilyFacts, cfg: PlaybookConfig, backup: str) -> list[dict[str, Any]]:
    """Build the five register entries for one family, adjusted by the config's answers."""
    lv = f.risk_levels
    non_nvidia = cfg.hardware.vendors != "nvidia-only"
    frequent = (
        cfg.cadence.updates_per_month >= cfg.decision.frequent_updates_per_month or cfg.cadence.concurrent_models > 1
    )
    small = cfg.team.size < 5 or cfg.team.mlops_maturity == "low"
    build_h = cfg.cadence.updates_per_month * cfg.cadence.concurrent_models * f.cold_start.seconds / 3600
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
                f"{f.cold_start.seconds:g} s per update ({f.cold_start.source}) = {build_h:.2f} h/month at "
                f"{cfg.cadence.updates_per_month:g} update(s) × {cfg.cadence.concurrent_models} model(s); "
                + _evidence(f, "ops")
            ),
            "mitigation": "Build engine images in CI ahead of rollout (seed 003 §5.2); write the runbook in step 10.",
        },
    ]


def risk_register(decision: DecisionResult, cfg: PlaybookConfig) -> pd.DataFrame:
    """One row per (engine family, risk): likelihood, impact, dated evidence, mitigation, role."""
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
        for r in _risks(family, facts[family], cfg, fallback or "the backup"):
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
    for spec in cfg.engines:
        if spec.label == label:
            return spec.knobs, list(spec.extra_args)
    return None, []


def _options(adapter: EngineAdapter, knobs: Knobs) -> str:
    """Show the settings an adapter passes through a file rather than flags (e.g. trtllm's LLM-API YAML)."""
    extra = getattr(adapter, "extra_options", None)
    return str(extra(knobs)) if callable(extra) and extra(knobs) else "(none)"


def migration_plan(decision: DecisionResult, cfg: PlaybookConfig) -> dict[str, Any]:
    """Plan the move from primary to backup: what changes, the effort, and when to roll back.

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
    k_src = k_src or Knobs()
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
    facts = load_engine_facts()
    renamed = sum(1 for _, a, b in changes if a != b)
    dst_build = facts[dst.family].cold_start.seconds if dst.family in facts else 0.0
    effort = [
        ("deploy the new image and flags to a canary", 1.0, "assumption"),
        ("re-run the playbook benchmark and SLA tuning on the target", 1.0, "assumption: one playbook run"),
        (
            "remap dashboards, alerts and autoscaling signals",
            0.25 * renamed,
            f"0.25 day × {renamed} changed items",
        ),
    ]
    if dst_build > LONG_BUILD_S:
        effort.append(("set up an engine build pipeline in CI", 5.0, f"assumption; build {dst_build:g} s per update"))
    sla = cfg.sla.ttft_p95_ms
    floor = 1.0 - cfg.review.regression_threshold
    tuned = next((e for e in decision.evidence if e["label"] == decision.backup), None)
    triggers = [
        f"TTFT p95 above {sla:g} ms (sla.ttft_p95_ms) for 5 minutes on the canary",
        f"more than {MAX_ERROR_SHARE:.0%} of requests failing",
        f"queue length ({dst.metrics.waiting or 'waiting requests'}) above {QUEUE_ALERT} (seed 003 §5.3)",
        f"GPU memory above {GPU_MEM_ALERT:.0%} (seed 003 §5.3)",
    ]
    if tuned and tuned.get("output_tok_s"):
        triggers.append(
            f"output tok/s per replica below {floor:.0%} of the measured {tuned['output_tok_s']:,.0f} "
            f"at concurrency {tuned['concurrency']:,.0f} (review.regression_threshold)"
        )
    return {
        "from": decision.primary,
        "to": decision.backup,
        "changes": pd.DataFrame(changes, columns=["aspect", "from", "to"]),
        "effort_days": sum(d for _, d, _ in effort),
        "effort": pd.DataFrame(effort, columns=["task", "days", "basis"]),
        "rollback_triggers": triggers,
        "steps": [
            f"Deploy `{decision.backup}` beside `{decision.primary}` behind one OpenAI-compatible route.",
            "Shift 10% → 50% → 100% of traffic, holding each step for a day while watching the triggers.",
            f"On any trigger, route all traffic back to `{decision.primary}` (kept warm until the end).",
        ],
    }
