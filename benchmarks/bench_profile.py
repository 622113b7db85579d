"""Benchmark: profile a 1,000,000-request Mooncake-style trace with block hashes (goal: <= 30 s).

Generates conversations that share a few popular system prompts and grow turn by turn, writes them
as Mooncake JSONL, reads the file back with the registered reader and profiles it. Prints the time
of each stage; run ``python benchmarks/bench_profile.py [N]``.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

from helpers.workload.profile import profile_trace
from helpers.workload.traces import Trace, finish_trace, load_trace
from helpers.workload.traces.mooncake import MOONCAKE_BLOCK_TOKENS

N_SYSTEM_PROMPTS = 50
MAX_TURNS = 12


def generate(n: int, seed: int = 0, span_s: float = 3600.0) -> Trace:
    """``n`` requests: Zipf-popular system prompts, conversations of 1..12 turns, Poisson-ish arrivals."""
    rng = np.random.default_rng(seed)
    n_conv = n // 2 + 1  # mean turns ~2.9: more than enough conversations, the tail is cut
    turns = np.minimum(rng.geometric(1 / 3, n_conv), MAX_TURNS)
    conv = np.repeat(np.arange(n_conv), turns)[:n]
    first = np.concatenate([[0], np.cumsum(turns)[:-1]])
    turn = np.arange(len(conv)) - first[conv]
    sys_len = rng.integers(1, 9, N_SYSTEM_PROMPTS)
    sys_of_conv = np.minimum(rng.zipf(1.5, n_conv) - 1, N_SYSTEM_PROMPTS - 1)
    new_blocks = rng.integers(1, 4, n)
    hist = pd.Series(new_blocks).groupby(conv).cumsum().to_numpy()
    s = sys_of_conv[conv]
    lengths = sys_len[s] + hist
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    pos = np.arange(offsets[-1]) - np.repeat(offsets[:-1], lengths)
    n_sys = np.repeat(sys_len[s], lengths)
    in_sys = pos < n_sys
    values = np.where(
        in_sys, np.repeat(s, lengths) * 64 + pos, 10_000 + np.repeat(conv, lengths) * 64 + (pos - n_sys)
    ).astype(np.int64)
    conv_start = rng.uniform(0, span_s, n_conv)
    start = conv_start[conv] + turn * 30.0 + rng.exponential(5.0, n)
    frame = pd.DataFrame(
        {
            "start_s": start,
            "end_s": np.nan,
            "input_tokens": lengths * MOONCAKE_BLOCK_TOKENS - rng.integers(0, MOONCAKE_BLOCK_TOKENS, n),
            "output_tokens": np.clip(rng.lognormal(5.0, 0.8, n), 1, 4096).astype(np.int64),
        }
    )
    return finish_trace("generated", "mooncake", frame, flat=(values, offsets), block_size=MOONCAKE_BLOCK_TOKENS)


def write_jsonl(trace: Trace, path: Path) -> None:
    """Write ``trace`` as Mooncake JSONL (timestamps in ms)."""
    df = trace.requests
    assert trace.block_hashes is not None and trace.block_offsets is not None
    hashes = np.split(trace.block_hashes, trace.block_offsets[1:-1])
    out = pd.DataFrame(
        {
            "timestamp": (df["start_s"] * 1000).round().astype(np.int64),
            "input_length": df["input_tokens"],
            "output_length": df["output_tokens"],
            "hash_ids": [h.tolist() for h in hashes],
        }
    )
    out.to_json(path, orient="records", lines=True)


def main(n: int = 1_000_000) -> None:
    """Generate, write, read and profile ``n`` requests; print the time of each stage."""
    t = time.perf_counter()
    trace = generate(n)
    print(f"generated {n:,} requests, {len(trace.block_hashes):,} blocks in {time.perf_counter() - t:.1f} s")
    t = time.perf_counter()
    prof = profile_trace(trace)
    in_memory = time.perf_counter() - t
    print(f"profile (in memory): {in_memory:.1f} s")
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "trace.jsonl"
        t = time.perf_counter()
        write_jsonl(trace, path)
        mb = path.stat().st_size / 1e6
        print(f"wrote {mb:.0f} MB JSONL in {time.perf_counter() - t:.1f} s (not timed below)")
        t = time.perf_counter()
        loaded = load_trace(path)
        load_s = time.perf_counter() - t
        t = time.perf_counter()
        prof = profile_trace(loaded)
        prof_s = time.perf_counter() - t
    reuse = prof.prefix_reuse
    print(f"load {load_s:.1f} s + profile {prof_s:.1f} s = {load_s + prof_s:.1f} s (goal <= 30 s)")
    print(
        f"prefix reuse {prof.prefix_reuse_ratio:.3f} (system prompt {reuse.system_prompt_ratio:.3f}, "
        f"multi-turn {reuse.multi_turn_ratio:.3f}); input p50 {prof.input_tokens.p50:.0f}; "
        f"concurrency p50/p95/p99 {prof.concurrency_p50:g}/{prof.concurrency_p95:g}/{prof.concurrency_p99:g}"
    )


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000)
