"""The SLA capacity of a configuration estimated from all its probes, with a 95% interval.

Every judged probe at load x carries one *margin* per criterion it was judged on (``helpers.benchmark.probe``):
how far that criterion is past its limit on a log scale (log of TTFT p95 over its limit, of ITL p95 over
its limit, of the served-share floor over the share served): ≤ 0 passes, > 0 fails. Each criterion
crosses 0 at its own load; the capacity is the lowest of them (the first criterion to fail).

* **Where**: for each criterion, an isotonic (monotone) fit of its margins against log load
  (``scipy.optimize.isotonic_regression``) pools probes that contradict the trend instead of believing
  one of them, and puts a first crossing between two adjacent loads.
* **With what interval**: the probes near that crossing (the *window*: within ``WINDOW_RATIO`` of it in
  load, margins within ``max_margin``) are fitted by least squares against log load, with a straight line,
  or a parabola once there are ``QUADRATIC_MIN`` of them at three loads or more (TTFT bends upward towards
  saturation, and a line through a bending margin crosses 0 too early: −1.1% to −1.9% on the fake
  engine, against −0.2% to −0.4% with the parabola). The criterion's capacity is where the fit crosses 0;
  its interval is the set of loads whose predicted margin is within Student t of 0 at 95% (for a line,
  Fieller's interval for the root). A flat or falling fit, or too few probes, gives no bounded interval:
  the estimate is not conclusive. More probes near the edge narrow it. Where the fit's set runs out of the
  window on one side only because the margin is nearly flat there, a probe further out that passed (failed)
  by more than the probes' noise closes that end (``helpers.benchmark.edge_bounds``; ``order_bound``).
* **Several criteria**: the capacity is the lowest criterion's, its interval runs from the lowest low end
  to the lowest high end (a criterion that never failed bounds it from below by its highest passing load).
* A probe that failed without a size (requests that outgrew the probe, errors over their share, a growing
  queue: ``Probe.censored``) caps the capacity and the interval at its load. When no sized criterion fails,
  the capacity is "at least" the highest passing load, and below the lowest such failure above it (``high``):
  a bracket, without a 95% interval.

The comparison of two configurations' capacities is ``helpers.benchmark.capacity_compare``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field
from scipy import stats as st
from scipy.optimize import isotonic_regression

from helpers.benchmark.edge_bounds import monotone_bounds
from helpers.benchmark.probe import SERVED, Probe
from helpers.run.records import CapacityEstimate, fmt_load

ORDER_NOTE = "an end from the probes' monotone order (the edge fit's own interval is open there)"
"""The note of a criterion whose interval has an end from ``edge_bounds`` (``CapacityEstimate.order_bound``)."""

CENSORED_MARGIN = 0.1
"""The margin a failed probe without a size gets in the monotone fit of the verdicts (a clear, small failure)."""
WINDOW_RATIO = 1.5
"""Half-width (as a load ratio) of the window of probes the edge is fitted on, around the monotone crossing.

A fixed window, not one narrowed as probes accrue: on fake engines with a known capacity, windows chosen
from the data (narrowest that holds enough probes) covered the capacity in 73-90% of searches against
93-95% for this one (``tests/benchmark/test_capacity_statistics.py``)."""


class Reading(BaseModel):
    """One valid probe as the estimator sees it."""

    model_config = ConfigDict(extra="forbid")

    load: float = Field(gt=0, description="Offered rate (req/s) or streams.")
    margins: dict[str, float] = Field(default_factory=dict, description="Each sized criterion's margin (log scale).")
    passed: bool
    censored: bool = Field(default=False, description="Failed on a criterion without a size.")
    stream: str | None = Field(default=None, description="Arrival schedule and prompts it ran on (pairing key).")
    requests: int = Field(default=0, ge=0, description="Requests the probe completed.")
    served: float | None = Field(default=None, description="Share of the offered rate served (the 'served' margin's).")

    @property
    def key(self) -> str:
        """The pairing key: its stream, else its load."""
        return self.stream or f"{self.load:.5g}"

    @property
    def verdict_margin(self) -> float:
        """The margin of its verdict: the largest criterion's, a censored failure's small one, or a pass's."""
        if self.margins and not self.censored:
            return max(self.margins.values())
        return CENSORED_MARGIN if not self.passed else -CENSORED_MARGIN


