"""Two configurations compared on their SLA capacity per accelerator: measured, equivalent, or not conclusive.

Each side is a configuration's capacity estimate (``helpers.benchmark.boundary``), its readings and its
accelerators per replica; closed-loop capacities (streams) are compared as the request rates they served
(``Side.to_rate``), and that map's own spread widens the difference's interval (``Side.rate_half``,
in quadrature). Every window probe *reads* the edge: its log load moved by its margin over the fit's
slope. Probes of the two configurations that ran on the same stream (the same arrival schedule and prompts,
``helpers.benchmark.edge_search``) form pairs: the traffic's own noise is in both readings of a pair and
cancels in their difference. With at least ``MIN_PAIRS`` pairs the difference's 95% interval is a paired t
interval over them; with fewer, the two capacities' own intervals are combined (unpaired, wider). A capacity
whose own interval is unbounded (its edge probes too noisy for a fit) leaves the difference unbounded too.

Three outcomes, stated as such:

* **equivalent**: the interval lies within ±``margin`` (the config's equivalence margin, the difference
  the user calls irrelevant): the tree and operations cost decide. This is asked first: a difference
  the interval shows to be smaller than the margin is equivalence even when it excludes 0;
* **measured**: the interval excludes 0 and reaches past the margin: one configuration serves more at the SLA;
* **not conclusive**: neither; with what it would take to resolve it (paired edge probes more, from the
  spread observed).

A configuration without an estimated capacity (too few valid probes, or none that met the SLA) is
**not measured**: never a tie.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field
from scipy import stats as st

from helpers.benchmark.boundary import EdgeFit, Reading, edge_fit_of
from helpers.run.records import CapacityEstimate

MIN_PAIRS = 4
"""Paired edge readings needed for the paired interval of a difference (else the unpaired one)."""

Verdict = Literal["measured", "equivalent", "not_conclusive", "not_measured"]


def _identity(v: float) -> float:
    return v


def _exact(v: float, confidence: float = 0.95) -> float:
    return 0.0


@dataclass
class Side:
    """One configuration in a comparison."""

    label: str
    estimate: CapacityEstimate
    readings: Sequence[Reading] = field(default_factory=list)
    accelerators: int = 1
    to_rate: Callable[[float], float] = _identity  # log load -> log req/s (closed loop: streams to the rate served)
    rate_half: Callable[[float, float], float] = _exact  # (log load, confidence) -> that map's own half-width


class CapacityDifference(BaseModel):
    """A's capacity per accelerator over B's, with its interval and what it means."""

    model_config = ConfigDict(extra="forbid")

    a: str
    b: str
    verdict: Verdict
    ratio: float | None = Field(default=None, description="A / B (capacity per accelerator, as request rates).")
    low: float | None = Field(default=None, description="95% interval of the ratio, low end (None: unbounded).")
    high: float | None = None
    paired: bool = Field(default=False, description="The interval comes from paired probes (same streams).")
    pairs: int = Field(default=0, description="Paired edge readings behind it.")
    margin: float = Field(gt=0, description="Equivalence margin (relative).")
    to_resolve: str | None = Field(default=None, description="Not conclusive: what it would take to resolve.")
    more_pairs: int | None = Field(default=None, description="Not conclusive: paired edge probes still needed.")
    text: str = ""

    @property
    def pct(self) -> float | None:
        """(A − B) / B in %."""
        return None if self.ratio is None else 100 * (self.ratio - 1)


def log_interval(est: CapacityEstimate) -> tuple[float, float | None, float | None] | None:
    """(log value, log low, log high) of an estimate, one-sided for a search that could not bracket the edge.

    At least x (every load passed): (x, x, unbounded); at least x and below y (the loads above x failed only
    without a size): the bracket, from its geometric middle; below x (every load failed): None, as no load
    met the SLA: there is no capacity to compare.
    """
    if est.status == "at_least" and est.low and est.high and est.high > est.low:
        lo, hi = math.log(est.low), math.log(est.high)
        return (lo + hi) / 2, lo, hi
    if est.status == "at_least" and est.low:
        return math.log(est.low), math.log(est.low), None
    if est.status != "estimated" or est.value is None:
        return None
    lo = math.log(est.low) if est.low else None
    hi = math.log(est.high) if est.high else None
    return math.log(est.value), lo, hi


def compare_capacities(a: Side, b: Side, margin: float = 0.05, confidence: float = 0.95) -> CapacityDifference:
    """Compare two configurations' capacities per accelerator (module docstring)."""
    if margin <= 0:
        raise ValueError(f"the equivalence margin must be > 0, got {margin}")
    base = {"a": a.label, "b": b.label, "margin": margin}
    ia, ib = log_interval(a.estimate), log_interval(b.estimate)
    if ia is None or ib is None:
        side = a if ia is None else b
        why = side.estimate.note or side.estimate.status
        text = f"`{side.label}` has no measured capacity ({why})"
        return CapacityDifference(verdict="not_measured", text=text, **base)
    shift = math.log(b.accelerators) - math.log(a.accelerators)  # per accelerator
    d = a.to_rate(ia[0]) - b.to_rate(ib[0]) + shift
    fa, fb = edge_fit_of(a.readings, a.estimate), edge_fit_of(b.readings, b.estimate)
    common = sorted(set(fa.keys) & set(fb.keys)) if fa and fb else []
    paired = len(common) >= MIN_PAIRS
    half: float | None = None
    # The fits' delta-method width holds only where each capacity has a bounded interval of its own: an edge
    # whose own interval is unbounded (probes too noisy for the fit's slope) bounds no difference either.
    # An end set by the probes' monotone order (``order_bound``) is a probe's load, not the fit's: no delta method.
    both = all(s.estimate.status == "estimated" and _bounded(s.estimate) and not s.estimate.order_bound for s in (a, b))
    if both and fa is not None and fb is not None and fa.root is not None and fb.root is not None:
        half = _paired_half(fa, fb, _slope(a.to_rate, fa.root), _slope(b.to_rate, fb.root), common, paired, confidence)
    # a closed-loop side's map from streams to the rate served has a spread of its own: in quadrature
    extra = math.hypot(a.rate_half(ia[0], confidence), b.rate_half(ib[0], confidence))
    if half is not None:
        half = math.hypot(half, extra)
        lo, hi = d - half, d + half
    else:
        paired = False
        lo, hi = _combine(a, b, ia, ib, shift, -1), _combine(a, b, ia, ib, shift, +1)
        lo = None if lo is None else d - math.hypot(d - lo, extra)
        hi = None if hi is None else d + math.hypot(hi - d, extra)
        half = (hi - lo) / 2 if lo is not None and hi is not None else None
    out = CapacityDifference(
        ratio=math.exp(d),
        low=math.exp(lo) if lo is not None else None,
        high=math.exp(hi) if hi is not None else None,
        paired=paired,
        pairs=len(common),
        verdict="not_conclusive",
        **base,
    )
    how = f"paired over {len(common)} probes on the same streams" if paired else "unpaired: own intervals combined"
    said = f"{out.pct:+.1f}% [{_pct(out.low)}, {_pct(out.high)}], {how}"
    band = math.log(1 + margin)
    if lo is not None and hi is not None and lo >= -band and hi <= band:
        out.verdict = "equivalent"
        out.text = f"`{a.label}` and `{b.label}` are equivalent within ±{margin:.0%} at the SLA ({said})"
        return out
    if (lo is not None and lo > 0) or (hi is not None and hi < 0):
        out.verdict = "measured"
        win, lose = (a.label, b.label) if d > 0 else (b.label, a.label)
        more = abs(math.exp(abs(d)) - 1)
        out.text = f"`{win}` serves {100 * more:.1f}% more requests per accelerator than `{lose}` at the SLA ({said})"
        return out
    out.to_resolve, out.more_pairs = _what_it_takes(d, half, band, len(common) if paired else 0)
    unbracketed = _unbracketed(a, b)
    if unbracketed:
        out.to_resolve, out.more_pairs = f"{unbracketed}; then {out.to_resolve}", None
    out.text = f"`{a.label}` against `{b.label}` is not conclusive ({said}): {out.to_resolve}"
    return out


