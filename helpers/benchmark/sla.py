"""What "meets the SLA" means, and which measurement stands for an engine configuration.

This is the one place that answers both questions; cost, decision, rollout, the run summary, the
review and the reports index all ask it.

* ``meets_sla(point, sla)``: requests completed, at most ``sla.max_error_share`` of them failed, TTFT
  p95 within ``sla.ttft_p95_ms`` and, when set, ITL p95 within ``sla.itl_p95_ms``.
* ``representative(result, cfg)``: when the configuration has a measured SLA capacity (the capacity
  search and its repeated trials), the trials at that capacity stand for it; otherwise (runs made
  before the search existed, or a configuration whose search could not run) the highest-throughput
  grid point that meets the SLA, else the point closest to meeting it, flagged as missing the SLA.
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


def _figure(value: float | None) -> Figure | None:
    return None if value is None else Figure(mean=float(value))


def from_point(result: EngineResult, point: Point, met: bool, basis: str) -> Representative:
    """A representative made of one grid point."""
    return Representative(
        label=result.label,
        engine=result.engine,
        source="grid",
        meets_sla=met,
        phase=point.phase,
        concurrency=point.concurrency,
        request_rate=_figure(point.req_s),
        output_tok_s=_figure(point.output_tok_s),
        total_tok_s=_figure(point.total_tok_s),
        ttft_ms_p95=_figure(point.ttft_ms_p95),
        itl_ms_p95=_figure(point.itl_ms_p95),
        requests=point.requests,
        knobs=dict(point.knobs),
        basis=basis,
    )


def grid_points(result: EngineResult) -> list[Point]:
    """The configuration's grid points (sweep and tuning), in measured order."""
    return [p for p in result.points if p.phase in GRID_PHASES and p.requests > 0]


def trial_points(result: EngineResult) -> list[Point]:
    """The repeated trials at the configuration's SLA capacity."""
    return [p for p in result.points if p.phase == "trial" and p.requests > 0]


def _estimate(values: list[float | None]) -> Figure | None:
    xs = [float(v) for v in values if v is not None]
    if not xs:
        return None
    e = mean_ci(xs)
    return Figure(mean=e.mean, low=e.low, high=e.high, n=e.n)


def from_trials(result: EngineResult, cfg: PlaybookConfig) -> Representative | None:
    """The trials at the measured SLA capacity as one representative (means with 95% intervals)."""
    cap = result.capacity
    trials = trial_points(result)
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
    return Representative(
        label=result.label,
        engine=result.engine,
        source="capacity",
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
        basis=f"{len(trials)} trial(s) at the SLA capacity, {cap.trial_load:.3g} {unit} ({cap.note})",
    )


def representative(result: EngineResult, cfg: PlaybookConfig) -> Representative:
    """The measurement that stands for ``result`` (module docstring)."""
    measured = from_trials(result, cfg)
    if measured is not None:
        return measured
    points = grid_points(result)
    if not points:
        return Representative(
            label=result.label, engine=result.engine, source="none", meets_sla=False, basis="no measured point"
        )
    ok = [p for p in points if meets_sla(p, cfg.sla)]
    if ok:
        best = max(ok, key=lambda p: (p.output_tok_s, -p.concurrency))
        basis = f"highest output throughput among the {len(ok)} of {len(points)} grid points that meet the SLA"
        return from_point(result, best, True, basis)
    closest = min(points, key=lambda p: (p.ttft_ms_p95 if p.ttft_ms_p95 is not None else float("inf"), p.concurrency))
    return from_point(result, closest, False, f"no grid point meets the SLA ({sla_text(cfg.sla)}); closest shown")


def representatives(results: list[EngineResult], cfg: PlaybookConfig) -> dict[str, Representative]:
    """The representative of every configuration, by label, in result order."""
    return {r.label: representative(r, cfg) for r in results}


def sla_share(result: EngineResult, cfg: PlaybookConfig) -> float | None:
    """Share of the configuration's grid points that meet the SLA (None without points)."""
    points = grid_points(result)
    return sum(meets_sla(p, cfg.sla) for p in points) / len(points) if points else None
