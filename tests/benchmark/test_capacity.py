"""The SLA capacity search finds a known edge, says when it cannot bracket one, and rejects loads not sustained.

Synthetic engines have an analytic edge: TTFT = base / (1 - load / mu) (an M/M/1-like hockey stick)
meets a TTFT limit L up to load* = mu (1 - base / L); a server that serves at most mu req/s, with a
fine TTFT, is sustained up to mu / min_sustained_ratio. The last test searches the fake engine's
FIFO-slot mode (capacity k / S req/s, see ``fakes/fake_openai_server.py``) through guidellm.
"""

import asyncio
import math

import pytest
from fakes.fake_process import fake_server
from hypothesis import given, settings
from hypothesis import strategies as hs

from helpers.benchmark.capacity import (
    CapacitySearch,
    Measurement,
    SlaLimits,
    judge,
    measurement_from_load,
    measurement_from_numbers,
    search_capacity,
    search_capacity_sync,
)
from helpers.benchmark.probe import sustained_floor
from helpers.core.config import SLA
from helpers.core.paths import MODELS_DIR
from helpers.measure.loadgen import LoadResult, run_rate
from helpers.measure.prompts import fixed_shapes, write_dataset


def hockey_stick(mu: float, base_ms: float, served_max: float | None = None):
    """A synthetic engine: TTFT p95 rises as base / (1 - load/mu) and diverges at mu."""

    def measure(load: float) -> dict:
        ttft = base_ms / (1 - load / mu) if load < mu else 1e9
        served = min(load, served_max if served_max is not None else mu)
        return {"ttft_p95_ms": ttft, "requests": 200, "offered_rate": load, "achieved_rate": served}

    return measure


def test_capacity_within_tolerance_of_the_analytic_edge():
    mu, base, limit = 20.0, 100.0, 500.0
    edge = mu * (1 - base / limit)  # 16 req/s
    r = search_capacity_sync(hockey_stick(mu, base), 1.0, SlaLimits(ttft_p95_ms=limit))
    assert r.bounded and r.converged
    assert r.bracket_low <= edge <= r.bracket_high
    assert abs(r.capacity - edge) / edge <= 0.05
    assert (r.bracket_high - r.bracket_low) / r.bracket_low <= 0.05
    assert [p.load for p in r.probes][:5] == [1.0, 2.0, 4.0, 8.0, 16.0]  # the geometric sweep, then bisection
    assert r.note.startswith(f"capacity {r.capacity:.3g} req/s: passed there, failed at")
    assert "TTFT p95" in r.note


@settings(max_examples=60, deadline=None)
@given(
    mu=hs.floats(0.5, 5000.0),
    base_share=hs.floats(0.02, 0.9),
    start_share=hs.floats(0.01, 3.0),
    growth=hs.floats(1.3, 4.0),
)
def test_capacity_edge_for_any_hockey_stick(mu, base_share, start_share, growth):
    limit = 1000.0
    edge = mu * (1 - base_share)  # base = base_share * limit
    r = search_capacity_sync(
        hockey_stick(mu, base_share * limit),
        start_share * edge,
        SlaLimits(ttft_p95_ms=limit),
        growth=growth,
        min_load=edge / 100,
        max_probes=40,
    )
    assert r.bounded and r.converged, r.note
    assert r.bracket_low <= edge * (1 + 1e-9) and r.bracket_high >= edge * (1 - 1e-9)
    assert abs(r.capacity - edge) / edge <= 0.05


def test_sla_met_at_the_highest_load_tried_is_a_lower_bound():
    r = search_capacity_sync(hockey_stick(20.0, 100.0), 1.0, SlaLimits(ttft_p95_ms=500), max_load=10.0)
    assert not r.bounded and r.capacity == 10.0 and r.bracket_high is None
    assert r.note.startswith("SLA met at the highest load tried (10 req/s): capacity is at least 10 req/s")
    assert [p.load for p in r.probes] == [1.0, 2.0, 4.0, 8.0, 10.0]
    budget = search_capacity_sync(hockey_stick(1e6, 1.0), 1.0, SlaLimits(ttft_p95_ms=500), max_probes=4)
    assert budget.capacity == 8.0 and "probe budget (4) spent" in budget.note