def _bounded(est: CapacityEstimate) -> bool:
    """Whether an estimate has an interval of its own at both ends."""
    return est.low is not None and est.high is not None


def _slope(to_rate: Callable[[float], float], z: float, h: float = 1e-4) -> float:
    """The slope (d log rate / d log load) of a side's map at ``z``."""
    return (to_rate(z + h) - to_rate(z - h)) / (2 * h)


def _paired_half(
    fa: EdgeFit, fb: EdgeFit, ga: float, gb: float, common: list[str], paired: bool, confidence: float
) -> float | None:
    """Half-width of the difference of two roots (delta method), less the noise their shared streams have in common.

    Each root's variance is its residual variance times the sum of its probes' squared influences; probes
    of both sides on the same stream share the traffic's noise, estimated as the covariance of their
    residuals (clipped to [0, the smaller variance]), which is taken off twice over their influences'
    products. ``ga``/``gb``: the sides' maps from load to request rate, as slopes.
    """
    var = ga * ga * fa.s2 * float((fa.influence**2).sum()) + gb * gb * fb.s2 * float((fb.influence**2).sum())
    if paired:
        ia = [fa.keys.index(k) for k in common]
        ib = [fb.keys.index(k) for k in common]
        shared = float(np.mean(fa.residuals[ia] * fb.residuals[ib]))
        shared = min(max(0.0, shared), math.sqrt(fa.s2 * fb.s2))
        var -= 2 * ga * gb * shared * float((fa.influence[ia] * fb.influence[ib]).sum())
    if var <= 0:
        return None
    t = float(st.t.ppf(0.5 + confidence / 2, df=max(1, min(fa.dof, fb.dof))))
    return t * math.sqrt(var)


