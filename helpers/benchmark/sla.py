"""What "meets the SLA" means, and which measurement stands for an engine configuration.

This is the one place that answers both questions; cost, decision, rollout, the run summary, the
review and the reports index all ask it.

* ``meets_sla(point, sla)``: requests completed, at most ``sla.max_error_share`` of them failed, TTFT
  p95 within ``sla.ttft_p95_ms`` and, when set, ITL p95 within ``sla.itl_p95_ms``: the one definition,
  ``helpers.benchmark.sla_rule.within_sla``, on a point's figures (``probe.judge`` applies it to a probe).
* ``representative(result, cfg)``: what stands for a configuration, with 95% intervals:

  - its **SLA capacity** (``source="capacity"``), estimated from every valid probe of the search
    (``helpers.benchmark.boundary``): the request rate at the capacity (closed-loop streams are mapped to
    the rate they served, ``rate_map``) with its interval, and output and total tok/s as that rate times
    the tokens per request, so that sizing and pricing read one quantity; latency figures come from the
    probes that passed near the capacity (``standing_points``);
  - or, with the search disabled, its trials at a **fixed load** (``source="fixed"``): means over the
    trials that kept up;
  - or nothing (``source="none"``): a configuration with grid points only (an engine that died first,
    no evidence phase, a run made before trials existed) decides nothing. A grid point is one sample of
    closed-loop waves and never stands for a configuration.
* ``capacity_side(result, cfg, accelerators)``: the configuration as one side of a capacity comparison
  (``helpers.benchmark.capacity_compare``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import stats as st

from helpers.benchmark.boundary import WINDOW_RATIO, estimate_capacity
from helpers.benchmark.capacity_compare import Side, rate_at_end
from helpers.benchmark.judged import EVIDENCE_PHASES, kept_up, load_of, point_readings
from helpers.benchmark.probe import Probe
from helpers.benchmark.sla_rule import within_sla
from helpers.benchmark.stats import mean_ci
from helpers.core.config import SLA, PlaybookConfig
from helpers.run.records import CapacityEstimate, EngineResult, Figure, Point, Representative

GRID_PHASES = ("sweep", "tune")
"""Phases whose points are load levels of the grid (a replay is not a controlled load)."""


def error_share(point: Point) -> float:
    """Failed requests over attempted ones (0 when none were attempted)."""
    attempted = point.requests + point.errors
    return point.errors / attempted if attempted else 0.0


def meets_sla(point: Point, sla: SLA) -> bool:
    """Whether ``point`` met the SLA: the one definition (``sla_rule.within_sla``) on the point's figures."""
    return within_sla(point.requests, point.ttft_ms_p95, point.itl_ms_p95, error_share(point), sla)


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


def _estimate_of(result: EngineResult, cfg: PlaybookConfig | None = None) -> CapacityEstimate | None:
    """The capacity estimate of a searched configuration; None without a search.

    The recorded one, else (with ``cfg``) one made now from its stored probes: a record made before
    estimates existed.
    """
    cap = result.capacity
    if cap is None or not cap.searched:
        return None
    if cap.estimate is not None or cfg is None:
        return cap.estimate
    readings = point_readings(result, cfg)
    if not readings:
        return None
    s = cfg.evidence.search
    cap.estimate = estimate_capacity(readings, axis=cap.axis, target_rel=s.target_rel_ci)
    return cap.estimate


def settle_estimates(results: list[EngineResult], cfg: PlaybookConfig) -> list[EngineResult]:
    """Give each searched configuration of a record made before estimates existed its estimate, from its probes.

    Call it where results and the config first meet (decision, cost, claims, rollout, summary): what stands
    beside a capacity (``standing_points``, ``in_flight.in_flight``) then reads the same estimate whichever
    function asks first. Returns ``results``.
    """
    for r in results:
        _estimate_of(r, cfg)
    return results


def _judged(point: Point) -> Probe:
    return Probe.model_validate(point.probe)


def _key(probe: Probe) -> str:
    """A probe's key among the estimate's window (``boundary.Reading.key``)."""
    return probe.stream or f"{probe.load:.5g}"


