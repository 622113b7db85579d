"""Structured replays against the fake engine: the prompts it receives share exactly the traced blocks and history.

The fake engine writes every prompt it gets to ``FAKE_CAPTURE_FILE`` and, with ``FAKE_CACHE_BLOCK``,
reports the cached tokens of an unbounded prefix cache, as vLLM does with
``--enable-prompt-tokens-details``.
"""

import asyncio
import json
from pathlib import Path

from fakes.fake_process import fake_server

from helpers.core.config import MultiTurn
from helpers.core.paths import MODELS_DIR
from helpers.workload.cache_sim import simulate_prefix_cache
from helpers.workload.replay_run import run_structured_replay
from helpers.workload.sessions import plan_from_trace, plan_synthetic
from helpers.workload.structured import write_block_dataset, write_session_dataset
from helpers.workload.traces import load_trace

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "traces"
MODEL = MODELS_DIR / "tiny-llama"
B = 512


def replay(tmp_path: Path, dataset, cache_block: int = 16, **kw):
    cap = tmp_path / "capture.jsonl"
    env = {"FAKE_CAPTURE_FILE": str(cap), "FAKE_CACHE_BLOCK": str(cache_block), "FAKE_TOKEN_DELAY_S": "0.001"}
    with fake_server(tmp_path, env) as url:
        res = asyncio.run(run_structured_replay(url, "tiny-llama", MODEL, dataset, max_seconds=60, **kw))
    got = [json.loads(line) for line in cap.read_text().splitlines()]
    return res, sorted(got, key=lambda r: r["t"])


def test_mooncake_blocks_replay_as_identical_and_distinct_token_blocks(tmp_path):
    trace = load_trace(FIX / "mooncake_blocks.jsonl")
    ds = write_block_dataset(trace, tmp_path / "blocks.jsonl")
    assert ds.requests == 5 and ds.skipped == 1
    assert ds.skipped_examples == ["line 5: 2 hash_ids for input_length 2048, which needs 4 blocks of 512 tokens"]
    res, got = replay(tmp_path, ds, concurrency=1)  # one at a time, in trace order, for the cache counts
    p = sorted((r["prompt"].split() for r in got), key=len)  # the engine may see them out of order: by length
    assert [len(x) for x in p] == [700, 1024, 1024, 1300, 1536]  # exact traced lengths
    d, p1, p6, p2, p4 = ([tuple(x[j : j + B]) for j in range(0, len(x), B)] for x in p)
    a, b = p1
    assert p6 == [a, b]  # hash ids [10, 11] again: the same prompt
    assert p2[:2] == [a, b] and p2[2] not in (a, b)  # [10, 11, 12] extends it
    assert p4[0] == a and p4[1] != b  # [10, 13, 14]: same first block, then different
    assert not {a, b} & set(d)  # [20, 21] shares nothing
    # The engine's cached tokens (unbounded, 16-token blocks) are what the simulation predicts.
    assert res.load.requests == 5 and res.load.errors == 0
    assert res.cache.reporting == 5 and res.cache.cached_tokens == 1024 + 512 + 1008
    sim = simulate_prefix_cache(ds.trace, capacity_tokens=10**6, block_size=16, include_output=False)
    assert sim.summary.hit_tokens == res.cache.cached_tokens
    assert res.cache.hit_requests == 3 and res.cache.ttft_hit_ms_p50 is not None


def test_openai_log_sessions_replay_with_growing_history(tmp_path):
    plan = plan_from_trace(load_trace(FIX / "openai_sessions.jsonl", "openai-log"))
    ds = write_session_dataset(plan, MODEL, tmp_path / "sessions.jsonl", block_size=4)
    assert (ds.requests, ds.sessions, ds.skipped) == (6, 2, 2)
    res, got = replay(tmp_path, ds, cache_block=4, time_scale=0.2)
    assert res.load.requests == 6 and res.load.errors == 0
    by_len = {len(r["prompt"].split()): r for r in got}
    assert sorted(by_len) == [20, 30, 35, 40, 50] and len(got) == 6  # two first turns of 20
    firsts = [r for r in got if len(r["prompt"].split()) == 20]
    a0 = next(r for r in firsts if by_len[35]["prompt"].startswith(r["prompt"]))
    b0 = next(r for r in firsts if r is not a0)
    a = [a0, by_len[35], by_len[50]]
    b = [b0, by_len[30], by_len[40]]
    for turns in (a, b):
        words = [t["prompt"].split() for t in turns]
        assert words[1][: len(words[0])] == words[0] and words[2][: len(words[1])] == words[1]  # history grows
        assert turns[0]["t"] < turns[1]["t"] < turns[2]["t"]  # in order, each after the previous reply
        assert turns[1]["t"] - turns[0]["t"] >= 0.15  # 1 s recorded pause after a 1 s turn, scaled by 0.2
    assert a0["prompt"].split()[:5] != b0["prompt"].split()[:5]
    # a1 = a0 + a stand-in of the 5-token reply + 10 new words; the engine served the 20-word history
    by_prompt = {r.prompt_tokens: r for r in res.requests}
    assert by_prompt[35].cached_tokens == 20 and by_prompt[50].cached_tokens == 32


def test_live_reply_is_threaded_into_the_next_turn(tmp_path):
    mt = MultiTurn(sessions=3, turns=2, system_prompt_tokens=8, user_turn_tokens=4, output_tokens=3)
    mt.think_time_s, mt.sessions_in_flight = 0.05, 2
    ds = write_session_dataset(plan_synthetic(mt), MODEL, tmp_path / "mt.jsonl", live_reply=True)
    assert ds.requests == 6 and ds.sessions == 3
    res, got = replay(tmp_path, ds, cache_block=4)
    assert res.load.requests == 6 and res.load.errors == 0
    p = [r["prompt"].split() for r in got]
    firsts = [x for x in p if len(x) == 12]
    seconds = [x for x in p if len(x) == 19]  # 12 + the live 3-word reply + 4 new words
    assert len(firsts) == 3 and len(seconds) == 3
    assert len({tuple(x[:8]) for x in firsts}) == 1  # one shared system prompt
    assert len({tuple(x[8:]) for x in firsts}) == 3  # different first messages
    for s in seconds:
        assert s[12:15] == ["w3", "w4", "w5"]  # the fake engine's reply, threaded live
        assert s[:12] in firsts
    # sessions_in_flight=2: the third session starts after one of the first two has ended
    starts = sorted(r["t"] for r in got if len(r["prompt"].split()) == 12)
    ends = sorted(r["t"] for r in got if len(r["prompt"].split()) == 19)
    assert starts[2] > ends[0]
