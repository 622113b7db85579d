"""Step 6 in the notebook: ``compute`` prices the run and saves ``CostAnalysis``; ``show`` only displays it."""

from __future__ import annotations

from helpers.cost.break_even import break_even, tco_curve
from helpers.cost.compute import best_points, cost_table, fleet_and_tco, traffic_demand
from helpers.cost.plots import plot_cost_per_mtok, plot_tco_stacked, plot_tco_vs_traffic
from helpers.cost.records import (
    BreakEvenRow,
    CostAnalysis,
    Demand,
    FleetRow,
    PricedPoint,
    PricedRepresentative,
    frame,
    rows_of,
)
from helpers.report.notebook import Context, not_yet, say, show_figure, show_table
from helpers.workload.profile import Profile


def compute(ctx: Context) -> CostAnalysis | None:
    """Price every measured point and each configuration's representative, size the fleet; save ``cost.json``."""
    results = ctx.folder.engine_results()
    if not any(r.points for r in results):
        return None
    profile = ctx.folder.load(Profile)
    analysis = CostAnalysis(
        points=[PricedPoint.model_validate(r) for r in rows_of(cost_table(results, ctx.cfg))],
        best=[PricedRepresentative.model_validate(r) for r in rows_of(best_points(results, ctx.cfg))],
        fleet=[FleetRow.model_validate(r) for r in rows_of(fleet_and_tco(results, ctx.cfg, profile))],
        break_even=[BreakEvenRow.model_validate(r) for r in rows_of(break_even(results, ctx.cfg, profile))],
        demand=Demand.model_validate(traffic_demand(ctx.cfg, profile)),
    )
    ctx.folder.save(analysis)
    return analysis


def show(ctx: Context, cost: CostAnalysis | None) -> None:
    """Display the cost tables and plots of ``cost`` (computes nothing but the TCO curve's drawing grid)."""
    if cost is None:
        not_yet("no measured point to price (step 5 measured nothing)")
        return
    costs, fleet = frame(cost.points), frame(cost.fleet)
    if cost.points and cost.points[0].price_source:
        say(f"Price: {cost.points[0].price_source}", "note")
    say(f"Demand sized for: {cost.demand.basis}.", "note")
    show_table(frame(cost.best), "Each configuration's representative measurement, priced (the figures that decide)")
    show_table(costs, "Cost per million tokens at every measured point (seed 003 §4.4)")
    show_figure(plot_cost_per_mtok(costs))
    show_table(fleet, "Fleet and monthly TCO at the demand above (GPU + operations)")
    show_figure(plot_tco_stacked(fleet))
    if cost.break_even:
        show_table(frame(cost.break_even), "Break-even: the traffic at which a faster-but-harder engine pays off")
    curve = tco_curve(ctx.folder.engine_results(), ctx.cfg, ctx.folder.load(Profile))
    if not curve.empty:
        show_figure(plot_tco_vs_traffic(curve, cost.demand.output_tok_s))
