"""One definition of "meets the SLA": a stored point, a judged probe and fixed-load trials all read ``sla_rule``.

Each set of figures below is judged three ways (``sla.meets_sla`` on a point, ``probe.judge`` on the
measurement of the same load, ``sla.from_fixed_trials`` on one trial) and must get the same verdict as
``sla_rule.within_sla``: none of them keeps a test of its own.
"""

import itertools
import math

import pytest

from helpers.benchmark.probe import Measurement, judge
from helpers.benchmark.sla import from_fixed_trials, meets_sla
from helpers.benchmark.sla_rule import latency_checks, within_sla
from helpers.core.config import SLA, parse_config
from helpers.run.records import CapacitySummary, EngineResult, Point

TTFT = (None, math.nan, 500.0, 2000.0, 2000.5, 9000.0)
ITL = (None, math.nan, 10.0, 50.0, 50.5)
LIMITS = (SLA(ttft_p95_ms=2000), SLA(ttft_p95_ms=2000, itl_p95_ms=50))
ENGINE = {"label": "a", "engine": "vllm-cpu", "knobs": {"dummy_weights": True}}
COUNTS = ((0, 0), (200, 0), (198, 2), (197, 3))  # (completed, failed): 1% failed is within the default share


def point(ttft, itl, requests, errors) -> Point:
    return Point(label="a", engine="vllm", concurrency=8, phase="trial", requests=requests, errors=errors,
                 duration_s=10.0, output_tok_s=100.0, total_tok_s=200.0, req_s=20.0, ttft_ms_p95=ttft,
                 itl_ms_p95=itl)  # fmt: skip


CASES = list(itertools.product(TTFT, ITL, LIMITS, COUNTS))


@pytest.mark.parametrize(("ttft", "itl", "sla", "counts"), CASES)
def test_a_point_a_probe_and_fixed_trials_get_the_one_verdict(ttft, itl, sla, counts):
    requests, errors = counts
    share = errors / (requests + errors) if requests + errors else 0.0
    want = within_sla(requests, ttft, itl, share, sla)
    p = point(ttft, itl, requests, errors)
    assert meets_sla(p, sla) is want
    m = Measurement(load=8, axis="concurrency", ttft_p95_ms=ttft, itl_p95_ms=itl, error_share=share, requests=requests)
    probe = judge(m, sla)
    assert probe.meets_sla is want
    assert (not want) == any(
        w in probe.why for w in ("> ", "p95 not measured", "no request completed")
    )  # the words say why it failed, and only when it did
    stored = all(x is None or math.isfinite(x) for x in (ttft, itl))  # a stored point holds no NaN (JSON)
    if requests and stored:  # a fixed-load representative of one trial: its means are the trial's own figures
        cfg = parse_config({"name": "f", "model": {"path": "tiny-llama"}, "sla": sla.model_dump(), "engines": [ENGINE]})
        fixed = CapacitySummary(axis="concurrency", searched=False, trial_load=8.0)
        result = EngineResult(label="a", engine="vllm", points=[p], capacity=fixed)
        assert from_fixed_trials(result, cfg).meets_sla is want


def test_the_rule_in_words():
    sla = SLA(ttft_p95_ms=2000, itl_p95_ms=50)
    assert within_sla(10, 2000.0, 50.0, 0.01, sla)  # at the limits: met
    assert not within_sla(10, 2000.0, 50.5, 0.0, sla)  # ITL over its limit
    assert within_sla(10, 2000.0, None, 0.0, sla) and within_sla(10, 2000.0, math.nan, 0.0, sla)  # ITL not measured
    assert not within_sla(10, None, 10.0, 0.0, sla) and not within_sla(10, math.nan, 10.0, 0.0, sla)  # TTFT must be
    assert not within_sla(0, 100.0, 10.0, 0.0, sla) and not within_sla(10, 100.0, 10.0, 0.02, sla)
    assert [c.name for c in latency_checks(1.0, 1.0, SLA(ttft_p95_ms=2000))] == ["TTFT p95"]  # no ITL limit
