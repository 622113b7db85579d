"""Block-level prefix reuse of a trace, as a paged KV cache with prefix caching would see it.

Model (documented in the profile):

- a prompt is cut into blocks of ``block_size`` tokens; only full blocks are cached;
- a block is *reusable* when an earlier request (by start time) had the same chain of block hashes
  up to and including it — same content at the same position after the same prefix;
- the cache is unbounded (nothing is evicted), so the ratio is an upper bound of what a real cache
  of finite size serves.

Attribution of reusable blocks to *system prompt* vs *multi-turn history*:

- ``marked``: the trace says how many leading tokens are a system prompt (``system_tokens``: the
  leading system messages of OpenAI logs, the synthetic system prompt); a reusable block starting
  inside them is system prompt, any other reusable block is history (earlier turns);
- ``structure`` (traces with only hashes, e.g. Mooncake): build the trie of all prompts' block
  chains (full blocks only). A node whose subtree branches — requests that share it go on with
  different content — is a *shared prefix* (system-prompt-like); a node on an unbranched path is
  the continuation of one conversation (each turn extends the previous prompt), counted as
  history. A single conversation with a system prompt cannot be told apart and counts as history.

Everything is vectorised: one pass per block position, each a numpy/pandas step over all requests.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from helpers.workload.traces import Trace

ATTRIBUTION_RULES = {
    "marked": "reusable blocks that start inside the request's leading system-prompt tokens count as "
    "system prompt; other reusable blocks count as multi-turn history",
    "structure": "reusable blocks whose hash chain later branches (requests sharing it continue with "
    "different content) count as shared system prompt; reusable blocks on an unbranched chain "
    "(a conversation continuing its earlier turns) count as multi-turn history",
}


@dataclass
class BlockReuse:
    """Per full block (flat, request-major): request index, position, reusable, system-prompt flag."""

    block_size: int
    request: np.ndarray
    position: np.ndarray
    hit: np.ndarray
    system: np.ndarray
    chain: np.ndarray
    attribution: str

    def hit_tokens_per_request(self, n: int) -> np.ndarray:
        """Reusable prompt tokens of each of the ``n`` requests."""
        return np.bincount(self.request, weights=self.hit, minlength=n) * self.block_size

    def system_tokens_per_request(self, n: int) -> np.ndarray:
        """Reusable tokens of each request attributed to a shared system prompt."""
        return np.bincount(self.request, weights=self.hit & self.system, minlength=n) * self.block_size


def _full_blocks(trace: Trace) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Hash, request index and position of every full block (partial last blocks are not cached)."""
    values, offsets = trace.block_hashes, trace.block_offsets
    assert values is not None and offsets is not None and trace.block_size
    lengths = np.diff(offsets)
    n = len(lengths)
    req = np.repeat(np.arange(n, dtype=np.int64), lengths)
    pos = np.arange(len(values), dtype=np.int64) - np.repeat(offsets[:-1], lengths)
    full = trace.requests["input_tokens"].to_numpy(dtype=np.int64) // trace.block_size
    keep = pos < np.repeat(full, lengths)
    return values[keep], req[keep], pos[keep]


def analyse_blocks(trace: Trace) -> BlockReuse | None:
    """Reuse of every full block of ``trace``; None when the trace has no block hashes."""
    if not trace.has_blocks or not trace.block_size:
        return None
    values, req, pos = _full_blocks(trace)
    nb = len(values)
    hcode = pd.factorize(values)[0].astype(np.int64)
    n_hash = int(hcode.max()) + 1 if nb else 1
    counts = np.bincount(pos) if nb else np.zeros(0, np.int64)
    small = pos.astype(np.int16) if len(counts) < 2**15 else pos
    order = np.argsort(small, kind="stable")  # by position, request order kept inside a position
    chain = np.empty(nb, dtype=np.int64)
    hit = np.zeros(nb, dtype=bool)
    parents: list[np.ndarray] = []  # per position: parent node of each node
    n_nodes: list[int] = []
    start = 0
    for p, c in enumerate(counts):
        idx = order[start : start + c]
        start += c
        key = hcode[idx] if p == 0 else chain[idx - 1] * n_hash + hcode[idx]
        codes, uniq = pd.factorize(key)
        codes = codes.astype(np.int64)
        chain[idx] = codes
        seen = np.maximum.accumulate(np.concatenate([[-1], codes[:-1]]))
        hit[idx] = codes <= seen  # codes are numbered by first appearance
        n_nodes.append(len(uniq))
        parents.append(np.asarray(uniq, dtype=np.int64) // n_hash if p else np.zeros(0, np.int64))
    if "system_tokens" in trace.requests:
        sys_tok = trace.requests["system_tokens"].to_numpy(dtype=np.int64)
        system = pos * trace.block_size < sys_tok[req]
        attribution = "marked"
    else:
        branch = _branching(parents, n_nodes)
        system = np.zeros(nb, dtype=bool)
        start = 0
        for p, c in enumerate(counts):
            idx = order[start : start + c]
            start += c
            system[idx] = branch[p][chain[idx]]
        attribution = "structure"
    return BlockReuse(trace.block_size, req, pos, hit, system, chain, attribution)


def _branching(parents: list[np.ndarray], n_nodes: list[int]) -> list[np.ndarray]:
    """Per position: whether each trie node has a node with two or more children in its subtree."""
    depth = len(n_nodes)
    out: list[np.ndarray] = [np.zeros(0, dtype=bool)] * depth
    below = np.zeros(0, dtype=bool)
    for p in range(depth - 1, -1, -1):
        if p + 1 < depth:
            par = parents[p + 1]
            children = np.bincount(par, minlength=n_nodes[p])
            from_below = np.bincount(par, weights=below, minlength=n_nodes[p]) > 0
            below = (children >= 2) | from_below
        else:
            below = np.zeros(n_nodes[p], dtype=bool)
        out[p] = below
    return out