def test_sla_missed_at_the_lowest_load_tried_is_an_upper_bound():
    r = search_capacity_sync(hockey_stick(20.0, 100.0), 8.0, SlaLimits(ttft_p95_ms=50))  # base > limit: no load passes
    assert r.capacity is None and not r.bounded
    assert [p.load for p in r.probes] == [8.0, 4.0, 2.0]  # down to start / growth**2
    assert r.note.startswith("SLA missed at the lowest load tried (2 req/s): capacity is below 2 req/s")


def test_a_start_above_the_edge_sweeps_down_then_bisects():
    r = search_capacity_sync(hockey_stick(20.0, 100.0), 40.0, SlaLimits(ttft_p95_ms=500))
    assert [p.load for p in r.probes][:2] == [40.0, 20.0]
    assert r.converged and abs(r.capacity - 16.0) / 16.0 <= 0.05


def test_latency_within_sla_but_rate_not_kept_up_is_not_sustained():
    m = Measurement(load=12, ttft_p95_ms=120, requests=300, offered_rate=12.0, achieved_rate=10.0)
    p = judge(m, SlaLimits(ttft_p95_ms=500))
    assert p.meets_sla and not p.sustained and not p.passed
    assert p.why == "served 10.00 of 12.00 req/s offered (83%) < 83.5% (95% less the noise)"
    growing = judge(
        m.model_copy(update={"achieved_rate": 12.0, "queue_growing": True, "queue_growth": 0.8}),
        SlaLimits(ttft_p95_ms=500),
    )
    assert not growing.sustained and "queue grew over the trial (+0.80/s)" in growing.why
    ok = judge(m.model_copy(update={"achieved_rate": 11.9, "queue_growing": False}), SlaLimits(ttft_p95_ms=500))
    assert ok.passed and ok.why == "TTFT p95 120 ms ≤ 500 ms; served 11.90 of 12.00 req/s offered (99%); queue flat"


def test_a_server_capped_below_the_offered_rate_is_found_by_its_throughput():
    # TTFT never exceeds the limit (mu far away) but the server serves at most 10 req/s.
    r = search_capacity_sync(hockey_stick(1e6, 10.0, served_max=10.0), 1.0, SlaLimits(ttft_p95_ms=500))
    assert r.converged
    edge = 10.0 / sustained_floor(0.95, 200)  # sustained up to mu / (min_sustained_ratio less the noise)
    assert 10.0 <= r.bracket_high and r.capacity <= edge
    assert abs(r.capacity - edge) / edge <= 0.05
    assert all(p.meets_sla for p in r.probes) and not all(p.sustained for p in r.probes)


def test_sla_failures_other_than_ttft():
    limits = SlaLimits(ttft_p95_ms=500, itl_p95_ms=20, max_error_share=0.01)
    slow_tokens = judge(Measurement(load=1, ttft_p95_ms=100, itl_p95_ms=35, requests=50), limits)
    assert not slow_tokens.meets_sla and slow_tokens.why.startswith("ITL p95 35.0 ms > 20.0 ms")
    errors = judge(measurement_from_numbers(1, [100.0] * 95, errors=5), limits.model_copy(update={"itl_p95_ms": None}))
    assert not errors.meets_sla and errors.why.startswith("errors 5.0% > 1.0%")
    nothing = judge(measurement_from_numbers(1, []), limits)
    assert not nothing.meets_sla and not nothing.sustained and "no request completed" in nothing.why
    unmeasured_itl = judge(Measurement(load=1, ttft_p95_ms=100, requests=50), limits)
    assert unmeasured_itl.meets_sla  # as helpers.benchmark.sla.meets_sla: an ITL not measured does not fail
    from_config = judge(Measurement(load=1, ttft_p95_ms=100, itl_p95_ms=35, requests=50), SLA(itl_p95_ms=20))
    assert from_config.why == slow_tokens.why  # the config's SLA is accepted as it is


