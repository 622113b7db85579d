"""Synthetic traces made from config numbers."""

import numpy as np
import pytest

from helpers.workload.traces.synthetic import synthetic_trace


def test_fixed_lengths_shared_prefix_blocks():
    t = synthetic_trace(5, 40, 8, shared_prefix_tokens=20, requests_per_s=2.0, block_size=8, seed=1)
    df = t.requests
    assert (df["input_tokens"] == 40).all() and (df["output_tokens"] == 8).all()
    assert (df["system_tokens"] == 20).all()
    assert df["start_s"].iloc[0] == 0 and df["start_s"].is_monotonic_increasing
    blocks = t.block_hashes.reshape(5, 5)
    # Two full blocks (16 tokens) of the 20-token prompt are shared; the rest is unique.
    assert (blocks[:, :2] == blocks[0, :2]).all()
    assert len(np.unique(blocks[:, 2:])) == 15


def test_rate_is_roughly_the_configured_one():
    t = synthetic_trace(2000, 10, 1, requests_per_s=4.0, seed=0)
    assert len(t) / t.requests["start_s"].max() == pytest.approx(4.0, rel=0.1)


def test_prefix_longer_than_prompt_is_clipped():
    t = synthetic_trace(2, 10, 1, shared_prefix_tokens=50)
    assert (t.requests["system_tokens"] == 10).all()
