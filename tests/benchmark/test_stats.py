"""Statistics of trials: intervals match scipy, comparisons say tie or win honestly, tail counts match LoadGen.

The LoadGen figures are the ones its code and published summaries give: 459 queries for a p99 with
none over the limit at 99% confidence (mlcommons/endpoints#417, "h_min(t=0, p99) = 459"), the
SingleStream floors of 64 (p90) and 662 (p99) queries, and "Would discard 172 highest latency
queries" for a p90 over 2048 queries.
"""

import numpy as np
import pytest
from scipy import stats as st

from helpers.benchmark.stats import (
    compare,
    enough_trials,
    inflight_samples,
    mean_ci,
    min_requests_for_percentile,
    percentile_bounded,
    percentile_upper_bound,
    queue_trend,
    requests_note,
)


def test_mean_ci_is_the_student_t_interval():
    values = [1200.0, 1234.0, 1268.0, 1250.0]
    est = mean_ci(values, 0.95)
    low, high = st.t.interval(0.95, df=3, loc=np.mean(values), scale=st.sem(values))
    assert est.mean == pytest.approx(1238.0)
    assert (est.low, est.high) == pytest.approx((low, high))
    assert est.half_width == pytest.approx((high - low) / 2)
    assert est.rel_half_width == pytest.approx(est.half_width / 1238.0)
    assert est.n == 4 and est.bounded


def test_estimate_text_and_one_trial_flagged_and_none_rejected():
    est = mean_ci([1200.0, 1234.0, 1268.0])
    assert est.text() == "1,234 ± 84 (n=3)"  # sd 34, sem 19.6, t(0.975, 2) = 4.30
    one = mean_ci([1234.0])
    assert one.half_width is None and one.low is None and not one.bounded
    assert one.text() == "1,234 (n=1, no interval)"
    with pytest.raises(ValueError, match="n=0"):
        mean_ci([])
    with pytest.raises(ValueError, match="finite"):
        mean_ci([1.0, float("nan")])


def test_compare_matches_welch_from_scipy():
    a, b = [100.0, 104.0, 101.0, 103.0], [90.0, 97.0, 93.0]
    c = compare(a, b)
    ref = st.ttest_ind(a, b, equal_var=False)
    ci = ref.confidence_interval(0.95)
    assert c.difference == pytest.approx(np.mean(a) - np.mean(b))
    assert (c.diff_low, c.diff_high) == pytest.approx((ci.low, ci.high))
    assert c.p_value == pytest.approx(ref.pvalue) and c.df == pytest.approx(ref.df)
    assert c.rel_diff_pct == pytest.approx(100 * c.difference / np.mean(b))
    assert c.rel_low_pct == pytest.approx(100 * ci.low / np.mean(b))


def test_well_separated_trials_are_significant():
    c = compare([1500.0, 1510.0, 1495.0], [1000.0, 1010.0, 990.0])
    assert c.significant and c.tie_text is None
    assert c.diff_low > 0
    assert c.text.startswith("A is 50.2% higher than B")
    lower = compare([1000.0, 1010.0, 990.0], [1500.0, 1510.0, 1495.0])
    assert lower.significant and "lower than B" in lower.text


def test_overlapping_trials_are_a_tie_within_noise():
    c = compare([1000.0, 1040.0, 980.0], [1010.0, 990.0, 1030.0])
    assert not c.significant
    assert c.diff_low < 0 < c.diff_high
    noise = max(abs(c.rel_low_pct), abs(c.rel_high_pct))
    assert c.tie_text == f"a tie within noise (±{noise:.1f}%)"
    assert c.text.startswith(c.tie_text)


def test_compare_edge_cases():
    with pytest.raises(ValueError, match="at least 2 trials"):
        compare([1.0], [1.0, 2.0])
    exact = compare([5.0, 5.0], [4.0, 4.0])  # no noise: the difference is exact
    assert exact.significant and exact.diff_low == exact.diff_high == 1.0
    same = compare([5.0, 5.0], [5.0, 5.0])
    assert not same.significant and same.p_value == 1.0