def test_concurrency_axis_probes_whole_streams():
    # TTFT grows linearly with streams: 40 ms a stream, limit 500 ms -> 12 streams pass, 13 fail.
    def measure(c):
        return {"ttft_p95_ms": 40.0 * c, "requests": 100}

    r = search_capacity_sync(measure, 1, SlaLimits(ttft_p95_ms=500), axis="concurrency")
    assert all(p.load == int(p.load) for p in r.probes)
    assert r.capacity == 12 and r.bracket_high == 13 and r.converged
    assert "rates not measured (closed loop)" in r.probes[0].why


def test_async_measure_reuse_and_progress():
    seen, measured = [], []

    async def measure(load):
        measured.append(load)
        await asyncio.sleep(0)
        return hockey_stick(20.0, 100.0)(load)

    limits = SlaLimits(ttft_p95_ms=500)
    first = asyncio.run(search_capacity(measure, 1.0, limits, on_probe=seen.append, max_probes=5))
    assert [p.load for p in seen] == measured == [1.0, 2.0, 4.0, 8.0, 16.0] and not first.converged
    measured.clear()
    again = asyncio.run(search_capacity(measure, 1.0, limits, reuse=first.probes))  # resumes: no re-measuring
    assert measured[0] not in (1.0, 2.0, 4.0, 8.0, 16.0) and len(measured) == len(again.probes) - 5
    assert again.converged and abs(again.capacity - 16.0) / 16.0 <= 0.05
    assert asyncio.run(search_capacity(measure, 1.0, limits, reuse=again.probes)).capacity == again.capacity
    with pytest.raises(TypeError, match="awaitable"):
        search_capacity_sync(measure, 1.0, limits)


def test_search_state_machine_refuses_bad_use():
    with pytest.raises(ValueError):
        CapacitySearch(0.0, SlaLimits(ttft_p95_ms=1))
    with pytest.raises(ValueError, match="below start"):
        CapacitySearch(10.0, SlaLimits(ttft_p95_ms=1), max_load=5.0)
    s = CapacitySearch(1.0, SlaLimits(ttft_p95_ms=1), max_load=1.0)
    assert s.next_load() == 1.0
    s.record({"ttft_p95_ms": 0.5, "requests": 3})
    assert s.next_load() is None
    with pytest.raises(RuntimeError, match="over"):
        s.record({"ttft_p95_ms": 0.5, "requests": 3})


def test_measurement_from_a_load_result():
    res = LoadResult(
        requests=4, errors=0, duration_s=3.0, output_tok_s=0, total_tok_s=0, req_s=1.3,
        input_tokens_mean=16, output_tokens_mean=8, ttft_ms={"p95": 42.0}, itl_ms={"p95": 5.0},
        ttft_values_ms=[10.0, 20.0, 30.0, 40.0], offered_rate=2.0, sent_rate=2.0, completed_rate=1.0,
        request_starts_s=[0.0, 0.5, 1.0, 1.5, 2.0, 2.5, 3.0], request_ends_s=[1.0, 2.0, 3.0, 4.0, None, None, None],
    )  # fmt: skip
    m = measurement_from_load(res)
    assert m.load == 2.0 and m.ttft_p95_ms == 42.0 and m.itl_p95_ms == 5.0  # guidellm's own p95 preferred
    assert (m.offered_rate, m.achieved_rate) == (2.0, 1.0)
    assert m.queue_growing is not None and m.queue_growth > 0
    assert not judge(m, SlaLimits(ttft_p95_ms=100)).sustained
    with pytest.raises(ValueError, match="offered_rate"):
        measurement_from_load(LoadResult(requests=0, errors=0, duration_s=0, output_tok_s=0, total_tok_s=0,
                                         req_s=0, input_tokens_mean=None, output_tokens_mean=None))  # fmt: skip


