"""Step 1 view: the workload profile."""

from __future__ import annotations

from helpers.notebook import Context, not_yet, show_table


def profile(ctx: Context) -> dict:
    """Compute the workload profile and save it as ``profile.json``."""
    wl = ctx.cfg.workload
    data = {"source": wl.source.kind, "input_tokens": wl.input_tokens, "output_tokens": wl.output_tokens}
    ctx.save_json("profile.json", data)
    return data


def show(ctx: Context, data: dict) -> None:
    """Display the profile."""
    show_table([data], "Workload")
    not_yet("trace profiling")
