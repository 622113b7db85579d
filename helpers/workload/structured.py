"""Replays that keep the structure of real traffic: shared token blocks and sessions with history.

Two datasets, both written for guidellm and run by ``helpers.workload.replay_run``:

- **blocks** (``write_block_dataset``): each request of a trace with block hashes (Mooncake's
  ``hash_ids``, or the text-block hashes of an OpenAI log) becomes a Mooncake row that guidellm's own
  ``mooncake`` deserializer turns into a prompt: equal ids give identical token blocks, different ids
  different ones, at the trace's block size. The ids written are hash-of-prefix ids
  (``cache_sim.prefix_chain_ids``), as that deserializer expects; a partial last block gets an id of
  its own per (prefix, length), so every prompt has exactly its traced length.
- **sessions** (``write_session_dataset``): each session of a ``SessionPlan`` becomes one guidellm
  conversation graph (a ``conversation_turns`` row of guidellm's own ``ConversationGraphData``), its
  turns in order with the recorded think time as guidellm's idle gap (``time_scale`` scales it). Each
  prompt is the history plus the new turn: with ``live_reply`` guidellm threads the engine's reply
  into the next turn (history ``full``); without, the prompt carries the history itself with a
  stand-in reply of the recorded length. With ``lanes`` (``sessions_in_flight``), sessions are chained
  so that that many run at once and the next starts when one ends.

Prompts are words of the model folder's tokenizer, so lengths are exact. Each dataset keeps, as a
``Trace`` with block hashes, what it replays, so ``simulate_prefix_cache`` predicts the hit rate of
exactly that replay (``predict_cache``). ``replay_dataset`` and ``multi_turn_dataset`` write the ones a
config asks for.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pandas as pd

from helpers.core.config import PlaybookConfig
from helpers.core.paths import resolve_repo_path
from helpers.measure.prompts import word_id_range
from helpers.workload.cache_sim import CacheSimulation, prefix_chain_ids, simulate_prefix_cache
from helpers.workload.levels import CPU_MAX_OUTPUT_TOKENS, on_cpu
from helpers.workload.sessions import Session, SessionPlan, plan_from_trace, plan_synthetic
from helpers.workload.traces import load_trace
from helpers.workload.traces.base import Trace, finish_trace

CONTEXT_ROOM_TOKENS = 256
"""Room left for the output under the model's context when outputs are not capped."""