def standing_points(result: EngineResult) -> list[Point]:
    """The measurements that stand beside a configuration's figures (latencies, requests in flight).

    At a searched capacity: the probes that passed within the estimate's window at loads up to the capacity
    (else the highest passing probe below it). At a fixed load: the trials at that load that kept up.
    """
    cap, est = result.capacity, _estimate_of(result)
    if est is not None:
        value = est.value or est.low
        if value is None:
            return []
        axis = cap.axis if cap is not None else "rate"
        probes = [(p, _judged(p)) for p in result.points if p.phase in EVIDENCE_PHASES and p.requests > 0 and p.probe]
        passing = [(p, q) for p, q in probes if q.passed and not q.superseded and q.delivered]
        below = [(p, q) for p, q in passing if load_of(p, axis) <= value * (1 + 1e-9)]
        near = [p for p, q in below if load_of(p, axis) >= value / WINDOW_RATIO and _key(q) in est.window]
        if near:
            return near
        return [max(below, key=lambda pq: load_of(pq[0], axis))[0]] if below else []
    if cap is None or cap.trial_load is None:
        return []
    at = [p for p in trial_points(result) if load_of(p, cap.axis) == cap.trial_load]
    return [p for p in at if kept_up(p)]


@dataclass(frozen=True)
class RateMap:
    """Log load → log request rate served: a least-squares line, and how well it is known at a load.

    The rate axis maps a load to itself (no points behind it, nothing to add). On the concurrency axis the
    line is fitted over the points near the capacity, and ``half(z)`` is the 95% half-width of its prediction
    at ``z`` (Student t over the residuals). Near saturation the served rate is flat in the streams: the
    streams' interval maps to an interval of almost no width, and the points' own spread is all that says
    how well the rate is known (a CPU run of 2026-12-07 read 1.54-2.11 req/s near one edge, and without it
    the difference of two capacities came out ±0.4%).
    """

    icept: float = 0.0
    slope: float = 1.0
    s2: float = 0.0  # variance of one point's log rate about the line
    n: int = 0  # points behind the line (0: the rate axis, exact)
    z_mean: float = 0.0
    sxx: float = 0.0  # sum of squared deviations of their log loads (0: one load, a constant shift)
    dof: int = 0

    def __call__(self, z: float) -> float:
        """The log rate served at log load ``z``."""
        return self.icept + self.slope * z

    def half(self, z: float, confidence: float = 0.95) -> float:
        """The half-width (log scale) of the line's prediction at log load ``z``; 0 on the rate axis."""
        if self.n == 0:
            return 0.0
        lever = (z - self.z_mean) ** 2 / self.sxx if self.sxx > 0 else 0.0
        q = 0.5 + confidence / 2
        t = float(st.t.ppf(q, df=self.dof)) if self.dof >= 1 else float(st.norm.ppf(q))
        return t * math.sqrt(self.s2 * (1 / self.n + lever))


def rate_map(result: EngineResult) -> RateMap:
    """Log load → log request rate served, for a configuration's capacity axis (``RateMap``).

    On the rate axis the load is the rate. On the concurrency axis, a least-squares line of log req/s
    against log streams over the sustained probes and grid points within ``WINDOW_RATIO`` of the capacity
    (all of them when those hold fewer than two loads); with one load only, req/s in proportion to streams.
    The spread about the line is the residuals' (n − 2 degrees of freedom); with no residual to read (two
    points), each point's counting noise, one over its requests.
    """
    cap = result.capacity
    if cap is None or cap.axis == "rate":
        return RateMap()
    est = _estimate_of(result)
    centre = (est.value or est.low) if est is not None else None
    pts = [
        p
        for p in result.points
        if p.phase in (*EVIDENCE_PHASES, "sweep") and p.req_s > 0 and p.concurrency > 0
        and kept_up(p)
    ]  # fmt: skip
    if centre:
        near = [p for p in pts if abs(math.log(p.concurrency / centre)) <= math.log(WINDOW_RATIO)]
        pts = near if len({p.concurrency for p in near}) >= 2 else pts
    if not pts:
        return RateMap(icept=math.nan)
    z = np.log([p.concurrency for p in pts])
    y = np.log([p.req_s for p in pts])
    counting = float(np.mean([1 / max(1, p.requests) for p in pts]))
    if np.unique(z).size < 2:
        shift, dof = float(np.mean(y - z)), z.size - 1
        s2 = float(np.var(y - z, ddof=1)) if dof >= 1 else counting
        return RateMap(icept=shift, slope=1.0, s2=s2, n=z.size, z_mean=float(z.mean()), dof=dof)
    slope, icept = np.polyfit(z, y, 1)
    dof = z.size - 2
    resid = y - (icept + slope * z)
    s2 = float((resid**2).sum() / dof) if dof >= 1 else counting
    sxx = float(((z - z.mean()) ** 2).sum())
    return RateMap(float(icept), float(slope), s2, z.size, float(z.mean()), sxx, dof)