def test_a_late_client_is_measured_again_then_counts_as_failed():
    calls = []

    def measure(load):
        calls.append(load)
        lag = 400.0 if load >= 8 else 5.0  # the client cannot drive 8 req/s or more on schedule
        return {
            "ttft_p95_ms": 10.0,
            "requests": 100,
            "offered_rate": load,
            "achieved_rate": load,
            "client_lag_p95_ms": lag,
        }

    r = search_capacity_sync(measure, 1.0, SlaLimits(ttft_p95_ms=500), max_client_lag_ms=100, retries=1)
    assert calls[:5] == [1.0, 2.0, 4.0, 8.0, 8.0]  # 8 measured twice, late both times
    late = r.probes[3]
    assert late.meets_sla and late.sustained and not late.delivered and not late.passed
    assert late.why == "client sent late (p95 400 ms > 100 ms)"
    assert r.bracket_high == 8.0 and r.capacity < 8.0 and "client sent late" in r.note
    unchecked = search_capacity_sync(measure, 1.0, SlaLimits(ttft_p95_ms=500), max_client_lag_ms=None, max_load=16)
    assert unchecked.capacity == 16.0


def test_search_finds_the_fake_engines_edge_through_guidellm(tmp_path, monkeypatch):
    """FIFO slots k=4, 4 tokens at 0.1 s: capacity mu = 4 / 0.4 s = 10 req/s; evenly spaced arrivals.

    Below mu no request waits (TTFT a few ms); past it the n-th request waits n (1/mu - 1/lam), so with
    40+ requests a probe's TTFT p95 passes 80 ms once lam exceeds mu by about 2%, and completions fall
    to mu. Each guidellm run costs several seconds of start-up on a small machine, so the search starts
    near the edge (9 req/s, growth 1.25): five probes bracket it within 5%. The search logic itself is
    covered on synthetic engines above; this checks run_rate -> measurement -> judge on a real server.
    """
    monkeypatch.setenv("PLAYBOOK_GUIDELLM_WORKERS", "1")  # one worker process: less start-up per probe
    model_dir = MODELS_DIR / "tiny-llama"
    dataset = write_dataset(fixed_shapes(80, 16, 4), model_dir, tmp_path / "prompts.jsonl", seed=1)
    mu = 10.0
    with fake_server(tmp_path, {"FAKE_SERVICE_SLOTS": "4", "FAKE_TOKEN_DELAY_S": "0.1"}) as url:

        async def measure(rate: float) -> Measurement:
            n = max(40, math.ceil(rate * 4))
            res = await run_rate(url, "tiny-llama", model_dir, dataset, rate, n, 3 * n / rate + 5, arrivals="constant")
            assert res.offered_rate == rate and abs(len(res.request_starts_s) - n) <= 1  # guidellm may drop the last
            return measurement_from_load(res)

        async def warm_then_search():
            # The first guidellm run of a process stalls on cold imports (TTFT outliers of 100-170 ms seen
            # here): warm up once, unmeasured, as any benchmark should.
            await run_rate(url, "tiny-llama", model_dir, dataset, 5.0, 5, 30.0, arrivals="constant")
            return await search_capacity(measure, 9.0, SlaLimits(ttft_p95_ms=80), growth=1.25, max_probes=8)

        r = asyncio.run(warm_then_search())
    trail = [(p.load, p.why) for p in r.probes]
    assert r.probes[0].load == 9.0 and r.probes[0].passed, trail
    over = next(p for p in r.probes if p.load == 11.25)  # 12.5% past mu: the queue builds
    assert not over.passed and over.achieved_rate < 0.95 * over.offered_rate, trail
    assert r.bounded and r.converged, r.note
    assert abs(r.capacity - mu) / mu <= 0.05, trail


def _dump(starts, ends):
    """A guidellm-like request dump: successful requests with send and finish times (epoch seconds)."""
    rows = zip(starts, ends, strict=True)
    return {"successful": [{"request_start_time": 1000.0 + s, "request_end_time": 1000.0 + e} for s, e in rows]}


