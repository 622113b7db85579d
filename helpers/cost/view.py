"""Step 6 in the notebook: ``compute`` prices the run and saves ``CostAnalysis``; ``show`` only displays it."""

from __future__ import annotations

from helpers.cost.analysis import analyse
from helpers.cost.break_even import tco_curve
from helpers.cost.plots import plot_cost_per_mtok, plot_tco_stacked, plot_tco_vs_traffic
from helpers.cost.records import CostAnalysis, frame
from helpers.report.notebook import Context, not_yet, say, show_figure, show_table
from helpers.workload.profile import Profile

_INTERNAL = ["output_tok_s_per_gpu", "request_rate_per_gpu"]


def compute(ctx: Context) -> CostAnalysis | None:
    """Price every measured point and each configuration's representative, size the fleet; save ``cost.json``."""
    analysis = analyse(ctx.folder.engine_results(), ctx.cfg, ctx.folder.load(Profile))
    if analysis is not None:
        ctx.folder.save(analysis)
    return analysis


def show(ctx: Context, cost: CostAnalysis | None) -> None:
    """Display the cost tables and plots of ``cost`` (computes nothing but the TCO curve's drawing grid)."""
    if cost is None:
        not_yet("no measured point to price (step 5 measured nothing)")
        return
    costs, fleet = frame(cost.points), frame(cost.fleet).drop(columns=_INTERNAL, errors="ignore")
    if cost.points and cost.points[0].price_source:
        say(f"Price: {cost.points[0].price_source}", "note")
    say(f"Demand sized for: {cost.demand.basis}.", "note")
    best = frame(cost.best).drop(columns=_INTERNAL, errors="ignore")
    show_table(best, "Each configuration's representative measurement, priced (the figures that decide)")
    show_table(costs, "Cost per million tokens at every measured point (seed 003 §4.4)")
    show_figure(plot_cost_per_mtok(costs))
    show_table(fleet, "Fleet and monthly TCO at the demand above (GPU + operations)")
    show_figure(plot_tco_stacked(fleet))
    if cost.break_even:
        show_table(frame(cost.break_even), "Break-even: the traffic at which a faster-but-harder engine pays off")
    curve = tco_curve(cost.fleet, cost.break_even, cost.demand)
    if not curve.empty:
        show_figure(plot_tco_vs_traffic(curve, cost.demand.output_tok_s))