def _figure(values: list[float | None]) -> Figure | None:
    xs = [float(v) for v in values if v is not None]
    if not xs:
        return None
    e = mean_ci(xs)
    return Figure(mean=e.mean, low=e.low, high=e.high, n=e.n)


def _scaled(rate: Figure | None, per_request: float | None) -> Figure | None:
    """A rate figure times a per-request amount (tokens), interval and all."""
    if rate is None or per_request is None:
        return None
    k = float(per_request)
    return Figure(
        mean=rate.mean * k,
        low=None if rate.low is None else rate.low * k,
        high=None if rate.high is None else rate.high * k,
        n=rate.n,
    )


def from_capacity(result: EngineResult, cfg: PlaybookConfig) -> Representative | None:
    """The searched SLA capacity as one representative (module docstring); None without an estimate."""
    cap, est = result.capacity, _estimate_of(result, cfg)
    if cap is None or est is None or est.status not in ("estimated", "at_least"):
        return None
    value = est.value if est.status == "estimated" else est.low
    if not value:
        return None
    to_rate = rate_map(result)

    def rate(x: float | None) -> float | None:  # an end taken conservatively (``rate_at_end``)
        return None if x is None else math.exp(rate_at_end(to_rate, math.log(value), math.log(x)))

    n = max(1, len(est.window) or est.probes)
    capacity = Figure(mean=value, low=est.low, high=est.high, n=n)
    # near saturation the served rate is flat in the streams, and its fitted slope may come out negative:
    # the interval is the span of the two ends' rates, around the estimate's, widened by the line's own spread
    ends = [r for r in (rate(est.low), rate(est.high)) if r is not None and math.isfinite(r)]
    mid = rate(value)
    lo, hi = (min([*ends, mid]), max([*ends, mid])) if len(ends) == 2 and mid is not None else (None, None)
    if lo is not None and hi is not None and mid is not None:  # the line's own spread, in quadrature
        noise = to_rate.half(math.log(value))
        lo = mid * math.exp(-math.hypot(math.log(mid / lo), noise))
        hi = mid * math.exp(math.hypot(math.log(hi / mid), noise))
    rate_fig = Figure(mean=mid if mid is not None else math.nan, low=lo, high=hi, n=n)
    standing = standing_points(result)
    pool = standing or [p for p in result.points if p.phase in EVIDENCE_PHASES and p.requests > 0]
    out_tokens = _mean([p.output_tokens_mean for p in pool]) or float(cfg.workload.output_tokens)
    in_tokens = _mean([p.input_tokens_mean for p in pool]) or float(cfg.workload.input_tokens)
    unit = "req/s" if cap.axis == "rate" else "streams"
    served = "" if cap.axis == "rate" else f", serving {rate_fig.mean:.3g} req/s there"
    return Representative(
        label=result.label,
        engine=result.engine,
        source="capacity",
        meets_sla=True,
        phase="search",
        concurrency=max(1, math.floor(value)) if cap.axis == "concurrency" else None,
        capacity=capacity,
        conclusive=est.conclusive,
        lower_bound=est.status == "at_least",
        request_rate=rate_fig,
        output_tok_s=_scaled(rate_fig, out_tokens),
        total_tok_s=_scaled(rate_fig, None if in_tokens is None or out_tokens is None else in_tokens + out_tokens),
        ttft_ms_p95=_figure([p.ttft_ms_p95 for p in standing]),
        itl_ms_p95=_figure([p.itl_ms_p95 for p in standing]),
        requests=est.requests or sum(p.requests for p in standing),
        knobs=dict(pool[0].knobs) if pool else {},
        basis=f"SLA capacity {est.text(unit)}{served}, from {est.probes} valid probes ({est.note})",
    )