def readings_of(probes: Sequence[Probe]) -> list[Reading]:
    """The estimator's readings of judged probes: those the client delivered and that were not measured again."""
    return [
        Reading(
            load=p.load,
            margins=dict(p.margins),
            passed=p.passed,
            censored=p.censored or (not p.passed and not p.margins),
            stream=p.stream,
            requests=p.requests,
            served=p.served_ratio
            or (p.achieved_rate / p.offered_rate if p.offered_rate and p.achieved_rate is not None else None),
        )
        for p in probes
        if p.delivered and not p.superseded and p.load > 0
    ]


def monotone_crossing(
    loads: Sequence[float], margins: Sequence[float]
) -> tuple[float | None, float | None, float | None]:
    """(crossing, log load below, log load above) of the isotonic fit of ``margins`` against log load.

    None for the crossing when the fit never changes sign (every load passes, or every load fails); the
    log load below is then the highest load (all pass) and the one above None, or the reverse.
    """
    xs = sorted(set(loads))
    z = np.log(xs)
    y = np.array([np.mean([m for x2, m in zip(loads, margins, strict=True) if x2 == x]) for x in xs])
    w = np.array([sum(1 for x2 in loads if x2 == x) for x in xs], dtype=float)
    fit = isotonic_regression(y, weights=w, increasing=True).x
    above = np.nonzero(fit > 0)[0]
    if above.size == 0:
        return None, float(z[-1]), None
    j = int(above[0])
    if j == 0:
        return None, None, float(z[0])
    lo_z, hi_z, lo_f, hi_f = float(z[j - 1]), float(z[j]), float(fit[j - 1]), float(fit[j])
    return lo_z + (hi_z - lo_z) * (0.0 - lo_f) / (hi_f - lo_f), lo_z, hi_z


Pair = tuple[Reading, float]  # a reading and its margin on one criterion


def window_of(pairs: Sequence[Pair], crossing: float, max_margin: float) -> list[Pair]:
    """The probes one criterion's edge is fitted on: within ``WINDOW_RATIO`` of the crossing, small margins.

    Margins within ``max_margin`` only.

    The nearest pass below and failure above are always in it, so that the window brackets the edge.
    """
    span = math.log(WINDOW_RATIO)
    chosen = [q for q in pairs if abs(math.log(q[0].load) - crossing) <= span and abs(q[1]) <= max_margin]
    below = [q for q in pairs if q[1] <= 0 and math.log(q[0].load) <= crossing]
    above = [q for q in pairs if q[1] > 0 and math.log(q[0].load) >= crossing]
    for side in (below, above):
        if side and not any(q in chosen for q in side):
            chosen.append(min(side, key=lambda q: abs(math.log(q[0].load) - crossing)))
    return chosen


