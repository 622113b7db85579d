"""A finite prefix cache, simulated over a trace: what share of prompt tokens an LRU cache of a given size serves.

The model is vLLM's automatic prefix caching (``vllm/v1/core``), replayed one request at a time in
arrival order:

- a prompt is cut into blocks of ``block_size`` tokens; a block is identified by its content *and*
  everything before it (hash-of-prefix), so equal blocks after different prefixes are different;
- a request's hit is the longest run of its leading full blocks that are in the cache, at most
  ``input_tokens - 1`` tokens (the engine recomputes the last prompt token to get logits, so a fully
  cached prompt of whole blocks still computes its last block);
- then every block of the request is touched (moved to most recent) or inserted, and with
  ``include_output`` the full blocks its output tokens fill are inserted too (they are cached, and
  take room, but nothing later asks for them in a replay);
- when more than ``capacity_tokens // block_size`` blocks are cached, the least recently used go.
  A request's blocks are touched tail first, as vLLM frees them in reverse order, so a cached block's
  prefix is always more recent than the block: the cached set stays prefix-closed and eviction eats
  chains from their tails.

What it leaves out: requests in flight at the same time (their blocks cannot be evicted, and the
order in which they free blocks follows their finish, not their arrival), preemption and the
engine's one reserved block. ``unbounded`` is the same count with no eviction: the upper bound.

The trace's block size (512 tokens for Mooncake hash ids) and the simulated one must divide one
another: a 512-token block is four 128-token blocks; eight 16-token blocks make one 128-token block.
"""

from __future__ import annotations

from collections import OrderedDict, deque
from dataclasses import dataclass
from itertools import repeat, starmap

import numpy as np
import pandas as pd
from pydantic import BaseModel, ConfigDict, Field

from helpers.workload.traces.base import Trace

CHUNK_REQUESTS = 50_000
"""Requests whose block ids are turned into Python lists at once (bounds memory on big traces)."""

CACHE_SIM_MODEL = (
    "LRU prefix cache of capacity // block_size blocks, one request at a time in arrival order; hit = leading "
    "cached full blocks (at most input - 1 tokens); blocks touched tail first; output blocks cached too"
)


class CacheSimulation(BaseModel):
    """Prefix-cache hits of a trace for one block size and capacity, next to the unbounded bound."""

    model_config = ConfigDict(extra="forbid")

    block_size: int = Field(description="Simulated KV-cache block size (tokens).")
    capacity_tokens: int = Field(description="KV-cache capacity simulated (tokens).")
    capacity_blocks: int = Field(description="capacity_tokens // block_size.")
    requests: int = Field(description="Requests simulated.")
    prompt_tokens: int = Field(description="All prompt tokens of those requests.")
    hit_tokens: int = Field(description="Prompt tokens served from the finite cache.")
    hit_rate: float = Field(description="hit_tokens / prompt_tokens: the finite-cache hit rate.")
    unbounded_hit_tokens: int = Field(description="Prompt tokens an unbounded cache would serve.")
    unbounded_hit_rate: float = Field(description="unbounded_hit_tokens / prompt_tokens (upper bound).")
    evicted_blocks: int = Field(description="Blocks evicted to stay within capacity.")
    include_output: bool = Field(description="Whether the blocks output tokens fill were cached too.")
    model: str = Field(default=CACHE_SIM_MODEL, description="The cache model in words.")


@dataclass
class CacheRun:
    """A simulation's summary and its per-request hit tokens (finite and unbounded, aligned with the trace)."""

    summary: CacheSimulation
    hit_tokens: np.ndarray
    unbounded_hit_tokens: np.ndarray


