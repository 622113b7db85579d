"""Steps 11-12 view: this run against earlier runs of the same workload, and version currency."""

from __future__ import annotations

from helpers.report.index import archived_runs
from helpers.report.notebook import Context, say, show_figure, show_table
from helpers.review.compare import currency_sentences, version_currency
from helpers.review.compare import review as review_runs
from helpers.review.trend import trend_figure
from helpers.run.summary import build_summary


def review(ctx: Context) -> None:
    """Step 11: what changed since the last run of this workload; flags go to the top of the report."""
    current = build_summary(ctx.run_dir, ctx.cfg)
    archive = [r for r in archived_runs(ctx.run_dir.parent) if r.get("_dir") != ctx.run_dir.name]
    res = review_runs(current, archive, ctx.cfg)
    ctx.save_json("review.json", {"flags": res.flags, "notes": res.notes, "headline": res.headline()})
    for f in res.flags:
        say(f, "warn")
    for n in res.notes:
        say(n, "note")
    for title, df in (
        ("Changes since the previous run", res.changes()),
        ("Decisions over time", res.decision_table()),
        ("History", res.history_table()),
    ):
        if not df.empty:
            show_table(df, title)
    if any(r.get("workload") == ctx.cfg.name for r in archive):
        show_figure(trend_figure([*archive, {**current, "_dir": ctx.run_dir.name}], ctx.cfg.name))


def learning(ctx: Context) -> None:
    """Step 12: engine versions measured vs the versions the config says are current."""
    current = build_summary(ctx.run_dir, ctx.cfg)
    df = version_currency(current, ctx.cfg)
    show_table(df, "Engine versions measured vs current (review.current_versions in the config)")
    for s in currency_sentences(df):
        say(s, "note")
