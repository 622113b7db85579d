"""Statistics for deciding from evidence: means with intervals, A/B comparisons, enough trials, tail counts.

Every interval comes from scipy's distributions, not from hand-written formulas:

* ``mean_ci``: Student t interval of a mean over repeated trials (``scipy.stats.t``);
* ``compare``: Welch's unequal-variance t test of two configurations (``scipy.stats.ttest_ind`` with
  ``equal_var=False`` and its ``confidence_interval``), so "A beats B" is said only when the interval of
  the difference excludes zero, and otherwise the text says it is a tie within noise;
* ``enough_trials``: the stopping rule of a repeated measurement (stop once the interval is tight);
* ``queue_trend``: whether a queue sampled over a trial grew (``scipy.stats.linregress``), the test
  of a load the engine does not sustain; ``inflight_samples`` makes such samples from request times;
* ``min_requests_for_percentile`` / ``percentile_bounded`` / ``percentile_upper_bound``: how many
  requests a tail percentile needs before it means anything, after MLPerf LoadGen's early stopping
  (binomial tail, ``scipy.stats.binom``).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from pydantic import BaseModel, ConfigDict, Field
from scipy import stats as st


class _Record(BaseModel):
    """Base of the statistics records: unknown keys are rejected."""

    model_config = ConfigDict(extra="forbid")


class Estimate(_Record):
    """A mean over trials with its confidence interval (``half_width`` None: one trial, no interval)."""

    mean: float
    half_width: float | None = Field(description="t-interval half width; None when n < 2 (unbounded).")
    low: float | None
    high: float | None
    n: int
    confidence: float
    rel_half_width: float | None = Field(description="half_width / |mean|; None when unbounded or mean is 0.")

    @property
    def bounded(self) -> bool:
        """Whether there is an interval at all (two or more trials)."""
        return self.half_width is not None

    def text(self, fmt: str = "{:,.0f}") -> str:
        """``"1,234 ± 37 (n=3)"``; one trial reads ``"1,234 (n=1, no interval)"``."""
        if self.half_width is None:
            return f"{fmt.format(self.mean)} (n={self.n}, no interval)"
        return f"{fmt.format(self.mean)} ± {fmt.format(self.half_width)} (n={self.n})"


def _clean(values: Sequence[float], what: str = "values") -> np.ndarray:
    """Finite float values as an array; a clear error when there are none or some are not finite."""
    arr = np.asarray(list(values), dtype=float)
    if arr.size == 0:
        raise ValueError(f"{what}: no values to estimate from (n=0)")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{what}: values must be finite numbers, got {list(values)!r}")
    return arr


def _check_confidence(confidence: float) -> None:
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be between 0 and 1 (exclusive), got {confidence}")


def mean_ci(values: Sequence[float], confidence: float = 0.95) -> Estimate:
    """The mean of ``values`` with its Student t confidence interval.

    One value gives the mean with ``half_width``/``low``/``high`` None (an unbounded interval, flagged in
    ``text``); no values raise ``ValueError``. Identical values give a zero-width interval.
    """
    _check_confidence(confidence)
    arr = _clean(values)
    n, mean = int(arr.size), float(arr.mean())
    if n < 2:
        return Estimate(
            mean=mean, half_width=None, low=None, high=None, n=n, confidence=confidence, rel_half_width=None
        )
    sem = float(st.sem(arr))
    half = float(st.t.ppf(0.5 + confidence / 2, df=n - 1) * sem)
    rel = half / abs(mean) if mean != 0 else None
    return Estimate(
        mean=mean, half_width=half, low=mean - half, high=mean + half, n=n, confidence=confidence, rel_half_width=rel
    )


class Comparison(_Record):
    """A − B by Welch's t test: the difference of means, its interval, in absolute terms and in % of B."""

    a: Estimate
    b: Estimate
    difference: float = Field(description="mean(a) - mean(b).")
    diff_low: float
    diff_high: float
    rel_diff_pct: float | None = Field(description="difference / |mean(b)| in %; None when mean(b) is 0.")
    rel_low_pct: float | None
    rel_high_pct: float | None
    p_value: float
    df: float | None = Field(description="Welch-Satterthwaite degrees of freedom (None for noiseless data).")
    confidence: float
    significant: bool = Field(description="The interval of the difference excludes 0.")
    tie_text: str | None = Field(description="'a tie within noise (±x%)' when not significant, else None.")
    text: str = Field(description="One sentence for the report.")