def _pct(ratio: float | None) -> str:
    return "unbounded" if ratio is None else f"{100 * (ratio - 1):+.1f}%"


def _combine(a: Side, b: Side, ia, ib, shift: float, side: int) -> float | None:
    """One end of an unpaired interval of a difference: the two intervals' distances combined in quadrature.

    Each end's rate is the farther of the side's map and proportion to the load (``rate_at_end``).
    """
    (va, la, ha), (vb, lb, hb) = ia, ib
    fa, fb = a.to_rate, b.to_rate
    if side < 0:
        if la is None or hb is None:
            return None
        return fa(va) - fb(vb) + shift - math.hypot(fa(va) - rate_at_end(fa, va, la), rate_at_end(fb, vb, hb) - fb(vb))
    if ha is None or lb is None:
        return None
    return fa(va) - fb(vb) + shift + math.hypot(rate_at_end(fa, va, ha) - fa(va), fb(vb) - rate_at_end(fb, vb, lb))


def rate_at_end(to_rate: Callable[[float], float], v: float, end: float) -> float:
    """The log rate at an interval's end ``end`` (log load), for the estimate ``v``, taken conservatively.

    A closed-loop map is a line fitted near the capacity, flat where the engine saturates; an end further out
    (a probe's load, ``order_bound``) is outside its points. Requests take no less time at more streams, so
    the rate served grows at most in proportion to them above the capacity and falls at most in proportion
    below it: of the map and that proportion, the one farther from the estimate. The rate axis is its own map.
    """
    proportional = to_rate(v) + (end - v)
    return min(to_rate(end), proportional) if end < v else max(to_rate(end), proportional)


def _unbracketed(*sides: Side) -> str:
    """What a search that never bracketed its edge needs first ('' when both did): a load on the other side."""
    said = []
    for side in sides:
        est = side.estimate
        if est.status == "at_least" and est.low is not None and est.high is not None:
            said.append(
                f"`{side.label}` passed up to {est.low:.4g} and failed above it only without a size (at "
                f"{est.high:.4g}: requests that outgrew the probe, errors or a growing queue): its edge needs "
                "readable probes between the two (raise evidence.search.edge_rounds_max: an edge round without "
                "a fitted edge probes the bracket's thirds)"
            )
        elif est.status == "at_least" and est.low is not None:
            said.append(
                f"`{side.label}` met the SLA at every load tried (up to {est.low:.4g}): its search must reach a "
                "failing load (raise evidence.search.max_probes or evidence.search.growth)"
            )
        elif est.status == "below" and est.high is not None:
            said.append(
                f"`{side.label}` failed at every load tried (down to {est.high:.4g}): its search must reach a "
                "passing load (raise evidence.search.max_probes, or set evidence.search.start lower)"
            )
    return "; ".join(said)


def _what_it_takes(d: float, half: float | None, band: float, pairs: int) -> tuple[str, int | None]:
    """Paired edge probes needed to tell the two apart or show them equivalent, from the half-width observed.

    A half-width falls as one over the square root of the probes behind it: to settle, it must come under
    |d| (a difference) or under band − |d| (equivalence), whichever is nearer.
    """
    if half is None or pairs < 2:
        return (
            f"at least {MIN_PAIRS} paired edge probes per configuration with a bounded interval each "
            "(raise evidence.search.edge_rounds_max, or lengthen the probes for steadier readings)",
            None,
        )
    goal = max(abs(d), band - abs(d))
    if goal <= 0:
        return "the estimate sits on the equivalence margin: more probes on both sides", None
    need = math.ceil(pairs * (half / goal) ** 2)
    more = max(1, need - pairs)
    return f"about {more} more paired edge probe(s) per configuration ({math.ceil(more / 2)} edge round(s))", more