def _criterion(
    readings: Sequence[Reading], name: str, ceiling: float, confidence: float, max_margin: float
) -> tuple[str, float | None, float | None, float | None, float | None, list[Pair], str]:
    """One criterion's (status, value, low, high, slope, window, note), in log load; ``ceiling``: a censored cap."""
    pairs = [(r, r.margins[name]) for r in readings if name in r.margins]
    if not pairs:
        return "absent", None, None, None, None, [], ""
    crossing, lo_z, hi_z = monotone_crossing([r.load for r, _ in pairs], [m for _, m in pairs])
    if crossing is None and hi_z is None:
        return "at_least", None, lo_z, None, None, [], ""
    if crossing is None:
        return "below", None, None, hi_z, None, [], ""
    win = window_of(pairs, crossing, max_margin)
    z = np.log([r.load for r, _ in win])
    y = np.array([m for _, m in win], dtype=float)
    if name == SERVED and all(r.served for r, _ in win):
        floors = y + np.log([r.served for r, _ in win])
        fit = fit_hinge(z, y, floors, confidence, [r.key for r, _ in win])
        if fit is None or fit.root is None:
            note = "no probe near the edge served less than it was offered: no interval"
            return "estimated", min(crossing, ceiling), None, None, None, win, note
        if fit.low is None or fit.high is None:
            return "estimated", min(fit.root, ceiling), None, None, 1.0, win, "one probe past the edge: no interval"
        return "estimated", min(fit.root, ceiling), min(fit.low, ceiling), min(fit.high, ceiling), 1.0, win, ""
    if len(win) < 3 or np.unique(z).size < 2:
        note = f"{len(win)} probe(s) near the edge: at least 3 at two loads or more give an interval"
        return "estimated", min(crossing, ceiling), None, None, None, win, note
    fit = fit_edge(z, y, crossing, confidence)
    root, slope, low, high = (fit.root, fit.slope, fit.low, fit.high) if fit else (None, None, None, None)
    if root is None or slope is None or slope <= 0:
        note = "the margin does not rise with load among the probes near the edge: no interval"
        return "estimated", min(crossing, ceiling), None, None, None, win, note
    if low is None or high is None:
        # an end the fit leaves open may be closed by a probe further out that passed (failed) past the noise
        by_order = monotone_bounds(
            [r.load for r, _ in pairs], [m for _, m in pairs], [r.requests for r, _ in pairs], fit.s2, fit.dof,
            float(np.mean([r.requests for r, _ in win])), confidence,
        )  # fmt: skip
        # (a probe's load on the estimate's far side would leave it outside its own interval: the estimate bounds it)
        low = low if low is not None else (None if by_order[0] is None else min(by_order[0], root))
        high = high if high is not None else (None if by_order[1] is None else max(by_order[1], root))
        if low is None or high is None:
            return "estimated", min(root, ceiling), None, None, slope, win, "the probes near the edge are too noisy"
        return "estimated", min(root, ceiling), min(low, ceiling), min(high, ceiling), slope, win, ORDER_NOTE
    return "estimated", min(root, ceiling), min(low, ceiling), min(high, ceiling), slope, win, ""


QUADRATIC_MIN = 7
"""Window probes (at three loads or more) from which the edge is fitted with a parabola, not a line."""


@dataclass
class EdgeFit:
    """A least-squares fit of one criterion's margins near the edge, and what each probe contributed to its root."""

    keys: list[str]  # the window's probes (``Reading.key``), in fit order
    root: float | None  # log load where the fit crosses 0 (None: it does not, rising)
    slope: float | None  # d margin / d log load at the root
    low: float | None  # the root's 95% interval (None: unbounded within the window's span)
    high: float | None
    residuals: np.ndarray  # margin less the fit, per probe
    influence: np.ndarray  # d root / d margin, per probe (the delta method's weights)
    s2: float  # residual variance
    dof: int