def test_an_engine_that_finishes_a_whole_batch_at_once_does_not_read_as_serving_more():
    """Seen on the H200: 1,008 requests sent in 12 s all finished within a few seconds of each other.

    Over the completions' own span that read as 379 req/s served of 84 offered; the steady window (first
    finish to last send) is empty, so no served rate is claimed and the load is not sustained.
    """
    from helpers.measure.timing import request_timing

    starts = [i / 84 for i in range(1008)]
    ends = [14.0 + i / 380 for i in range(1008)]  # first finish after the last send
    got = request_timing(_dump(starts, ends))
    assert got["completed_rate"] is None and got["steady_window_s"] < 0
    res = LoadResult(requests=1008, errors=0, duration_s=17, output_tok_s=0, total_tok_s=0, req_s=59,
                     input_tokens_mean=512, output_tokens_mean=256, ttft_ms={"p95": 900.0},
                     ttft_values_ms=[900.0] * 1008, offered_rate=84, **got)  # fmt: skip
    probe = judge(measurement_from_load(res, queue_samples=[(t, 0.0) for t in range(12)]), SlaLimits(ttft_p95_ms=2000))
    assert probe.meets_sla and not probe.sustained and "no request finished before the last was sent" in probe.why


def test_the_served_rate_is_the_completions_over_the_steady_window():
    """A sustained load (each request takes 2 s) serves the offered 10 req/s; one capped at 6 req/s does not."""
    from helpers.measure.timing import request_timing

    starts = [i / 10 for i in range(200)]
    steady = request_timing(_dump(starts, [s + 2.0 for s in starts]))
    assert steady["completed_rate"] == pytest.approx(10, rel=0.02) and steady["steady_window_s"] == pytest.approx(17.9)
    assert steady["sent_rate"] == pytest.approx(10, rel=0.02)
    # the first 20 sends left 1 s late, all at once (workers starting): the window's sends still read 10/s
    late = [max(s, 1.0) for s in starts]
    assert request_timing(_dump(late, [s + 2.0 for s in starts]))["sent_rate"] == pytest.approx(10, rel=0.02)
    capped = request_timing(_dump(starts, [2.0 + i / 6 for i in range(200)]))  # finishes at 6/s, falls behind
    assert capped["completed_rate"] == pytest.approx(6, rel=0.05)


def test_an_engine_that_admits_the_overload_into_its_batch_is_caught_by_its_served_rate():
    """The waiting queue stays 0 (every request is admitted): finish against send times show the overload."""
    from helpers.measure.timing import request_timing

    starts = [i / 20 for i in range(400)]
    timing = request_timing(_dump(starts, [1.0 + i / 12 for i in range(400)]))  # served at 12/s of 20
    res = LoadResult(requests=400, errors=0, duration_s=34, output_tok_s=0, total_tok_s=0, req_s=12,
                     input_tokens_mean=512, output_tokens_mean=256, ttft_ms={"p95": 300.0},
                     ttft_values_ms=[300.0] * 400, offered_rate=20, **timing)  # fmt: skip
    m = measurement_from_load(res, queue_samples=[(t / 2, 0.0) for t in range(40)])
    probe = judge(m, SlaLimits(ttft_p95_ms=2000))
    assert m.queue_growing is False and probe.meets_sla and not probe.sustained
    assert "served 60% of the offered rate (finish against send times) <" in probe.why
    assert probe.margins["served"] > 0 and not probe.censored


def test_a_shortfall_within_the_poisson_noise_of_a_small_probe_is_not_an_overload():
    """80 requests served at 85% of the sent rate: within 2/sqrt(80) of 95%; 1,000 requests at 85%: not."""
    small = judge(Measurement(load=7, ttft_p95_ms=100, requests=80, offered_rate=7.6, achieved_rate=6.5),
                  SlaLimits(ttft_p95_ms=2000))  # fmt: skip
    large = judge(Measurement(load=40, ttft_p95_ms=100, requests=1000, offered_rate=40, achieved_rate=34),
                  SlaLimits(ttft_p95_ms=2000))  # fmt: skip
    assert small.sustained and not large.sustained and "< 88.7%" in large.why