def _mean(values: list[float | None]) -> float | None:
    xs = [float(v) for v in values if v is not None]
    return sum(xs) / len(xs) if xs else None


def from_fixed_trials(result: EngineResult, cfg: PlaybookConfig) -> Representative | None:
    """The trials at a fixed load (search disabled) that kept up, as one representative (95% intervals)."""
    cap, trials = result.capacity, standing_points(result)
    if cap is None or cap.searched or cap.trial_load is None or not trials:
        return None
    ttft = _figure([p.ttft_ms_p95 for p in trials])
    itl = _figure([p.itl_ms_p95 for p in trials])
    met = within_sla(  # the one definition, on the trials' mean latencies and their worst error share
        sum(p.requests for p in trials),
        ttft.mean if ttft is not None else None,
        itl.mean if itl is not None else None,
        max(error_share(p) for p in trials),
        cfg.sla,
    )
    return Representative(
        label=result.label,
        engine=result.engine,
        source="fixed",
        meets_sla=met,
        phase="trial",
        concurrency=int(cap.trial_load),
        request_rate=_figure([p.req_s for p in trials]),
        output_tok_s=_figure([p.output_tok_s for p in trials]),
        total_tok_s=_figure([p.total_tok_s for p in trials]),
        ttft_ms_p95=ttft,
        itl_ms_p95=itl,
        requests=sum(p.requests for p in trials),
        knobs=dict(trials[0].knobs),
        basis=f"{len(trials)} trial(s) at a fixed load (search disabled: not a capacity), "
        f"{cap.trial_load:.3g} concurrent streams ({cap.note})",
    )


def representative(result: EngineResult, cfg: PlaybookConfig) -> Representative:
    """The measurement that stands for ``result`` (module docstring)."""
    measured = from_capacity(result, cfg) or from_fixed_trials(result, cfg)
    if measured is not None:
        return measured
    est = _estimate_of(result, cfg)
    if not grid_points(result) and not (result.capacity and result.capacity.probes):
        why = "no measured point"
    elif (est is not None and est.status == "below") or (est is None and result.capacity and result.capacity.searched):
        why = f"no load met the SLA ({sla_text(cfg.sla)})" + (f": {est.note}" if est is not None else "")
    elif est is not None and est.status == "not_measured":
        why = f"too few valid probes for a capacity: not measured ({est.note})"
    else:
        why = "no repeated trials or capacity search (grid points only: a single sample never stands for it)"
    return Representative(label=result.label, engine=result.engine, source="none", meets_sla=False, basis=why)


def representatives(results: list[EngineResult], cfg: PlaybookConfig) -> dict[str, Representative]:
    """The representative of every configuration, by label, in result order."""
    return {r.label: representative(r, cfg) for r in results}


def capacity_side(result: EngineResult, cfg: PlaybookConfig, accelerators: int) -> Side | None:
    """The configuration as one side of a capacity comparison; None without a searched capacity."""
    est = _estimate_of(result, cfg)
    if est is None:
        return None
    to_rate = rate_map(result)
    return Side(result.label, est, point_readings(result, cfg), accelerators, to_rate, to_rate.half)


def sla_share(result: EngineResult, cfg: PlaybookConfig) -> float | None:
    """Share of the configuration's grid points that meet the SLA (None without points)."""
    points = grid_points(result)
    return sum(meets_sla(p, cfg.sla) for p in points) / len(points) if points else None
