"""Steps 7-8 view: the decision tree with its inputs, scores, the answer, risks and migration plan."""

from __future__ import annotations

import pandas as pd

from helpers.decision.compute import decide as decide_engines
from helpers.decision.risk import migration_plan, risk_register
from helpers.decision.tree import DecisionResult
from helpers.report.notebook import Context, esc, say, show_html, show_table
from helpers.run.records import load_engine_results


def decide(ctx: Context) -> DecisionResult:
    """Run the decision on the measured results and the profile; save ``decision.json``."""
    results = load_engine_results(ctx.run_dir)
    decision = decide_engines(results, ctx.cfg, ctx.load_json("profile.json"))
    ctx.save_json("decision.json", decision.model_dump(mode="json"))
    return decision


def show(ctx: Context, d: DecisionResult) -> None:
    """Display the answer, the warnings, the tree path, the scores and the three-phase plan."""
    show_html(f"<div class='pb-answer'>{' '.join(esc(s) for s in d.sentences)}</div>")
    for w in d.warnings:
        say(w, "warn")
    if d.overruled:
        say("The measurements overrule the decision tree: see the scores below.", "warn")
    tables = d.tables()
    show_table(tables["path"], "Decision tree (seed 003 §3.5): the inputs each branch used")
    show_table(tables["scores"], "Scores per engine configuration (four dimensions + measured cost + SLA)")
    show_table(tables["evidence"], "Measured evidence behind the answer")
    if not tables["break_even"].empty:
        show_table(tables["break_even"], "Break-even behind the answer")
    show_table(pd.DataFrame([{"reason": r} for r in d.reasons]), "Reasons")
    if d.phase_plan:
        show_table(pd.DataFrame([p.model_dump(mode="json") for p in d.phase_plan]), "Three-phase plan (seed 000 §5.4)")


def risk(ctx: Context, d: DecisionResult) -> None:
    """Display the risk register and the migration plan from primary to backup."""
    show_table(risk_register(d, ctx.cfg), "Risk register")
    plan = migration_plan(d, ctx.cfg)
    ctx.save_json(
        "migration_plan.json",
        {k: (v.to_dict(orient="records") if isinstance(v, pd.DataFrame) else v) for k, v in plan.items()},
    )
    say(f"Migration plan: {plan['from']} → {plan['to'] or 'no backup'}", "note")
    if isinstance(plan["changes"], pd.DataFrame) and not plan["changes"].empty:
        show_table(plan["changes"], "What changes")
        show_table(plan["effort"], f"Estimated effort: {plan['effort_days']} engineer-days (assumptions)")
    for t in plan.get("rollback_triggers", []):
        say(f"Roll back when: {t}", "warn")
    for s in plan.get("steps", []):
        say(s, "note")
