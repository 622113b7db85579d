"""Synthetic traces: requests made from config numbers when there is no trace file.

Lengths are fixed (``Workload.input_tokens`` / ``output_tokens``, the prompt length including the
shared system prompt), arrivals are a Poisson process at the configured mean rate, and every prompt
starts with the same ``shared_prefix_tokens``-token system prompt. The trace carries block hashes
(shared for the system prompt's full blocks, unique after) and a ``system_tokens`` column, so it
profiles exactly like a real trace with a shared system prompt.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from helpers.workload.traces.base import Trace, finish_trace

DEFAULT_REQUESTS_PER_S = 1.0
"""Arrival rate used when the config gives neither a mean nor a peak rate."""


def synthetic_trace(
    n: int,
    input_tokens: int,
    output_tokens: int,
    *,
    shared_prefix_tokens: int = 0,
    requests_per_s: float = DEFAULT_REQUESTS_PER_S,
    block_size: int = 16,
    seed: int = 0,
) -> Trace:
    """``n`` requests of fixed lengths, Poisson arrivals at ``requests_per_s``, one shared system prompt."""
    if n <= 0:
        raise ValueError("n must be positive")
    rng = np.random.default_rng(seed)
    starts = np.cumsum(rng.exponential(1.0 / requests_per_s, size=n))
    prefix = min(shared_prefix_tokens, input_tokens)
    frame = pd.DataFrame(
        {
            "start_s": starts,
            "end_s": np.nan,
            "input_tokens": np.full(n, input_tokens, dtype=np.int64),
            "output_tokens": np.full(n, output_tokens, dtype=np.int64),
            "system_tokens": np.full(n, prefix, dtype=np.int64),
        }
    )
    n_blocks = -(-input_tokens // block_size)
    n_shared = prefix // block_size
    # Block ids: 0..n_shared-1 for the system prompt; unique ids after, different in every request.
    grid = np.arange(n * n_blocks, dtype=np.int64).reshape(n, n_blocks) + n_blocks
    grid[:, :n_shared] = np.arange(n_shared, dtype=np.int64)
    offsets = np.arange(n + 1, dtype=np.int64) * n_blocks
    return finish_trace(
        "synthetic",
        "synthetic",
        frame,
        flat=(grid.ravel(), offsets),
        block_size=block_size,
        notes=[
            f"synthetic: {n} requests of {input_tokens} input / {output_tokens} output tokens, "
            f"{prefix}-token shared system prompt, Poisson arrivals at {requests_per_s:g} req/s"
        ],
    )


def trace_from_workload(workload, n: int = 1000, seed: int = 0) -> Trace:
    """Make the synthetic trace a ``helpers.core.config.Workload`` describes (rate: mean, else peak, else 1/s)."""
    rate = workload.mean_requests_per_s or workload.peak_requests_per_s or DEFAULT_REQUESTS_PER_S
    return synthetic_trace(
        n,
        workload.input_tokens,
        workload.output_tokens,
        shared_prefix_tokens=workload.shared_prefix_tokens,
        requests_per_s=rate,
        block_size=workload.source.block_size,
        seed=seed,
    )