def fit_edge(z: np.ndarray, y: np.ndarray, near: float, confidence: float, keys: Sequence[str] = ()) -> EdgeFit | None:
    """Fit margins ``y`` at log loads ``z`` by a line, or a parabola, and find where the fit rises through 0.

    A parabola (with ``QUADRATIC_MIN`` probes at three loads or more) follows a margin that bends near the edge
    (TTFT rises ever faster towards saturation), which a line would cross too early. The interval inverts the
    fit's prediction: the loads whose predicted margin is within Student t of 0 at ``confidence`` (for a line,
    this is Fieller's interval). None when there are too few probes for any residual.
    """
    quad = z.size >= QUADRATIC_MIN and np.unique(z).size >= 3
    u = z - near

    def design(v: np.ndarray) -> np.ndarray:
        return np.column_stack([np.ones_like(v), v, v * v] if quad else [np.ones_like(v), v])

    x = design(u)
    dof = z.size - x.shape[1]
    if dof < 1:
        return None
    beta, *_ = np.linalg.lstsq(x, y, rcond=None)
    resid = y - x @ beta
    s2 = float((resid**2).sum() / dof)
    inv = np.linalg.pinv(x.T @ x)
    span = max(float(np.ptp(z)), 0.05)
    grid = np.linspace(-span, span, 2001)
    g = design(grid)
    pred = g @ beta
    crossings = np.nonzero(np.diff(np.sign(pred)) > 0)[0]  # rising through 0
    none = EdgeFit(list(keys), None, None, None, None, resid, np.zeros_like(y), s2, dof)
    if crossings.size == 0:
        return none
    i = int(crossings[np.argmin(np.abs(grid[crossings]))])
    root = float(grid[i] - pred[i] * (grid[i + 1] - grid[i]) / (pred[i + 1] - pred[i]))
    slope = float(beta[1] + (2 * beta[2] * root if quad else 0.0))
    if slope <= 0:
        return none
    se = np.sqrt(s2 * np.einsum("ij,jk,ik->i", g, inv, g))
    inside = np.abs(pred) <= float(st.t.ppf(0.5 + confidence / 2, df=dof)) * se
    inside[i] = True
    lo = hi = i
    while lo > 0 and inside[lo - 1]:
        lo -= 1
    while hi < grid.size - 1 and inside[hi + 1]:
        hi += 1
    influence = -(design(np.array([root])) @ inv @ x.T)[0] / slope
    return EdgeFit(
        keys=list(keys),
        root=near + root,
        slope=slope,
        low=None if lo == 0 else near + float(grid[lo]),
        high=None if hi == grid.size - 1 else near + float(grid[hi]),
        residuals=resid,
        influence=influence,
        s2=s2,
        dof=dof,
    )


def fit_hinge(
    z: np.ndarray, y: np.ndarray, floors: np.ndarray, confidence: float, keys: Sequence[str] = ()
) -> EdgeFit | None:
    """The served share's edge: below its capacity an engine serves all it is offered, past it only its own rate.

    The margin of the served criterion is log(floor / share served); an engine of service rate μ serves
    min(1, μ / load), so the margin less log floor is max(0, log load − log μ) plus noise: a hinge of known
    slope 1 whose one unknown is log μ. Least squares over the window: log μ is the mean of log(load ×
    share served) (the log of the rate served) over the probes past the hinge, found by iterating which
    probes those are; its 95% interval is Student t over the residuals of all the window's probes. The
    criterion's capacity is where the margin crosses 0: log μ − log floor (the floor at the probes past it).
    A line or parabola through such a hinge reads the flat part as a slope: on a fake engine it missed the
    edge by 5-7% with no bounded interval, where the hinge reads it within its interval.
    """
    excess = y - floors
    over = excess > 0
    if not over.any():
        return None
    u = float(np.mean(z[over] - excess[over]))
    for _ in range(20):
        new = z > u
        if not new.any() or (new == over).all():
            break
        over = new
        u = float(np.mean(z[over] - excess[over]))
    resid = excess - np.maximum(0.0, z - u)
    k, n = int(over.sum()), z.size
    influence = np.where(over, -1.0 / k, 0.0)
    root = u - float(np.mean(floors[over]))
    if n < 2:
        return EdgeFit(list(keys), root, 1.0, None, None, resid, influence, 0.0, 0)
    dof = n - 1
    s2 = float((resid**2).sum() / dof)
    half = float(st.t.ppf(0.5 + confidence / 2, df=dof)) * math.sqrt(s2 / k)
    return EdgeFit(list(keys), root, 1.0, root - half, root + half, resid, influence, s2, dof)


def edge_fit_of(readings: Sequence[Reading], est: CapacityEstimate) -> EdgeFit | None:
    """The fit behind an estimate, made again from its readings (its window and binding criterion)."""
    if est.criterion is None or est.value is None or not est.window:
        return None
    keys = set(est.window)
    win = [r for r in readings if r.key in keys and est.criterion in r.margins]
    if len(win) < 3:
        return None
    z = np.log([r.load for r in win])
    y = np.array([r.margins[est.criterion] for r in win])
    if est.criterion == SERVED and all(r.served for r in win):
        floors = y + np.log([r.served for r in win])
        return fit_hinge(z, y, floors, est.confidence, [r.key for r in win])
    return fit_edge(z, y, math.log(est.value), est.confidence, [r.key for r in win])


