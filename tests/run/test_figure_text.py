"""A figure in words never claims ends its interval does not have (``records.Figure.text``)."""

from helpers.run.records import Figure


def test_a_symmetric_interval_is_written_plus_or_minus():
    assert Figure(mean=10.0, low=9.0, high=11.0, n=3).text("{:.2f}") == "10.00 ± 1.00 (n=3)"
    assert Figure(mean=10.0, low=10.0, high=10.0, n=3).text("{:.1f}") == "10.0 ± 0.0 (n=3)"


def test_an_asymmetric_interval_is_written_out():
    # the H100 run's vLLM capacity: 1.97 below the estimate, 1.58 above; "± 1.77" would misplace both ends
    assert Figure(mean=36.21, low=34.24, high=37.79, n=7).text("{:.2f}") == "36.21 [34.24, 37.79] (n=7)"
    assert Figure(mean=10.0, low=8.0, high=None, n=3).text("{:.0f}") == "10 [8, unbounded] (n=3)"


def test_a_capacity_known_from_below_is_a_bound_not_a_mean():
    # the H100 run's SGLang: passed at 33.89, failed without a size at 37.40
    assert Figure(mean=33.89, low=33.89, high=37.4, n=8).text("{:.2f}") == "≥ 33.89 and < 37.40 (n=8)"
    assert Figure(mean=5.0, low=5.0, high=None, n=2).text("{:.1f}") == "≥ 5.0 (n=2)"


def test_a_single_sample_has_no_interval():
    assert Figure(mean=12.0, n=1).text() == "12 (1 sample)"
    assert Figure(mean=12.0, low=11.0, high=13.0, n=1).text() == "12 (1 sample)"
