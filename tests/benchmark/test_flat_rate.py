"""A concurrency-axis capacity where the served rate is flat near the edge (a real CPU run, 2026-12-05).

Near saturation more streams serve no more requests, and the fitted slope of req/s against streams came
out negative: the rate interval's ends were swapped (2.647 > 2.631 req/s) and the first page's chart
raised ``'xerr' must not contain negative values``, failing the CPU default's report.
"""

from __future__ import annotations

from pathlib import Path

from helpers.benchmark.sla import representative
from helpers.core.config import load_config
from helpers.report.first_page import _error_bar
from helpers.run.folder import RunFolder
from helpers.run.records import Figure

RUN = Path(__file__).resolve().parents[1] / "fixtures" / "runs" / "cpu-flat-rate"


def test_the_rate_interval_of_a_flat_edge_holds_its_estimate():
    cfg = load_config(RUN / "config.yaml")
    (result,) = RunFolder(RUN).engine_results()
    rep = representative(result, cfg)
    assert rep is not None and rep.source == "capacity" and rep.capacity.low < rep.capacity.high
    for fig in (rep.request_rate, rep.output_tok_s):
        assert fig.low is not None and fig.high is not None
        assert fig.low <= fig.mean <= fig.high, fig


def test_an_error_bar_is_never_negative():
    assert _error_bar(Figure(mean=2.0, low=2.1, high=2.5, n=3)) == [[0.0], [0.5]]
    assert _error_bar(Figure(mean=2.0, low=None, high=None, n=1)) is None
