"""From a profile to benchmark shapes: sampling, shared-prefix sizing, concurrency levels, replay."""

from pathlib import Path

import numpy as np
import pytest

from helpers.core.paths import MODELS_DIR
from helpers.measure.prompts import RequestShape
from helpers.workload.profile import profile_trace
from helpers.workload.shapes import (
    concurrency_levels,
    prefix_for_ratio,
    replay_schedule,
    shapes_from_profile,
    shapes_reuse_ratio,
)
from helpers.workload.traces import load_trace
from helpers.workload.traces.synthetic import synthetic_trace

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "traces"
AZURE = Path("/work/shared/data/azure-llm-inference-trace-2023-conv.csv")


@pytest.mark.skipif(not AZURE.is_file(), reason="shared Azure trace not present")
def test_shapes_follow_the_measured_distribution():
    prof = profile_trace(load_trace(AZURE))
    shapes = shapes_from_profile(prof, 20000, seed=1, max_input=None, max_output=None)
    inp = np.array([s.input_tokens for s in shapes])
    out = np.array([s.output_tokens for s in shapes])
    assert np.median(inp) == pytest.approx(prof.input_tokens.p50, rel=0.03)
    assert np.percentile(out, 95) == pytest.approx(prof.output_tokens.p95, rel=0.05)
    assert all(s.shared_prefix_tokens == 0 for s in shapes)  # reuse unknown -> none invented
    assert shapes == shapes_from_profile(prof, 20000, seed=1, max_input=None, max_output=None)


def test_shapes_are_capped():
    prof = profile_trace(synthetic_trace(100, 3000, 500, shared_prefix_tokens=1000))
    shapes = shapes_from_profile(prof, 50, seed=0, max_input=256, max_output=16)
    assert all(s.input_tokens == 256 and s.output_tokens == 16 for s in shapes)


def test_shared_prefix_matches_measured_reuse():
    prof = profile_trace(load_trace(FIX / "mooncake_small.jsonl"))
    shapes = shapes_from_profile(prof, 5000, seed=3, max_input=None, max_output=None)
    assert {s.prefix_group for s in shapes} == {0}
    assert shapes_reuse_ratio(shapes) == pytest.approx(prof.prefix_reuse_ratio, abs=0.01)


def test_prefix_for_ratio_exact_and_unreachable():
    inputs = np.array([100, 100, 200, 400])  # 800 tokens
    assert prefix_for_ratio(inputs, 0.5) == 100  # 100 x 4 requests / 800
    assert prefix_for_ratio(inputs, 0.375) == 75
    assert prefix_for_ratio(inputs, 0.0) == 0
    assert prefix_for_ratio(inputs, 0.9) == 100  # unreachable: the best (0.5) is returned


def test_shapes_reuse_ratio_counts_repeats_only():
    shapes = [RequestShape(100, 1, 50), RequestShape(100, 1, 50), RequestShape(100, 1, 50, prefix_group=1)]
    assert shapes_reuse_ratio(shapes) == pytest.approx(50 / 300)


def test_concurrency_levels():
    prof = profile_trace(load_trace(FIX / "openai_chat.jsonl", model_dir=MODELS_DIR / "tiny-llama"))
    levels = concurrency_levels(prof)
    assert levels == sorted(set(levels)) and levels[-1] == 2 and levels[0] >= 1
    assert concurrency_levels(prof, cap=1) == [1]


def test_replay_schedule_times_and_prefix_groups():
    sched = replay_schedule(load_trace(FIX / "mooncake_small.jsonl"), time_scale=0.5)
    assert [t for t, _ in sched] == [0, 0.5, 1.0, 1.5, 2.0, 2.5]
    shapes = [s for _, s in sched]
    assert [s.input_tokens for s in shapes] == [1536, 1300, 2048, 1024, 2560, 1536]
    # The branching chain 1-2 (two blocks) is the shared prefix of every request but r3.
    assert [s.shared_prefix_tokens for s in shapes] == [1024, 1024, 1024, 0, 1024, 1024]
    assert len({s.prefix_group for s in shapes if s.shared_prefix_tokens}) == 1


def test_replay_without_blocks_and_bad_scale():
    sched = replay_schedule(load_trace(FIX / "azure_small.csv"), time_scale=2)
    assert sched[1][0] == pytest.approx(2 * 4.314579, abs=1e-5)
    assert all(s.shared_prefix_tokens == 0 for _, s in sched)
    with pytest.raises(ValueError, match="time_scale"):
        replay_schedule(load_trace(FIX / "azure_small.csv"), time_scale=0)