def compare(a_values: Sequence[float], b_values: Sequence[float], confidence: float = 0.95) -> Comparison:
    """Compare two sets of trials (A − B) with Welch's t test and its confidence interval.

    The relative difference divides the difference and its interval by |mean(B)|, B's mean taken as the
    reference without its own uncertainty (second order when B's trials agree within a few %).
    ``significant`` is true when the interval of the difference excludes zero; otherwise ``tie_text``
    says "a tie within noise (±x%)", x being the largest distance of the relative interval from zero.
    Each side needs at least two trials (else ``ValueError``: a single run has no noise estimate).
    """
    _check_confidence(confidence)
    a, b = _clean(a_values, "a_values"), _clean(b_values, "b_values")
    if a.size < 2 or b.size < 2:
        raise ValueError(f"compare needs at least 2 trials on each side (got {a.size} and {b.size})")
    diff = float(a.mean() - b.mean())
    if float(a.var(ddof=1)) == 0.0 and float(b.var(ddof=1)) == 0.0:  # noiseless: the difference is exact
        low = high = diff
        p_value, df = (0.0 if diff != 0 else 1.0), None
    else:
        res = st.ttest_ind(a, b, equal_var=False)
        ci = res.confidence_interval(confidence_level=confidence)
        low, high, p_value, df = float(ci.low), float(ci.high), float(res.pvalue), float(res.df)
    ref = abs(float(b.mean()))
    rel = rel_low = rel_high = None
    if ref > 0:
        rel, rel_low, rel_high = 100 * diff / ref, 100 * low / ref, 100 * high / ref
    significant = low > 0 or high < 0
    tie_text = None
    if not significant:
        noise = f"±{max(abs(rel_low), abs(rel_high)):.1f}%" if rel_low is not None else f"±{max(-low, high):.3g}"
        tie_text = f"a tie within noise ({noise})"
    pct = f"{confidence:.0%}"
    if significant and rel is not None:
        word = "higher" if diff > 0 else "lower"
        text = (
            f"A is {abs(rel):.1f}% {word} than B ({pct} CI {rel_low:+.1f}% to {rel_high:+.1f}%, p={p_value:.2g}, "
            f"n={a.size} vs {b.size})"
        )
    elif significant:
        text = f"A − B = {diff:.3g} ({pct} CI {low:.3g} to {high:.3g}, p={p_value:.2g})"
    else:
        text = f"{tie_text}: A − B = {diff:.3g} ({pct} CI {low:.3g} to {high:.3g}, p={p_value:.2g})"
    return Comparison(
        a=mean_ci(a, confidence),
        b=mean_ci(b, confidence),
        difference=diff,
        diff_low=low,
        diff_high=high,
        rel_diff_pct=rel,
        rel_low_pct=rel_low,
        rel_high_pct=rel_high,
        p_value=p_value,
        df=df,
        confidence=confidence,
        significant=significant,
        tie_text=tie_text,
        text=text,
    )


def enough_trials(
    values: Sequence[float], target_rel: float = 0.03, min_trials: int = 3, max_trials: int = 8
) -> tuple[bool, str]:
    """Whether repeated trials can stop, and why.

    Stop when there are at least ``min_trials`` and the 95% t-interval half width is at most
    ``target_rel`` × |mean|, or when ``max_trials`` are done (the interval is then reported as it is).
    """
    n = len(values)
    if n == 0:
        return False, f"no trials yet (need at least {min_trials})"
    est = mean_ci(values, 0.95)
    if n >= max_trials:
        return True, f"stopped at the trial cap ({max_trials}): {est.text('{:,.4g}')}"
    if n < min_trials:
        return False, f"{n} of at least {min_trials} trials"
    if est.rel_half_width is not None and est.rel_half_width <= target_rel:
        return True, f"95% CI ±{est.rel_half_width:.1%} ≤ ±{target_rel:.0%} after {n} trials"
    width = "unbounded" if est.rel_half_width is None else f"±{est.rel_half_width:.1%}"
    return False, f"95% CI {width} > ±{target_rel:.0%} after {n} trials: run another"


# --- tail percentiles: MLPerf LoadGen's early-stopping rule -------------------------------------------


def _check_quantile(q: float) -> None:
    if not 0.0 < q < 1.0:
        raise ValueError(f"q is a fraction in (0, 1), e.g. 0.95 for p95; got {q}")


def percentile_bounded(n: int, q: float, over: int = 0, confidence: float = 0.99, tolerance: float = 0.0) -> bool:
    """Whether ``n`` requests, ``over`` of them above the latency limit, bound the ``q`` percentile.

    LoadGen's test (``loadgen/early_stopping.cc``, Server scenario in ``results.cc``): if the true
    share of requests above the limit were 1 − (q − tolerance), seeing ``over`` or fewer of them in
    ``n`` would have probability ``binom.cdf(over, n, 1 - q + tolerance)``; the run passes when that is
    at most 1 − ``confidence``. Then the q-th percentile is within the limit with that confidence.
    """
    _check_quantile(q)
    _check_confidence(confidence)
    if n <= over:
        return False
    return bool(st.binom.cdf(over, n, 1.0 - q + tolerance) <= 1.0 - confidence)