def prefix_chain_ids(values: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """One id per block (same CSR layout as ``values``): equal iff the block and all blocks before it are equal.

    One vectorised pass per block position: the id at position ``p`` numbers the distinct pairs
    (id at ``p - 1``, hash at ``p``).
    """
    values = np.asarray(values)
    offsets = np.asarray(offsets, dtype=np.int64)
    out = np.empty(len(values), dtype=np.int64)
    if not len(values):
        return out
    lengths = np.diff(offsets)
    pos = np.arange(len(values), dtype=np.int64) - np.repeat(offsets[:-1], lengths)
    hcode = pd.factorize(values)[0].astype(np.int64)
    n_hash = int(hcode.max()) + 1
    counts = np.bincount(pos)
    order = np.argsort(pos.astype(np.int32) if len(counts) < 2**31 else pos, kind="stable")
    base = start = 0
    for p, c in enumerate(counts):
        idx = order[start : start + c]
        start += c
        key = hcode[idx] if p == 0 else out[idx - 1] * n_hash + hcode[idx]
        codes, uniq = pd.factorize(key)
        out[idx] = codes.astype(np.int64) + base
        base += len(uniq)
    return out


def engine_blocks(trace: Trace, block_size: int) -> tuple[np.ndarray, np.ndarray]:
    """Ids (CSR values, offsets) of each request's full prompt blocks at ``block_size``, hash-of-prefix semantics.

    Raises ``ValueError`` when the trace has no block hashes or its block size and ``block_size`` do
    not divide one another.
    """
    if not trace.has_blocks or not trace.block_size:
        raise ValueError(f"the {trace.format} trace has no block hashes to simulate a prefix cache on")
    t = int(trace.block_size)
    if block_size <= 0 or (t % block_size and block_size % t):
        raise ValueError(f"block size {block_size} and the trace's block size {t} must divide one another")
    assert trace.block_hashes is not None and trace.block_offsets is not None
    offsets = trace.block_offsets.astype(np.int64)
    chain = prefix_chain_ids(trace.block_hashes, offsets)
    have = np.diff(offsets)
    inp = trace.requests["input_tokens"].to_numpy(dtype=np.int64)
    if t >= block_size:
        k = t // block_size
        n = np.minimum(inp // block_size, have * k)
        i = _ranges(n)
        src = np.repeat(offsets[:-1], n) + i // k
        ids = chain[src] * k + i % k
    else:
        m = block_size // t
        n = np.minimum(inp // block_size, have // m)
        i = _ranges(n)
        ids = chain[np.repeat(offsets[:-1], n) + i * m + m - 1]
    return ids, np.concatenate([[0], np.cumsum(n)]).astype(np.int64)


def _ranges(n: np.ndarray) -> np.ndarray:
    """``0..n[0]-1, 0..n[1]-1, ...`` concatenated."""
    total = int(n.sum())
    starts = np.repeat(np.cumsum(n) - n, n)
    return np.arange(total, dtype=np.int64) - starts


def _lru(ids: np.ndarray, offsets: np.ndarray, extra: np.ndarray, capacity: int) -> tuple[np.ndarray, int]:
    """Leading cached blocks of each request under LRU of ``capacity`` blocks, and blocks evicted.

    Relies on the cached set being prefix-closed (see the module docstring), so a request's hit is
    the number of its blocks found in the cache. The per-block work runs in C (``map`` over the
    ``OrderedDict``'s methods); Python runs once per request.
    """
    n = len(offsets) - 1
    hits = np.zeros(n, dtype=np.int64)
    od: OrderedDict[int, None] = OrderedDict()
    contains, move = od.__contains__, od.move_to_end
    evicted, uid = 0, -1
    off = offsets.tolist()
    extra_l = extra.tolist()
    for c0 in range(0, n, CHUNK_REQUESTS):
        c1 = min(n, c0 + CHUNK_REQUESTS)
        base = off[c0]
        chunk = ids[base : off[c1]].tolist()
        out_hits = []
        for r in range(c0, c1):
            blocks = chunk[off[r] - base : off[r + 1] - base]
            hit = sum(map(contains, blocks)) if od else 0
            out_hits.append(hit)
            if extra_l[r]:
                od.update(dict.fromkeys(range(uid, uid - extra_l[r], -1)))
                uid -= extra_l[r]
            if hit < len(blocks):
                od.update(dict.fromkeys(blocks[hit:][::-1]))
            if hit:
                deque(map(move, blocks[hit - 1 :: -1]), 0)
            over = len(od) - capacity
            if over > 0:
                deque(starmap(od.popitem, repeat((False,), over)), 0)
                evicted += over
        hits[c0:c1] = out_hits
    return hits, evicted


def simulate_prefix_cache(
    trace: Trace, capacity_tokens: int, block_size: int, *, include_output: bool = True
) -> CacheRun:
    """Simulate an LRU prefix cache of ``capacity_tokens`` at ``block_size`` over ``trace`` (arrival order).

    Returns the summary (finite and unbounded hit rates) and per-request hit tokens. Raises
    ``ValueError`` when the trace has no block hashes or the block sizes do not divide.
    """
    if capacity_tokens < 0:
        raise ValueError(f"capacity must be non-negative, got {capacity_tokens}")
    ids, offsets = engine_blocks(trace, block_size)
    inp = trace.requests["input_tokens"].to_numpy(dtype=np.int64)
    out = trace.requests["output_tokens"].to_numpy(dtype=np.int64)
    most = np.maximum(inp - 1, 0) // block_size  # whole blocks a hit may cover
    extra = (inp + out) // block_size - inp // block_size if include_output else np.zeros_like(inp)
    capacity = capacity_tokens // block_size
    hits, evicted = _lru(ids, offsets, extra, capacity) if capacity > 0 else (np.zeros(len(inp), np.int64), 0)
    seen = pd.Series(ids).duplicated(keep="first").to_numpy()
    req = np.repeat(np.arange(len(inp), dtype=np.int64), np.diff(offsets))
    unbounded = np.bincount(req, weights=seen, minlength=len(inp)).astype(np.int64)
    hit_tok = np.minimum(hits, most) * block_size
    unb_tok = np.minimum(unbounded, most) * block_size
    prompt = int(inp.sum())
    summary = CacheSimulation(
        block_size=block_size,
        capacity_tokens=int(capacity_tokens),
        capacity_blocks=int(capacity),
        requests=len(inp),
        prompt_tokens=prompt,
        hit_tokens=int(hit_tok.sum()),
        hit_rate=float(hit_tok.sum() / prompt) if prompt else 0.0,
        unbounded_hit_tokens=int(unb_tok.sum()),
        unbounded_hit_rate=float(unb_tok.sum() / prompt) if prompt else 0.0,
        evicted_blocks=int(evicted),
        include_output=include_output,
    )
    return CacheRun(summary, hit_tok, unb_tok)
