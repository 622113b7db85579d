"""Step 6 view: $/Mtok per point, fleet size and TCO at the profiled traffic, and the break-even."""

from __future__ import annotations

from helpers.cost.break_even import break_even, tco_curve
from helpers.cost.compute import cost_table, fleet_and_tco, traffic_demand
from helpers.cost.plots import plot_cost_per_mtok, plot_tco_stacked, plot_tco_vs_traffic
from helpers.report.notebook import Context, not_yet, say, show_figure, show_table
from helpers.run.records import load_engine_results


def show(ctx: Context) -> None:
    """Compute the cost tables from the run's measured points, save ``cost.json`` and display them."""
    results = load_engine_results(ctx.run_dir)
    if not any(r.points for r in results):
        not_yet("no measured point to price (step 5 measured nothing)")
        return
    profile = ctx.load_json("profile.json")
    costs = cost_table(results, ctx.cfg)
    fleet = fleet_and_tco(results, ctx.cfg, profile)
    be = break_even(results, ctx.cfg, profile)
    demand = traffic_demand(ctx.cfg, profile)
    ctx.save_json(
        "cost.json",
        {
            "points": costs.to_dict(orient="records"),
            "fleet": fleet.to_dict(orient="records"),
            "break_even": be.to_dict(orient="records"),
            "demand": demand,
        },
    )
    if "price_source" in costs.columns and len(costs):
        say(f"Price: {costs['price_source'].iloc[0]}", "note")
    show_table(costs, "Cost per million tokens at every measured point (seed 003 §4.4)")
    show_figure(plot_cost_per_mtok(costs))
    show_table(fleet, "Fleet and monthly TCO at the profiled traffic (GPU + operations)")
    show_figure(plot_tco_stacked(fleet))
    if not be.empty:
        show_table(be, "Break-even: the traffic at which a faster-but-harder engine pays for its operations cost")
    curve = tco_curve(results, ctx.cfg, profile)
    if not curve.empty:
        show_figure(plot_tco_vs_traffic(curve, demand.get("output_tok_s")))
