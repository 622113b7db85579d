"""The finite prefix-cache simulation: a hand-computed trace, output blocks, block-size conversion, a reference LRU."""

from collections import OrderedDict

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers.workload.cache_sim import engine_blocks, prefix_chain_ids, simulate_prefix_cache
from helpers.workload.traces.base import Trace, finish_trace


def trace(rows: list[tuple[list[int], int, int]], block_size: int = 4) -> Trace:
    """Requests one second apart: (hash ids, input tokens, output tokens)."""
    frame = pd.DataFrame(
        {
            "start_s": np.arange(len(rows), dtype=float),
            "end_s": np.nan,
            "input_tokens": [r[1] for r in rows],
            "output_tokens": [r[2] for r in rows],
        }
    )
    hashes = [np.asarray(r[0], dtype=np.int64) for r in rows]
    return finish_trace("t", "mooncake", frame, hashes=hashes, block_size=block_size)


# Blocks: A = [1], B = [1,2], C = [1,2,3], D = [1,2,4], E = [5]; capacity 3 blocks of 4 tokens.
HAND = [
    ([1, 2, 3], 12, 0),  # miss; cache (LRU..MRU) C B A
    ([1, 2, 4], 12, 0),  # A B hit (8); D in, C evicted -> D B A
    ([1, 2, 3], 12, 0),  # A B hit (8); C in, D evicted -> C B A
    ([5], 4, 0),  # miss; E in, C evicted -> B A E
    ([1, 2, 3, 6], 14, 0),  # 3 full blocks; A B hit (8); C in, E evicted -> C B A
    ([1, 2, 3], 13, 0),  # A B C hit, 12 <= 13 - 1 -> 12
    ([1, 2, 3], 12, 0),  # A B C cached, but at most 11 tokens: 2 blocks -> 8
]


def test_hand_computed_trace():
    run = simulate_prefix_cache(trace(HAND), capacity_tokens=12, block_size=4)
    assert list(run.hit_tokens) == [0, 8, 8, 0, 8, 12, 8]
    assert list(run.unbounded_hit_tokens) == [0, 8, 8, 0, 12, 12, 8]
    s = run.summary
    assert (s.prompt_tokens, s.hit_tokens, s.unbounded_hit_tokens, s.evicted_blocks) == (79, 44, 48, 4)
    assert s.capacity_blocks == 3
    assert s.hit_rate == pytest.approx(44 / 79) and s.unbounded_hit_rate == pytest.approx(48 / 79)


def test_a_big_cache_is_the_unbounded_bound_and_a_zero_cache_hits_nothing():
    big = simulate_prefix_cache(trace(HAND), capacity_tokens=10_000, block_size=4)
    assert list(big.hit_tokens) == list(big.unbounded_hit_tokens) and big.summary.evicted_blocks == 0
    none = simulate_prefix_cache(trace(HAND), capacity_tokens=3, block_size=4)
    assert none.summary.capacity_blocks == 0 and none.summary.hit_tokens == 0
    assert none.summary.unbounded_hit_tokens == 48


def test_output_blocks_take_room():
    rows = [([1, 2], 8, 0), ([3], 4, 8), ([1, 2], 8, 0)]  # the second request's 2 output blocks push A and B out
    with_out = simulate_prefix_cache(trace(rows), capacity_tokens=12, block_size=4)
    without = simulate_prefix_cache(trace(rows), capacity_tokens=12, block_size=4, include_output=False)
    assert list(with_out.hit_tokens) == [0, 0, 0] and with_out.summary.evicted_blocks == 4  # A B, then O1 O2
    assert list(without.hit_tokens) == [0, 0, 4] and without.summary.evicted_blocks == 0


def test_trace_blocks_split_into_smaller_engine_blocks():
    t = trace([([1, 2], 14, 0), ([1, 9], 16, 0)], block_size=8)
    ids, offsets = engine_blocks(t, 4)
    per_req = [list(ids[a:b]) for a, b in zip(offsets[:-1], offsets[1:], strict=True)]
    assert [len(r) for r in per_req] == [3, 4]  # 14 // 4 and 16 // 4 full blocks
    assert per_req[0][:2] == per_req[1][:2] and per_req[0][2] != per_req[1][2]
    run = simulate_prefix_cache(t, capacity_tokens=100, block_size=4)
    assert list(run.hit_tokens) == [0, 8]  # hash 1's two halves


def test_trace_blocks_group_into_larger_engine_blocks():
    t = trace([([1, 2, 3], 17, 0), ([1, 2, 4], 17, 0), ([1, 5, 3], 17, 0)], block_size=8)
    run = simulate_prefix_cache(t, capacity_tokens=100, block_size=16)
    assert list(run.hit_tokens) == [0, 16, 0]  # one 16-token block = hashes (1, 2); (1, 5) differs


def test_block_sizes_must_divide_and_hashes_must_exist():
    with pytest.raises(ValueError, match="must divide one another"):
        simulate_prefix_cache(trace(HAND, block_size=8), capacity_tokens=100, block_size=12)
    bare = trace(HAND)
    bare.block_hashes = None
    with pytest.raises(ValueError, match="no block hashes"):
        simulate_prefix_cache(bare, capacity_tokens=100, block_size=4)


def test_chain_ids_follow_the_prefix_not_the_block():
    ids = prefix_chain_ids(np.array([1, 2, 7, 2, 1, 2]), np.array([0, 2, 4, 6]))
    assert ids[0] == ids[4] and ids[1] == ids[5]  # (1), (1,2) again
    assert ids[3] != ids[1]  # hash 2 after 7 is another block


def reference(rows, capacity_blocks, bs):
    """Slow LRU with explicit timestamps and an explicit leading-run hit (no prefix-closure shortcut)."""
    chain: dict[tuple, int] = {}
    last: OrderedDict = OrderedDict()
    hits, clock, uid = [], 0, 0
    for h, n_in, n_out in rows:
        keys = [chain.setdefault(tuple(h[: j + 1]), len(chain)) for j in range(n_in // bs)]
        hit = 0
        while hit < len(keys) and keys[hit] in last:
            hit += 1
        hits.append(min(hit, max(n_in - 1, 0) // bs) * bs)
        touch = [("out", uid + k) for k in range((n_in + n_out) // bs - n_in // bs)] + keys[::-1]
        uid += len(touch)
        for k in touch:
            clock += 1
            last.pop(k, None)
            last[k] = clock
        while len(last) > capacity_blocks:
            last.popitem(last=False)
    return hits


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(st.lists(st.integers(0, 3), min_size=1, max_size=5), st.integers(0, 3), st.integers(0, 9)),
        min_size=1,
        max_size=25,
    ),
    st.integers(0, 8),
)
def test_matches_a_reference_lru(raw, capacity_blocks):
    bs = 2
    rows = [(h, len(h) * bs - cut if len(h) * bs > cut else len(h) * bs, out) for h, cut, out in raw]
    rows = [(h, max(n, (len(h) - 1) * bs + 1), out) for h, n, out in rows]  # ceil(n / bs) == len(h)
    run = simulate_prefix_cache(trace(rows, block_size=bs), capacity_tokens=capacity_blocks * bs, block_size=bs)
    assert list(run.hit_tokens) == reference(rows, capacity_blocks, bs)