def estimate_capacity(
    readings: Sequence[Reading],
    axis: Literal["rate", "concurrency"] = "rate",
    target_rel: float = 0.05,
    confidence: float = 0.95,
    max_margin: float = 1.0,
) -> CapacityEstimate:
    """The capacity of one configuration from its valid probes (module docstring)."""
    base = {"axis": axis, "confidence": confidence, "target_rel": target_rel, "probes": len(readings)}
    if not readings:
        return CapacityEstimate(status="not_measured", note="no valid probe", **base)
    _, lo_z, hi_z = monotone_crossing([r.load for r in readings], [r.verdict_margin for r in readings])
    bracket = {
        "bracket_low": math.exp(lo_z) if lo_z is not None else None,
        "bracket_high": math.exp(hi_z) if hi_z is not None else None,
    }
    censored = [r.load for r in readings if r.censored]
    ceiling = math.log(min(censored)) if censored else math.inf
    names = sorted({k for r in readings for k in r.margins})
    found = {n: _criterion(readings, n, ceiling, confidence, max_margin) for n in names}
    est = [(n, f) for n, f in found.items() if f[0] == "estimated"]
    if any(f[0] == "below" for f in found.values()) or (not est and censored and lo_z is None):
        bottom = min(r.load for r in readings)
        note = f"no valid probe met the SLA: the capacity is below {fmt_load(bottom)}"
        return CapacityEstimate(status="below", high=bottom, note=note, **bracket, **base)
    if not est:
        if censored and bracket["bracket_low"]:
            # every sized criterion passed, but a load above failed without a size
            # (requests that outgrew the probe, errors, a growing queue): the highest passing load is a lower
            # bound, and the lowest such failure above it an upper one (a bracket, not a 95% interval)
            cap = bracket["bracket_low"]
            above = [x for x in censored if x > cap]
            fail_at = min(above) if above else min(censored)
            below = "" if above else f", below {fmt_load(cap)}, which passed"
            note = (
                f"the SLA failed without a size at {fmt_load(fail_at)} (requests that outgrew the probe, errors or "
                f"a growing queue){below}: the capacity is at least {fmt_load(cap)}"
                + (f" and below {fmt_load(fail_at)}, no interval" if above else ", no interval")
            )
            high = fail_at if above else None
            return CapacityEstimate(status="at_least", low=cap, high=high, note=note, **bracket, **base)
        top = max(r.load for r in readings)
        note = f"every valid probe met the SLA: the capacity is at least {fmt_load(top)} (no failing load above it)"
        return CapacityEstimate(status="at_least", low=top, note=note, **bracket, **base)
    name, (_, value, low, high, slope, win, why) = min(est, key=lambda e: e[1][1])
    floors = [f[2] for f in found.values() if f[0] == "at_least" and f[2] is not None] + [
        f[2] for _, f in est if f[2] is not None
    ]
    lows = [low, *floors] if low is not None else []
    highs = [f[3] for _, f in est if f[3] is not None]
    out = CapacityEstimate(
        status="estimated",
        criterion=name,
        value=math.exp(value),
        slope=slope,
        window=[r.key for r, _ in win],
        requests=sum(r.requests for r, _ in win),
        **bracket,
        **base,
    )
    if low is None or high is None:
        out.note = why
        return out
    out.low, out.high = math.exp(min(lows)), math.exp(min(highs))
    out.order_bound = why == ORDER_NOTE
    out.rel_half_width = (out.high - out.low) / 2 / out.value
    out.conclusive = out.rel_half_width <= target_rel
    capped = censored and value >= ceiling
    out.note = (
        f"±{out.rel_half_width:.1%} from {len(win)} probes near the edge ({name})"
        + ("" if out.conclusive else f", wider than the ±{target_rel:.0%} asked for")
        + ("; capped by a load that was not sustained" if capped else "")
        + (f"; {why}" if why else "")
    )
    return out
