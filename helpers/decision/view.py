"""Steps 7-8 in the notebook: ``decide`` and ``risk`` compute and save their records; ``show*`` only display."""

from __future__ import annotations

import pandas as pd

from helpers.benchmark.quality_phase import QualityGate
from helpers.cost.records import CostAnalysis, rows_of
from helpers.decision.compute import decide as decide_engines
from helpers.decision.records import RiskRecord
from helpers.decision.risk import migration_plan, risk_register
from helpers.decision.tree import DecisionResult
from helpers.report.notebook import Context, esc, say, show_html, show_table
from helpers.workload.profile import Profile


def decide(ctx: Context) -> DecisionResult:
    """Run the decision on the measured results, the profile, the cost and the quality gate; save ``decision.json``."""
    f = ctx.folder
    decision = decide_engines(f.engine_results(), ctx.cfg, f.load(Profile), f.load(CostAnalysis), f.load(QualityGate))
    ctx.folder.save(decision)
    return decision


def show(ctx: Context, d: DecisionResult) -> None:
    """Display the answer, the warnings, the tree path, the scores and the three-phase plan."""
    if d.contradiction:
        say(d.contradiction, "warn")
    show_html(f"<div class='pb-answer'>{' '.join(esc(s) for s in d.sentences)}</div>")
    if d.verdict is not None and d.verdict.text:
        say(f"What decided: {d.verdict.decided_by}. {d.verdict.text}", "ok" if d.verdict.significant else "note")
    for w in d.warnings:
        say(w, "warn")
    if d.overruled:
        say("The measurements overrule the decision tree: see the scores below.", "warn")
    tables = d.tables()
    show_table(tables["path"], "Decision tree (seed 003 §3.5): the inputs each branch used")
    show_departures(d)
    show_table(tables["scores"], "Scores per engine configuration (four dimensions + measured cost + SLA)")
    show_table(rubric_table(d), "The scoring rubric: each dimension's weight, and the fit of each engine family")
    show_table(tables["evidence"], "Measured evidence behind the answer")
    if not tables["break_even"].empty:
        show_table(tables["break_even"], "Break-even behind the answer")
    show_table(pd.DataFrame([{"reason": r} for r in d.reasons]), "Reasons")
    if d.phase_plan:
        show_table(pd.DataFrame([p.model_dump(mode="json") for p in d.phase_plan]), "Three-phase plan (seed 000 §5.4)")


def departures_table(d: DecisionResult) -> pd.DataFrame:
    """The decision's departures from the seed, one row each (borderline inputs marked)."""
    return pd.DataFrame(
        [{"topic": x.topic, "the seed says": x.seed, "this report": x.report, "why / what it changes": x.why}
         for x in d.departures]
    )  # fmt: skip


def show_departures(d: DecisionResult) -> None:
    """Where this report departs from the seed: a table, or a note that an older decision recorded none."""
    if not d.departures:
        say("This decision was recorded before the report listed its departures from the seed.", "missing")
        return
    show_table(departures_table(d), "Where this report departs from the seed")


def risk(ctx: Context, d: DecisionResult) -> RiskRecord:
    """Step 8: the risk register and the migration plan from primary to backup; saved as ``risk.json``."""
    results, cost = ctx.folder.engine_results(), ctx.folder.load(CostAnalysis)
    plan = migration_plan(d, ctx.cfg, results, cost)
    rec = RiskRecord(
        rows=rows_of(risk_register(d, ctx.cfg, cost)),
        migration={k: (rows_of(v) if isinstance(v, pd.DataFrame) else v) for k, v in plan.items()},
    )
    ctx.folder.save(rec)
    return rec


def show_risk(ctx: Context, rec: RiskRecord) -> None:
    """Display the risk register and the migration plan."""
    show_table(pd.DataFrame(rec.rows), "Risk register")
    plan = rec.migration
    say(f"Migration plan: {plan.get('from')} → {plan.get('to') or 'no backup'}", "note")
    if plan.get("changes"):
        show_table(pd.DataFrame(plan["changes"]), "What changes")
        show_table(
            pd.DataFrame(plan.get("effort") or []),
            f"Estimated effort: {plan.get('effort_days')} engineer-days (assumptions)",
        )
    for t in plan.get("rollback_triggers", []):
        say(f"Roll back when: {t}", "warn")
    for s in plan.get("steps", []):
        say(s, "note")


def rubric_table(d: DecisionResult) -> pd.DataFrame:
    """The rubric behind the scores: one row per dimension and answer, its weight and each family's fit."""
    weights, rows = d.rubric.get("weights", {}), []
    for dim, answers in d.rubric.get("fit", {}).items():
        for answer, fits in answers.items():
            rows.append({"dimension": dim, "weight": weights.get(dim), "answer": answer, **fits})
    for dim in ("cost", "sla"):
        rows.append({"dimension": dim, "weight": weights.get(dim), "answer": "measured (best = 1)"})
    return pd.DataFrame(rows)
