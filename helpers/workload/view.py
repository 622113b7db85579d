"""Step 1 in the notebook: ``profile`` computes and saves the ``Profile``; ``show`` only displays it."""

from __future__ import annotations

import pandas as pd

from helpers.report.notebook import Context, say, show_figure, show_table
from helpers.workload.levels import scale_note, sweep_levels, workload_shapes
from helpers.workload.plots import plot_concurrency, plot_lengths, plot_prefix_reuse
from helpers.workload.profile import Profile, profile_from_config
from helpers.workload.shapes import shapes_reuse_ratio


def profile(ctx: Context) -> Profile:
    """Profile the workload and save it as ``profile.json``."""
    prof = profile_from_config(ctx.cfg)
    ctx.folder.save(prof)
    return prof


def _stats_rows(p: Profile) -> pd.DataFrame:
    rows = []
    for name, s in (("input tokens", p.input_tokens), ("output tokens", p.output_tokens)):
        rows.append({"": name, "mean": s.mean, "p50": s.p50, "p95": s.p95, "p99": s.p99})
    rows.append(
        {
            "": f"concurrency ({p.concurrency_method})",
            "mean": p.concurrency_mean,
            "p50": p.concurrency_p50,
            "p95": p.concurrency_p95,
            "p99": p.concurrency_p99,
        }
    )
    return pd.DataFrame(rows)


def show(ctx: Context, p: Profile) -> None:
    """Display the profile: numbers, the config's answers beside them, plots and caveats."""
    cfg = ctx.cfg
    facts = [
        ("source", p.source),
        ("format", p.format),
        ("requests profiled", f"{p.requests:,}"),
        ("malformed lines skipped", f"{p.skipped_lines:,}"),
        ("duration (s)", f"{p.duration_s:,.1f}"),
        ("mean arrival rate (req/s), measured", _num(p.mean_requests_per_s)),
        (f"peak arrival rate (req/s, {p.peak_window_s:g} s window), measured", _num(p.peak_requests_per_s)),
        (
            "peak / mean traffic (req/s), from config",
            f"{_num(cfg.workload.peak_requests_per_s)} / {_num(cfg.workload.mean_requests_per_s)}",
        ),
        (
            "prefix reuse (share of prompt tokens a prefix cache could serve)",
            _num(p.prefix_reuse_ratio, "{:.3f}")
            if p.prefix_reuse_ratio is not None
            else f"unknown: {p.prefix_reuse_reason}",
        ),
        ("model updates per month, from config", f"{cfg.cadence.updates_per_month:g}"),
        ("models served side by side, from config", f"{cfg.cadence.concurrent_models}"),
    ]
    show_table(pd.DataFrame(facts, columns=["what", "value"]), "Workload profile")
    show_table(_stats_rows(p), "Distributions")
    if p.prefix_reuse is not None:
        show_table(pd.DataFrame([p.prefix_reuse.model_dump(mode="json")]), "Where the prefix reuse comes from")
    if p.concurrency_method == "estimated":
        say(
            f"Concurrency is estimated: the trace has no end times, so each request's duration comes from the "
            f"latency model {p.concurrency_model}.",
            "warn",
        )
    for n in p.notes:
        say(n, "note")
    for ex in p.skipped_examples:
        say(f"skipped: {ex}", "warn")
    show_figure(plot_lengths(p))
    show_figure(plot_concurrency(p))
    if p.prefix_reuse_ratio is not None:
        show_figure(plot_prefix_reuse(p))
    shapes = workload_shapes(cfg, ctx.run_dir)
    say(
        f"The benchmark (step 5) replays {len(shapes)} requests per load level shaped by this workload, at "
        f"concurrency {', '.join(map(str, sweep_levels(cfg, ctx.run_dir)))}; their prompts share "
        f"{shapes_reuse_ratio(shapes):.3f} of their tokens as a common prefix.",
        "note",
    )
    note = scale_note(cfg)
    if note:
        say(note, "warn")


def _num(v: float | None, fmt: str = "{:,.2f}") -> str:
    return "not given" if v is None else fmt.format(v)
