"""From a workload profile to benchmark requests: sampled shapes, concurrency levels, trace replay.

The benchmark sends ``helpers.measure.prompts.RequestShape`` rows (prompt length, output length, shared
prefix). ``shapes_from_profile`` samples lengths from the profile's empirical distributions and
picks one shared-prefix length so that the share of prompt tokens a prefix cache can serve matches
the measured ``prefix_reuse_ratio``. ``replay_schedule`` replays a trace request by request.
"""

from __future__ import annotations

import math

import numpy as np

from helpers.measure.prompts import RequestShape
from helpers.workload.profile import Profile
from helpers.workload.reuse import analyse_blocks
from helpers.workload.traces import Trace


def sample_lengths(quantiles: list[float], n: int, rng: np.random.Generator, cap: int | None) -> np.ndarray:
    """``n`` lengths drawn by inverse CDF from percentiles 0..100, at least 1, at most ``cap``."""
    q = np.asarray(quantiles, dtype=float)
    u = rng.random(n) * (len(q) - 1)
    v = np.rint(np.interp(u, np.arange(len(q)), q)).astype(np.int64)
    v = np.maximum(v, 1)
    return np.minimum(v, cap) if cap else v


def prefix_for_ratio(inputs: np.ndarray, ratio: float) -> int:
    """Shared-prefix length P so that P x (requests with input >= P) / all input tokens ~= ``ratio``.

    Requests shorter than P get no shared prefix. When the ratio cannot be reached, the P that
    comes closest is returned (check with ``shapes_reuse_ratio``).
    """
    if ratio <= 0 or len(inputs) == 0:
        return 0
    total = float(inputs.sum())
    s = np.unique(inputs)
    at_least = len(inputs) - np.searchsorted(np.sort(inputs), s, side="left")  # requests with input >= s_k
    lo = np.concatenate([[0], s[:-1]])
    p = ratio * total / at_least
    ok = (p > lo) & (p <= s)
    if ok.any():
        return max(1, int(round(p[np.flatnonzero(ok)[0]])))
    return int(s[np.argmax(s * at_least)])


def shapes_reuse_ratio(shapes: list[RequestShape]) -> float:
    """Share of prompt tokens in a prefix that an earlier shape of the same group already sent."""
    seen: set[tuple[int, int]] = set()
    hit = total = 0
    for s in shapes:
        total += s.input_tokens
        key = (s.prefix_group, min(s.shared_prefix_tokens, s.input_tokens))
        if key[1] and key in seen:
            hit += key[1]
        seen.add(key)
    return hit / total if total else 0.0


def shapes_from_profile(
    profile: Profile, n: int, seed: int, max_input: int | None, max_output: int | None
) -> list[RequestShape]:
    """``n`` request shapes with lengths from the profile's distributions and its measured prefix reuse.

    Input and output lengths are sampled independently (the profile keeps no joint distribution);
    ``max_input``/``max_output`` cap them (e.g. for a CPU engine). One shared prefix (group 0) of a
    length chosen by ``prefix_for_ratio`` stands for all measured reuse (system prompt and history).
    """
    rng = np.random.default_rng(seed)
    inputs = sample_lengths(profile.input_tokens.quantiles, n, rng, max_input)
    outputs = sample_lengths(profile.output_tokens.quantiles, n, rng, max_output)
    prefix = prefix_for_ratio(inputs, profile.prefix_reuse_ratio or 0.0)
    return [RequestShape(int(i), int(o), prefix if i >= prefix else 0, 0) for i, o in zip(inputs, outputs, strict=True)]


def concurrency_levels(profile: Profile, cap: int | None = None) -> list[int]:
    """Return the measured concurrency p50/p95/p99 as levels (rounded up, at least 1, at most cap)."""
    levels = {max(1, math.ceil(x)) for x in (profile.concurrency_p50, profile.concurrency_p95, profile.concurrency_p99)}
    if cap is not None:
        levels = {min(x, cap) for x in levels}
    return sorted(levels)


def replay_schedule(trace: Trace, time_scale: float = 1.0) -> list[tuple[float, RequestShape]]:
    """Each request of ``trace`` as (send time in s from the first request x ``time_scale``, shape).

    ``time_scale`` 0.5 replays twice as fast. A request's shared prefix is its leading blocks
    attributed to a shared system prompt (see ``helpers.workload.reuse``); requests whose prefix ends
    on the same hash chain form one prefix group. Multi-turn history is not replayed as shared.
    """
    if time_scale <= 0:
        raise ValueError("time_scale must be positive")
    df = trace.requests
    n = len(df)
    prefix = np.zeros(n, dtype=np.int64)
    group = np.zeros(n, dtype=np.int64)
    blocks = analyse_blocks(trace)
    if blocks is not None:
        # Leading run of system blocks per request: positions are 0.. in order within a request.
        first_non = np.full(n, np.iinfo(np.int64).max)
        np.minimum.at(first_non, blocks.request[~blocks.system], blocks.position[~blocks.system])
        n_blocks = np.bincount(blocks.request, minlength=n)
        depth = np.minimum(first_non, n_blocks)
        prefix = depth * blocks.block_size
        starts = np.concatenate([[0], np.cumsum(n_blocks)[:-1]])
        has = depth > 0
        last = starts[has] + depth[has] - 1
        keys = depth[has] * (int(blocks.chain.max()) + 1) + blocks.chain[last]
        group[has] = np.unique(keys, return_inverse=True)[1] + 1
    elif "system_tokens" in df:
        prefix = df["system_tokens"].to_numpy(dtype=np.int64)
    sends = df["start_s"].to_numpy(dtype=float) * time_scale
    inp = df["input_tokens"].to_numpy(dtype=np.int64)
    out = df["output_tokens"].to_numpy(dtype=np.int64)
    return [
        (float(t), RequestShape(int(i), int(o), int(min(p, i)), int(g)))
        for t, i, o, p, g in zip(sends, inp, out, prefix, group, strict=True)
    ]