def test_enough_trials_stops_on_a_tight_interval_or_the_cap():
    ok, why = enough_trials([1000.0, 1005.0, 995.0])  # ±1.2% at n=3
    assert ok and "≤ ±3%" in why
    more, why = enough_trials([1000.0, 1100.0, 900.0])
    assert not more and "run another" in why
    few, why = enough_trials([1000.0, 1000.0])
    assert not few and "2 of at least 3" in why
    capped, why = enough_trials([1000.0, 1300.0] * 4, max_trials=8)
    assert capped and "trial cap" in why
    assert enough_trials([]) == (False, "no trials yet (need at least 3)")


def test_requests_a_percentile_needs_follow_loadgen():
    assert min_requests_for_percentile(0.99) == 459  # 0.99**459 <= 0.01 < 0.99**458
    assert min_requests_for_percentile(0.95) == 90
    assert min_requests_for_percentile(0.90) == 44
    assert min_requests_for_percentile(0.99, over=1) == 662  # LoadGen's SingleStream floors
    assert min_requests_for_percentile(0.90, over=1) == 64
    assert min_requests_for_percentile(0.95, confidence=0.95) == 59
    assert not percentile_bounded(458, 0.99) and percentile_bounded(459, 0.99)
    assert not percentile_bounded(661, 0.99, over=1) and percentile_bounded(662, 0.99, over=1)
    for over in (0, 3, 10):  # the count is the boundary of the test, for any count over
        n = min_requests_for_percentile(0.95, over=over)
        assert percentile_bounded(n, 0.95, over=over) and not percentile_bounded(n - 1, 0.95, over=over)
    with pytest.raises(ValueError, match="fraction"):
        min_requests_for_percentile(95)


def test_percentile_upper_bound_is_loadgens_early_stopping_estimate():
    values = np.arange(2048.0)[::-1]  # any order
    assert percentile_upper_bound(values, 0.90) == 2048 - 173  # "Would discard 172 highest latency queries"
    assert percentile_upper_bound(np.arange(63.0), 0.90) is None  # below the 64-query floor
    assert percentile_upper_bound(np.arange(64.0), 0.90) == 63.0
    assert requests_note(100, 0.99) == "p99 not bounded yet: 100 of 459 requests needed (0 over the limit)"


def test_queue_trend_tells_a_growing_queue_from_a_noisy_flat_one():
    rng = np.random.default_rng(3)
    t = np.linspace(0, 10, 60)
    growing = queue_trend(list(zip(t, 2.0 * t + rng.normal(0, 1, t.size), strict=True)))
    assert growing is not None and growing.growing and growing.slope_per_s == pytest.approx(2.0, abs=0.2)
    flat = queue_trend(list(zip(t, 5 + rng.normal(0, 1, t.size), strict=True)))
    assert flat is not None and not flat.growing
    tiny = queue_trend(list(zip(t, 0.02 * t, strict=True)))  # significant but under one request of rise
    assert tiny is not None and tiny.p_value < 0.01 and not tiny.growing
    assert queue_trend([(0.0, 1.0), (1.0, 2.0)]) is None
    assert not queue_trend([(float(i), 0.0) for i in range(10)]).growing


def test_inflight_samples_count_sent_minus_finished_while_sending():
    starts = [0.0, 1.0, 2.0, 3.0, 4.0]
    ends = [0.5, 3.5, None, None, None]  # the last three never finish
    samples = inflight_samples(starts, ends, points=8)
    assert samples[0][0] == 0.5 and samples[-1][0] == 4.0  # first finish to last send
    at = dict(samples)
    assert at[4.0] == 3.0  # five sent, two finished
    assert at[0.5] == 0.0
    assert inflight_samples([1.0], [None]) == []
