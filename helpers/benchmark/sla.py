"""What "meets the SLA" means, and which measurement stands for an engine configuration.

This is the one place that answers both questions; cost, decision, rollout, the run summary, the
review and the reports index all ask it.

* ``meets_sla(point, sla)``: requests completed, at most ``sla.max_error_share`` of them failed, TTFT
  p95 within ``sla.ttft_p95_ms`` and, when set, ITL p95 within ``sla.itl_p95_ms``.
* ``representative(result, cfg)``: the repeated trials stand for a configuration, as means with 95%
  intervals: the trials at its measured SLA capacity, or, with the search disabled, the trials at a
  fixed load (``helpers.benchmark.trials``). No grid point ever does: a grid point is one sample of
  closed-loop waves, so a configuration without trials (a run made before trials existed, an engine
  that died first, trials disabled) has nothing standing for it (``source="none"``) and decides nothing.
"""

from __future__ import annotations

from helpers.benchmark.stats import mean_ci
from helpers.core.config import SLA, PlaybookConfig
from helpers.run.records import EngineResult, Figure, Point, Representative

GRID_PHASES = ("sweep", "tune")
"""Phases whose points are load levels of the grid (a replay is not a controlled load)."""


def error_share(point: Point) -> float:
    """Failed requests over attempted ones (0 when none were attempted)."""
    attempted = point.requests + point.errors
    return point.errors / attempted if attempted else 0.0


def meets_sla(point: Point, sla: SLA) -> bool:
    """Whether ``point`` met the SLA: see the module docstring for the one definition."""
    if point.requests <= 0 or error_share(point) > sla.max_error_share:
        return False
    if point.ttft_ms_p95 is None or point.ttft_ms_p95 > sla.ttft_p95_ms:
        return False
    return not (sla.itl_p95_ms is not None and point.itl_ms_p95 is not None and point.itl_ms_p95 > sla.itl_p95_ms)


def sla_text(sla: SLA) -> str:
    """The SLA in words, for tables and sentences."""
    parts = [f"TTFT p95 ≤ {sla.ttft_p95_ms:,.0f} ms"]
    if sla.itl_p95_ms is not None:
        parts.append(f"ITL p95 ≤ {sla.itl_p95_ms:,.0f} ms")
    parts.append(f"≤ {100 * sla.max_error_share:g}% failed requests")
    return ", ".join(parts)


def grid_points(result: EngineResult) -> list[Point]:
    """The configuration's grid points (sweep and tuning), in measured order."""
    return [p for p in result.points if p.phase in GRID_PHASES and p.requests > 0]


def trial_points(result: EngineResult) -> list[Point]:
    """The configuration's repeated trials (phase ``trial``), whatever load they ran at."""
    return [p for p in result.points if p.phase == "trial" and p.requests > 0]


def load_of(point: Point, axis: str) -> float:
    """The load a stored probe or trial ran at: its offered rate (rate axis), else its concurrency."""
    return point.offered_rate if axis == "rate" and point.offered_rate else float(point.concurrency)


def standing_trials(result: EngineResult) -> list[Point]:
    """The trials that stand for the configuration: those at its trial load (none without one).

    A run folder rebuilt from its points may also hold an earlier attempt's trials at another load.
    """
    cap = result.capacity
    if cap is None or cap.trial_load is None:
        return []
    return [p for p in trial_points(result) if load_of(p, cap.axis) == cap.trial_load]


def _estimate(values: list[float | None]) -> Figure | None:
    xs = [float(v) for v in values if v is not None]
    if not xs:
        return None
    e = mean_ci(xs)
    return Figure(mean=e.mean, low=e.low, high=e.high, n=e.n)


def from_trials(result: EngineResult, cfg: PlaybookConfig) -> Representative | None:
    """The trials at the measured SLA capacity, or at the fixed load, as one representative (95% intervals)."""
    cap, trials = result.capacity, standing_trials(result)
    if cap is None or cap.trial_load is None or not trials:
        return None
    ttft = _estimate([p.ttft_ms_p95 for p in trials])
    itl = _estimate([p.itl_ms_p95 for p in trials])
    met = (
        ttft is not None
        and ttft.mean <= cfg.sla.ttft_p95_ms
        and all(error_share(p) <= cfg.sla.max_error_share for p in trials)
        and not (cfg.sla.itl_p95_ms is not None and itl is not None and itl.mean > cfg.sla.itl_p95_ms)
    )
    unit = "req/s" if cap.axis == "rate" else "concurrent streams"
    where = "the SLA capacity" if cap.searched else "a fixed load (search disabled: not a capacity)"
    return Representative(
        label=result.label,
        engine=result.engine,
        source="capacity" if cap.searched else "fixed",
        meets_sla=met,
        phase="trial",
        concurrency=int(cap.trial_load) if cap.axis == "concurrency" else None,
        request_rate=_estimate([p.req_s for p in trials]),
        output_tok_s=_estimate([p.output_tok_s for p in trials]),
        total_tok_s=_estimate([p.total_tok_s for p in trials]),
        ttft_ms_p95=ttft,
        itl_ms_p95=itl,
        requests=sum(p.requests for p in trials),
        knobs=dict(trials[0].knobs),
        basis=f"{len(trials)} trial(s) at {where}, {cap.trial_load:.3g} {unit} ({cap.note})",
    )


def representative(result: EngineResult, cfg: PlaybookConfig) -> Representative:
    """The measurement that stands for ``result`` (module docstring)."""
    measured = from_trials(result, cfg)
    if measured is not None:
        return measured
    if not grid_points(result):
        why = "no measured point"
    elif result.capacity is not None and result.capacity.searched and result.capacity.capacity is None:
        why = f"no load met the SLA ({sla_text(cfg.sla)}): nothing to repeat"
    else:
        why = "no repeated trials (grid points only: a single sample never stands for a configuration)"
    return Representative(label=result.label, engine=result.engine, source="none", meets_sla=False, basis=why)


def representatives(results: list[EngineResult], cfg: PlaybookConfig) -> dict[str, Representative]:
    """The representative of every configuration, by label, in result order."""
    return {r.label: representative(r, cfg) for r in results}


def sla_share(result: EngineResult, cfg: PlaybookConfig) -> float | None:
    """Share of the configuration's grid points that meet the SLA (None without points)."""
    points = grid_points(result)
    return sum(meets_sla(p, cfg.sla) for p in points) / len(points) if points else None
