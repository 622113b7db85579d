"""Steps 11-12 in the notebook: ``review`` compares and saves ``ReviewRecord``; ``show_review`` only displays."""

from __future__ import annotations

from helpers.report.index import archived_runs
from helpers.report.notebook import Context, say, show_figure, show_table
from helpers.report.run_summary import build_summary
from helpers.review.compare import ReviewResult, changes_for_people
from helpers.review.compare import review as review_runs
from helpers.review.records import ReviewRecord
from helpers.review.trend import trend_figure
from helpers.review.versions import currency_sentences, latest_versions, version_currency


def review(ctx: Context) -> ReviewResult:
    """Step 11: what changed since the last run of this workload; flags go to the top of the report."""
    current = build_summary(ctx.run_dir, ctx.cfg)
    archive = [r for r in archived_runs(ctx.run_dir.parent) if r.run_id != ctx.run_dir.name]
    res = review_runs(current, archive, ctx.cfg)
    ctx.folder.save(ReviewRecord(flags=res.flags, notes=res.notes, headline=res.headline()))
    return res


def show_review(ctx: Context, res: ReviewResult) -> None:
    """Display the review: flags, notes, the change tables and the trend."""
    archive = [r for r in archived_runs(ctx.run_dir.parent) if r.run_id != ctx.run_dir.name]
    for f in res.flags:
        say(f, "warn")
    for n in res.notes:
        say(n, "note")
    for title, df in (
        ("Changes since the previous run (changes in %)", changes_for_people(res.changes())),
        ("Decisions over time", res.decision_table()),
        ("History", res.history_table()),
    ):
        if not df.empty:
            show_table(df, title)
    if any(r.workload == ctx.cfg.name for r in archive):
        show_figure(trend_figure([*archive, build_summary(ctx.run_dir, ctx.cfg)], ctx.cfg.name))


def learning(ctx: Context) -> None:
    """Step 12: engine versions measured vs the latest known ones (the dated engine_versions.yaml)."""
    current = build_summary(ctx.run_dir, ctx.cfg)
    df = version_currency(current, ctx.cfg, latest_versions(ctx.cfg))
    show_table(df, "Engine versions measured vs the latest known (helpers/data/engine_versions.yaml; "
               "review.current_versions in the config overrides)")  # fmt: skip
    for s in currency_sentences(df):
        say(s, "note")