@dataclass
class ReplayDataset:
    """A structured replay written for guidellm: its ``--data`` entry, what it holds, what was left out."""

    path: Path
    kind: Literal["blocks", "sessions"]
    data: dict[str, Any]
    requests: int
    sessions: int
    trace: Trace
    live_reply: bool = False
    skipped: int = 0
    skipped_examples: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def write_block_dataset(
    trace: Trace,
    path: Path,
    *,
    requests: int | None = None,
    start_s: float = 0.0,
    max_input_tokens: int | None = None,
    max_output_tokens: int | None = None,
) -> ReplayDataset:
    """Write the window of ``trace`` (``requests`` from ``start_s`` on) as guidellm Mooncake rows.

    A prompt longer than ``max_input_tokens`` keeps its leading blocks (so its prefix sharing stays);
    outputs are capped at ``max_output_tokens``. Raises ``ValueError`` when the trace has no block
    hashes or the window is empty.
    """
    if not trace.has_blocks or not trace.block_size:
        raise ValueError(f"the {trace.format} trace has no block hashes to replay blocks from")
    assert trace.block_hashes is not None and trace.block_offsets is not None
    bs = int(trace.block_size)
    chain = prefix_chain_ids(trace.block_hashes, trace.block_offsets)
    df = trace.requests
    rows = np.flatnonzero(df["start_s"].to_numpy(dtype=float) >= start_s)[: requests if requests else None]
    if not len(rows):
        raise ValueError(f"no requests of the trace start at or after {start_s:g} s")
    next_id = int(chain.max()) + 1 if len(chain) else 0
    partial: dict[tuple[int, int], int] = {}
    t0 = float(df["start_s"].iloc[rows[0]])
    written: list[dict[str, Any]] = []
    cut = 0
    for i in rows:
        n_in = int(df["input_tokens"].iloc[i])
        if max_input_tokens is not None and n_in > max_input_tokens:
            n_in, cut = max_input_tokens, cut + 1
        ids = chain[trace.block_offsets[i] : trace.block_offsets[i + 1]].tolist()[: -(-n_in // bs)]
        while len(ids) < -(-n_in // bs):  # text-hashed traces hash full blocks only
            ids.append(next_id)
            next_id += 1
        if n_in % bs:  # a partial block: its own id per (prefix, length), so its length is exact
            key = (ids[-1], n_in % bs)
            if key not in partial:
                partial[key], next_id = next_id, next_id + 1
            ids[-1] = partial[key]
        n_out = int(df["output_tokens"].iloc[i])
        n_out = max(1, min(n_out, max_output_tokens) if max_output_tokens else n_out)
        ts = round(float(df["start_s"].iloc[i]) - t0, 6)
        written.append({"timestamp": ts, "input_length": n_in, "output_length": n_out, "hash_ids": ids})
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in written), encoding="utf-8")
    notes = list(trace.notes)
    if cut:
        notes.append(f"{cut} prompts longer than {max_input_tokens} tokens replayed as their leading blocks")
    frame = pd.DataFrame(
        {
            "start_s": [r["timestamp"] for r in written],
            "end_s": np.nan,
            "input_tokens": [r["input_length"] for r in written],
            "output_tokens": [r["output_length"] for r in written],
        }
    )
    replayed = finish_trace(
        path, "mooncake", frame, hashes=[np.asarray(r["hash_ids"], np.int64) for r in written], block_size=bs
    )
    data = {"kind": "mooncake", "source": {"kind": "json_file", "path": str(path)}, "hash_id_block_size": bs}
    return ReplayDataset(
        path, "blocks", data, len(written), 0, replayed, False, trace.skipped, list(trace.skipped_examples), notes
    )


class _Words:
    """Seeded words of the model's tokenizer, one list per key, so equal keys give equal text."""

    def __init__(self, model_dir: Path, seed: int):
        self.ids, self.seed = word_id_range(model_dir), seed

    def __call__(self, key: str, n: int) -> list[str]:
        rng = random.Random(f"{self.seed}-{key}")
        return [f"w{rng.randrange(*self.ids)}" for _ in range(n)]


def _session_turns(s: Session, words: _Words, live_reply: bool) -> list[str]:
    """The text guidellm sends for each turn (live: the new part only; else the whole history)."""
    group = s.system_group or f"session-{s.id}"
    history: list[str] = []
    texts = []
    for k, t in enumerate(s.turns):
        new = words(f"system-{group}", s.system_tokens) if k == 0 else []
        new += words(f"user-{s.id}-{k}", t.new_tokens - (s.system_tokens if k == 0 else 0))
        history += new
        texts.append(" ".join(new if live_reply else history))
        history += words(f"reply-{s.id}-{k}", t.output_tokens)
    return texts


def _lanes(plan: SessionPlan) -> list[list[int]]:
    """Sessions per conversation graph: one each, or chained round-robin into ``plan.lanes`` lanes."""
    n = len(plan.sessions)
    if not plan.lanes:
        return [[i] for i in range(n)]
    lanes = min(plan.lanes, n)
    return [list(range(j, n, lanes)) for j in range(lanes)]


def write_session_dataset(
    plan: SessionPlan, model_dir: Path, path: Path, *, live_reply: bool = False, seed: int = 0, block_size: int = 16
) -> ReplayDataset:
    """Write ``plan`` as guidellm conversation graphs (JSONL of ``conversation_turns``) at ``path``.

    ``block_size`` is the block size of the kept ``trace`` (for the cache prediction). Raises
    ``ValueError`` when the plan has no turns.
    """
    from guidellm.data.schemas.conversation_graph_data import (  # guidellm imports take seconds; only replays use it
        ConversationGraphData,
        ConversationParentRef,
        ConversationTurnData,
    )

    if not plan.turns:
        raise ValueError("no session turns to replay" + (f" ({plan.skipped_examples[0]})" if plan.skipped else ""))
    words = _Words(Path(model_dir), seed)
    t0 = min(s.turns[0].start_s for s in plan.sessions)
    rows, pred_rows, pred_hashes = [], [], []
    for lane in _lanes(plan):
        turns, parent, clock = [], None, None
        for i in lane:
            s = plan.sessions[i]
            base = (s.turns[0].start_s - t0) if clock is None or not plan.lanes else clock
            for k, (t, text) in enumerate(zip(s.turns, _session_turns(s, words, live_reply), strict=True)):
                node = f"s{i}_t{k}"
                ts = base + t.start_s - s.turns[0].start_s
                ctx = "full" if (k and live_reply) else "new"
                columns = {
                    "text_column": [text],
                    "prompt_tokens_count_column": [len(text.split())],
                    "output_tokens_count_column": [t.output_tokens],
                    "relative_timestamp_column": [ts],
                    "request_duration_column": [t.duration_s],
                }
                refs = [ConversationParentRef(parent_node_id=parent, history_context=ctx)] if parent else []
                turns.append(ConversationTurnData(node_id=node, parents=refs, columns=columns))
                parent, clock = node, ts + t.duration_s
                pred_rows.append((ts, t.prompt_tokens, t.output_tokens))
                pred_hashes.append(_block_keys(s, t.prompt_tokens, block_size))
            if not plan.lanes:
                parent, clock = None, None
        graph = ConversationGraphData(turns=turns)
        rows.append(json.dumps({"conversation_turns": graph.model_dump_json()}))
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(r + "\n" for r in rows), encoding="utf-8")
    frame = pd.DataFrame(pred_rows, columns=["start_s", "input_tokens", "output_tokens"])
    frame["end_s"] = np.nan
    codes = pd.factorize(pd.Series([k for keys in pred_hashes for k in keys], dtype=object))[0]
    lengths = np.cumsum([0] + [len(k) for k in pred_hashes])
    hashes = [codes[a:b].astype(np.int64) for a, b in zip(lengths[:-1], lengths[1:], strict=True)]
    trace = finish_trace(path, "sessions", frame, hashes=hashes, block_size=block_size)
    data = {"kind": "json_file", "path": str(path)}
    notes = list(plan.notes) + ([] if live_reply else ["history replies are stand-ins of the recorded length"])
    return ReplayDataset(
        path, "sessions", data, plan.turns, len(plan.sessions), trace, live_reply, plan.skipped,
        list(plan.skipped_examples), notes,
    )  # fmt: skip


