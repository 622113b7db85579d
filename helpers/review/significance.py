"""Whether a change between two runs is a regression, or within their noise.

Each run's figure (``helpers.run.records.Figure``) carries a 95% interval and the n behind it: the SLA
capacity's bootstrap interval over its probes, or a t interval over trials at a fixed load. A change
is judged from both runs' intervals (``change_interval``) by one rule (``judge``):

- **regression**: the change is worse than the threshold (the point estimate) *and* the 95% interval
  of the relative change lies entirely on the bad side of zero (the two runs' noise does not explain it);
- **within noise (±x%)**: the interval reaches across zero, whatever the point estimate (x: half the
  interval's width, ``noise_text``);
- **no interval: not judged**: either figure has no interval (one sample, an archive from before
  intervals): it can never be a regression;
- otherwise a significant change that is an improvement (**better**) or **worse, within the threshold**.

Requiring the whole interval beyond the threshold instead would miss most real regressions of a
threshold's size at the interval widths the tool measures (±5-10%); zero-exclusion plus the point
estimate is the same test the decision uses (a measured difference is one whose interval excludes zero).
"""

from __future__ import annotations

import math
from typing import Literal

from pydantic import BaseModel, ConfigDict

from helpers.run.records import Figure

Verdict = Literal["regression", "within noise", "not judged", "worse", "better"]


def has_interval(f: Figure | None) -> bool:
    """Whether ``f`` carries a 95% interval: both bounds and at least two samples behind it."""
    return f is not None and f.low is not None and f.high is not None and f.n >= 2


def log_half_width(f: Figure) -> float:
    """Half the width of ``f``'s 95% interval on a log scale, ``(ln high − ln low) / 2``.

    ∞ when the interval reaches zero or below (a t interval wider than its mean, from two or three
    trials): on a ratio scale such a figure excludes no value. Requires ``has_interval(f)``.
    """
    assert f.low is not None and f.high is not None
    if f.low <= 0 or f.high <= 0:
        return math.inf
    return (math.log(f.high) - math.log(f.low)) / 2


def change_interval(before: Figure, now: Figure) -> tuple[float, float] | None:
    """The 95% interval of the relative change ``now / before − 1``; None when either figure has no interval.

    On a log scale the change is ``d = ln(now.mean / before.mean)``. Each figure's interval has the
    log half-width ``w = (ln high − ln low) / 2`` (``log_half_width``; ∞ when it reaches zero). The two
    runs are independent, so their 95% half-widths add in quadrature like standard errors:
    ``W = sqrt(w_before² + w_now²)``, and the relative change's interval is ``[e^(d−W) − 1, e^(d+W) − 1]``.
    With t intervals from few trials each ``w`` already holds its own t quantile, so this is at least as
    wide as a Welch interval; for the capacity's bootstrap intervals it is the normal approximation.
    """
    if not (has_interval(before) and has_interval(now)) or before.mean <= 0 or now.mean <= 0:
        return None
    d = math.log(now.mean / before.mean)
    w = math.hypot(log_half_width(before), log_half_width(now))
    return (math.expm1(d - w) if math.isfinite(w) else -1.0, math.expm1(d + w) if math.isfinite(w) else math.inf)


def noise_text(low: float, high: float) -> str:
    """``±x%`` for the 95% interval of a relative change: x is half its width, ``(high − low) / 2``.

    ``an interval reaches zero`` where it is unbounded (a figure's interval reaches zero).
    """
    if not math.isfinite(high) or low <= -1:
        return "an interval reaches zero"
    return f"±{(high - low) / 2:.0%}"


def interval_text(low: float, high: float) -> str:
    """``95% interval −38% to −27%`` for a relative change's interval (∞ where it is unbounded)."""
    hi = f"{high:+.0%}" if math.isfinite(high) else "+∞"
    return f"95% interval {low:+.0%} to {hi}"


class Judgement(BaseModel):
    """One metric's change between two runs, its interval, and what it is."""

    model_config = ConfigDict(extra="forbid")

    change: float
    low: float | None = None
    high: float | None = None
    verdict: Verdict
    text: str

    @property
    def flagged(self) -> bool:
        """Whether this change belongs on the first page as a regression."""
        return self.verdict == "regression"


def judge(before: Figure, now: Figure, higher_is_better: bool, threshold: float) -> Judgement:
    """The verdict on one metric's change from ``before`` to ``now`` (see the module's rule).

    ``threshold`` is the relative change that matters (``cfg.review.regression_threshold``).
    """
    change = (now.mean - before.mean) / before.mean
    worse = -change if higher_is_better else change
    ci = change_interval(before, now)
    if ci is None:
        return Judgement(change=change, verdict="not judged", text="no interval: not judged")
    low, high = ci
    if low <= 0 <= high:
        verdict, text = "within noise", f"within noise ({noise_text(low, high)})"
    elif worse <= 0:
        verdict, text = "better", f"better ({interval_text(low, high)})"
    elif worse > threshold:
        verdict, text = "regression", f"regression ({interval_text(low, high)})"
    else:
        verdict, text = "worse", f"worse, within the {threshold:.0%} threshold ({interval_text(low, high)})"
    return Judgement(change=change, low=low, high=high, verdict=verdict, text=text)
