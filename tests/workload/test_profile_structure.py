"""The profile's structure additions: sessions of a log with session ids, and the finite-cache hit rate."""

from pathlib import Path

import pytest

from helpers.workload.cache_sim import simulate_prefix_cache
from helpers.workload.profile import Profile, profile_trace
from helpers.workload.traces import load_trace

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "traces"


def test_sessions_in_the_profile():
    prof = profile_trace(load_trace(FIX / "openai_sessions.jsonl", "openai-log"))
    assert prof.sessions is not None
    assert (prof.sessions.sessions, prof.sessions.turns_max, prof.sessions.requests_without_session) == (2, 4, 1)
    assert prof.finite_cache_hit_rate is None  # no capacity given, and no block hashes
    assert profile_trace(load_trace(FIX / "mooncake_small.jsonl")).sessions is None


def test_finite_cache_beside_the_unbounded_ratio():
    trace = load_trace(FIX / "mooncake_small.jsonl")
    default = profile_trace(trace)
    assert default.finite_cache is None and default.finite_cache_hit_rate is None
    prof = profile_trace(trace, cache_capacity_tokens=4 * 512, cache_block_size=512)
    sim = simulate_prefix_cache(trace, 4 * 512, 512).summary
    assert prof.finite_cache == sim
    assert prof.finite_cache_hit_rate == pytest.approx(sim.hit_rate)
    assert 0 < prof.finite_cache_hit_rate < prof.prefix_reuse_ratio
    roomy = profile_trace(trace, cache_capacity_tokens=10**6)  # block size defaults to the trace's
    assert roomy.finite_cache.block_size == 512 and roomy.finite_cache.evicted_blocks == 0
    again = Profile.model_validate(prof.model_dump(mode="json"))
    assert again.finite_cache_hit_rate == prof.finite_cache_hit_rate


def test_a_block_size_that_does_not_divide_is_a_note():
    prof = profile_trace(load_trace(FIX / "mooncake_small.jsonl"), cache_capacity_tokens=10_000, cache_block_size=100)
    assert prof.finite_cache is None
    assert (
        prof.notes[-1]
        == "finite prefix cache not simulated: block size 100 and the trace's block size 512 must divide one another"
    )