def _block_keys(s: Session, prompt_tokens: int, block_size: int) -> list[str]:
    """Block identities of one turn's prompt: system-prompt blocks shared by its group, the rest the session's."""
    group = s.system_group or f"session-{s.id}"
    shared = s.system_tokens // block_size
    return [f"g{group}/{j}" if j < shared else f"s{s.id}/{j}" for j in range(-(-prompt_tokens // block_size))]


def predict_cache(dataset: ReplayDataset, capacity_tokens: int, block_size: int) -> CacheSimulation | None:
    """The finite-cache prediction of exactly this replay at the engine's KV capacity and block size.

    None when the block sizes do not divide one another.
    """
    try:
        return simulate_prefix_cache(dataset.trace, capacity_tokens, block_size).summary
    except ValueError:
        return None


def _limits(cfg: PlaybookConfig) -> tuple[int, int | None]:
    """Longest prompt and output a replay sends: the model's context less room for the output; CPU caps outputs."""
    context = min(
        [e.knobs.max_model_len for e in cfg.engines if e.knobs.max_model_len]
        or [int(json.loads((cfg.model.directory / "config.json").read_text())["max_position_embeddings"])]
    )
    cap_out = CPU_MAX_OUTPUT_TOKENS if (cfg.workload.cpu_scale_down and on_cpu(cfg)) else None
    return context - (cap_out or CONTEXT_ROOM_TOKENS), cap_out


def replay_dataset(cfg: PlaybookConfig, run_dir: Path, block_size: int | None = None) -> ReplayDataset | None:
    """The structured trace replay ``workload.replay.structure`` asks for, written into ``run_dir/data``.

    None for a lengths-only replay (``run_replay`` does that one). Prompts are capped by
    ``replay.max_input_tokens``, else by the model's context. ``block_size``: that of the kept trace of a
    session replay (the engine's, for its prediction); default ``workload.source.block_size``.
    """
    rp, src = cfg.workload.replay, cfg.workload.source
    if rp is None or rp.structure == "lengths" or src.path is None:
        return None
    trace = load_trace(
        resolve_repo_path(src.path), src.format, model_dir=cfg.model.directory, block_size=src.block_size
    )
    max_in, cap_out = _limits(cfg)
    max_in = rp.max_input_tokens or max_in
    data = Path(run_dir) / "data"
    if rp.structure == "blocks":
        return write_block_dataset(
            trace, data / "replay-blocks.jsonl", requests=rp.requests, start_s=rp.start_s,
            max_input_tokens=max_in, max_output_tokens=cap_out,
        )  # fmt: skip
    plan = plan_from_trace(trace, requests=rp.requests, start_s=rp.start_s, max_prompt_tokens=max_in)
    return write_session_dataset(
        plan, cfg.model.directory, data / "replay-sessions.jsonl", live_reply=rp.live_reply,
        block_size=block_size or src.block_size,
    )  # fmt: skip


def multi_turn_dataset(cfg: PlaybookConfig, run_dir: Path, block_size: int | None = None) -> ReplayDataset | None:
    """The synthetic multi-turn workload of ``workload.multi_turn``, written into ``run_dir/data``; None without one.

    ``block_size``: that of the kept trace (the engine's, for its prediction); default ``workload.source.block_size``.
    """
    mt = cfg.workload.multi_turn
    if mt is None:
        return None
    path = Path(run_dir) / "data" / "multi-turn.jsonl"
    return write_session_dataset(
        plan_synthetic(mt),
        cfg.model.directory,
        path,
        live_reply=mt.live_reply,
        block_size=block_size or cfg.workload.source.block_size,
    )