def min_requests_for_percentile(q: float, confidence: float = 0.99, over: int = 0, tolerance: float = 0.0) -> int:
    """The fewest requests (``over`` of them above the limit) for a pXX within the limit to be bounded.

    MLPerf LoadGen's early stopping (``loadgen/early_stopping.cc``: ``MinPassingQueriesFinder`` finds
    the fewest under-latency queries h with ``BetaRegularized(q - d, h, 1 + t) <= 1 - confidence``;
    ``results.cc`` requires h + t queries). With no request over the limit this is the smallest n with
    q**n <= 1 - confidence: 459 for a p99 at 99% confidence, 90 for a p95, 44 for a p90. Every request
    over the limit raises the count (a p99 with one over needs 662).
    """
    _check_quantile(q)
    _check_confidence(confidence)
    if over < 0:
        raise ValueError(f"over counts requests above the limit, got {over}")
    lo, hi = over + 1, max(over + 2, 2 * (over + 1))
    while not percentile_bounded(hi, q, over, confidence, tolerance):  # grow until it passes (monotone in n)
        lo, hi = hi, hi * 2
    while lo < hi:  # the smallest passing n in [lo, hi]
        mid = (lo + hi) // 2
        if percentile_bounded(mid, q, over, confidence, tolerance):
            hi = mid
        else:
            lo = mid + 1
    return lo


def percentile_upper_bound(values: Sequence[float], q: float, confidence: float = 0.99) -> float | None:
    """LoadGen's early-stopping estimate of the q-th percentile: a value it stays below with ``confidence``.

    As LoadGen's SingleStream summary does: find the most requests t that may lie above a limit while
    the run still passes (``percentile_bounded``) and report the t-th highest value ("would discard
    t − 1 highest latency queries"). None when even t = 1 does not pass: too few requests for this
    percentile (see ``min_requests_for_percentile(q, confidence, over=1)``).
    """
    arr = np.sort(_clean(values))
    n = int(arr.size)
    if not percentile_bounded(n, q, over=1, confidence=confidence):
        return None
    t = int(st.binom.ppf(1.0 - confidence, n, 1.0 - q))  # near the largest passing t; settle it exactly
    while t + 1 < n and percentile_bounded(n, q, over=t + 1, confidence=confidence):
        t += 1
    while t > 1 and not percentile_bounded(n, q, over=t, confidence=confidence):
        t -= 1
    return float(arr[n - t])


def requests_note(n: int, q: float, over: int = 0, confidence: float = 0.99) -> str:
    """One line for a report: whether ``n`` requests bound the pXX, and how many more it would take."""
    label = f"p{100 * q:g}"
    need = min_requests_for_percentile(q, confidence, over)
    if n >= need:
        return f"{label} bounded at {confidence:.0%} confidence: {n:,} requests (needs {need:,} with {over} over)"
    return f"{label} not bounded yet: {n:,} of {need:,} requests needed ({over} over the limit)"


# --- queue growth over a trial --------------------------------------------------------------------


class QueueTrend(_Record):
    """Whether a queue (waiting or in-flight requests sampled over a trial) grew."""

    slope_per_s: float = Field(description="Least-squares slope of the queue over time (requests/s).")
    p_value: float = Field(description="One-sided p of slope > 0 (scipy.stats.linregress).")
    first_third_mean: float
    last_third_mean: float
    growing: bool = Field(description="Slope significantly > 0 and the last third clearly above the first.")
    samples: int


def queue_trend(
    samples: Sequence[tuple[float, float]], alpha: float = 0.01, min_rise: float = 1.0, rel_rise: float = 0.2
) -> QueueTrend | None:
    """Fit the queue ``samples`` (time s, requests) with ``scipy.stats.linregress``; None below 6 samples.

    Growing means the slope is significantly positive (one-sided p < ``alpha``) *and* the mean of the
    last third of the trial exceeds the first third's by at least max(``min_rise``, ``rel_rise`` × the
    first third's mean): samples a trial apart are correlated, so the p-value alone over-claims.
    """
    pts = sorted((float(t), float(q)) for t, q in samples)
    if len(pts) < 6:
        return None
    t = np.array([p[0] for p in pts])
    q = np.array([p[1] for p in pts])
    third = len(pts) // 3
    first, last = float(q[:third].mean()), float(q[-third:].mean())
    if np.ptp(q) == 0 or np.ptp(t) == 0:
        slope, p_value = 0.0, 1.0
    else:
        fit = st.linregress(t, q, alternative="greater")
        slope, p_value = float(fit.slope), float(fit.pvalue)
    growing = p_value < alpha and last - first >= max(min_rise, rel_rise * first)
    return QueueTrend(
        slope_per_s=slope,
        p_value=p_value,
        first_third_mean=first,
        last_third_mean=last,
        growing=bool(growing),
        samples=len(pts),
    )


def inflight_samples(
    starts: Sequence[float], ends: Sequence[float | None], points: int = 60
) -> list[tuple[float, float]]:
    """Requests in flight (sent, not finished; ``None`` end: never finished) at ``points`` even times.

    The window runs from the first finish (the system has filled once) to the last send (after it the
    queue only drains), so a queue that grows while load is offered shows as a rising series.
    """
    s = np.sort(np.asarray(starts, dtype=float))
    done = [e for e in ends if e is not None]
    e = np.sort(np.asarray(done, dtype=float))
    if s.size < 2:
        return []
    lo = float(e[0]) if e.size else float(s[0])
    hi = float(s[-1])
    if hi <= lo:
        return []
    times = np.linspace(lo, hi, points)
    counts = np.searchsorted(s, times, side="right") - np.searchsorted(e, times, side="right")
    return [(float(t), float(c)) for t, c in zip(times, counts, strict=True)]
