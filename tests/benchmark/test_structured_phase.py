"""Step 5's structured replay on a fake engine: the point, its predicted vs achieved hit rate, resume, the table.

The fake engine (``tests/fakes/fake_openai_server.py``) reports per-request cached tokens of an unbounded
prefix cache of ``FAKE_CACHE_BLOCK``-word blocks, and a fixed 50% from its counters; guidellm drives it
for real, one session at a time, so its cached tokens are exactly the simulation's unbounded count.
"""

import asyncio
import json
import sys

import pytest

from helpers.benchmark.run import run_benchmarks
from helpers.benchmark.session import EngineSession
from helpers.benchmark.structured_phase import (
    measure_one,
    structured_notes,
    structured_table,
    structured_workloads,
)
from helpers.core.config import load_config, parse_config
from helpers.core.paths import REPO_ROOT
from helpers.engines import ENGINES, get_engine
from helpers.engines.vllm import VllmAdapter
from helpers.environment.records import KvPrediction, MemoryPlanRecord
from helpers.run.folder import RunFolder
from helpers.run.records import label_slug, load_point, point_path
from helpers.tools.cli import build_parser
from helpers.tools.engine_subset import select_engines

FIX = "tests/fixtures/traces"
LABEL = "fake cache"
MT = {"sessions": 3, "turns": 3, "system_prompt_tokens": 32, "user_turn_tokens": 16, "output_tokens": 4}


class FakeVllmAdapter(VllmAdapter):
    name = "fake-vllm-structured"
    module = "fake_openai_server"
    package = "fake-engine-not-installed"
    runs_on_cpu = True


@pytest.fixture(autouse=True)
def fake_engine():
    with ENGINES.temporarily(FakeVllmAdapter.name, FakeVllmAdapter()):
        yield FakeVllmAdapter.name


def config(**workload):
    engine = {
        "label": LABEL,
        "engine": FakeVllmAdapter.name,
        "launcher": {
            "kind": "python",
            "python": sys.executable,
            "pythonpath": ["tests/fakes"],
            "env": {"FAKE_CACHE_BLOCK": "16", "FAKE_TOKEN_DELAY_S": "0.001"},
        },
        "extra_args": ["--block-size", "16"],
        "startup_timeout_s": 20,
    }
    wl = {"input_tokens": 16, "output_tokens": 4, "concurrency": [2], "requests_per_point": 4}
    return parse_config(
        {
            "name": "structured",
            "model": {"path": "tiny-llama"},
            "engines": [engine],
            "workload": {**wl, **workload},
            "evidence": {"search": {"enabled": False}, "trials": {"enabled": False}},  # the replays, not evidence
        }
    )


def test_which_structured_replays_a_config_asks_for():
    trace = {"source": {"kind": "trace", "path": f"{FIX}/mooncake_blocks.jsonl"}}
    assert structured_workloads(config(**trace, replay={"requests": 3})) == []  # lengths only: measure_replay
    assert structured_workloads(config(**trace, replay={"structure": "blocks"})) == ["trace"]
    both = config(**trace, replay={"structure": "blocks"}, multi_turn=MT)
    assert structured_workloads(both) == ["trace", "multi-turn"]
    assert structured_workloads(config(multi_turn=MT)) == ["multi-turn"]


def test_block_size_from_the_log_a_flag_or_the_default():
    spec = config().engines[0]
    assert get_engine("vllm").block_size(spec) == (16, "--block-size in extra_args")
    assert get_engine("vllm-cpu").block_size(spec.model_copy(update={"extra_args": []})) == (
        128,
        "vLLM (CPU build) default",
    )
    sglang = get_engine("sglang")
    assert sglang.block_size(spec, "server_args=ServerArgs(..., page_size=1, swa_full_tokens_ratio=0.8)") == (
        1,
        "engine log",
    )
    assert sglang.block_size(spec.model_copy(update={"extra_args": ["--page-size=64"]})) == (
        64,
        "--page-size in extra_args",
    )
    assert get_engine("trtllm").block_size(spec)[0] is None


def test_vllm_benchmark_launches_report_cached_tokens_and_deployments_do_not():
    spec = config().engines[0]
    vllm = get_engine("vllm")
    bench = vllm.benchmark_spec(spec)
    assert bench.extra_args == ["--enable-prompt-tokens-details", "--block-size", "16"]
    assert bench.launcher.env["VLLM_SERVER_DEV_MODE"] == "1"
    assert spec.extra_args == ["--block-size", "16"] and "VLLM_SERVER_DEV_MODE" not in spec.launcher.env
    assert "--enable-prompt-tokens-details" not in vllm.server_args(spec, config().model, "m", "h", 1)


def test_a_stored_structured_point_is_kept_without_an_engine(tmp_path):
    cfg = config(multi_turn=MT)
    run = EngineSession(cfg.engines[0], cfg, tmp_path)
    assert run.handle is None
    path = point_path(tmp_path, LABEL, "structured", 0, "multi-turn")
    path.parent.mkdir(parents=True)
    stored = {"label": LABEL, "engine": "x", "concurrency": 1, "phase": "structured", "requests": 9,
              "duration_s": 1.0, "output_tok_s": 1.0, "total_tok_s": 1.0, "req_s": 1.0}  # fmt: skip
    path.write_text(json.dumps(stored))
    p = asyncio.run(measure_one(run, "multi-turn"))
    assert p is not None and p.requests == 9 and p.phase == "structured"


def test_multi_turn_replay_on_each_engine_predicted_beside_achieved(tmp_path):
    cfg = config(multi_turn={**MT, "sessions_in_flight": 1, "think_time_s": 0.0, "live_reply": False})
    RunFolder(tmp_path).save(MemoryPlanRecord(predictions=[KvPrediction(label=LABEL, tokens=4096, basis="test")]))
    said: list[str] = []
    (result,) = asyncio.run(run_benchmarks(cfg, tmp_path, progress=said.append))
    assert result.status == "ok", result.reason
    assert [p.phase for p in result.points] == ["sweep", "structured"]
    path = point_path(tmp_path, LABEL, "structured", 0, "multi-turn")
    p = load_point(path)
    assert p == result.points[1] and p.requests == 9 and p.errors == 0
    s = p.structure
    assert (s.workload, s.kind, s.sessions, s.requests_planned) == ("multi-turn", "sessions", 3, 9)
    assert (s.block_size, s.block_size_source) == (16, "--block-size in extra_args")
    assert (s.capacity_tokens, s.capacity_source) == (4096, "memory plan (step 4)")
    # prompts of 48, 68, 88 words a session; hits 32 (the shared system prompt; none for the first session), 48, 64
    prompt, hits = 3 * (48 + 68 + 88), 3 * (32 + 48 + 64) - 32
    assert s.predicted_unbounded == pytest.approx(hits / prompt)
    assert s.predicted_finite == pytest.approx(hits / prompt) and s.evicted_blocks == 0  # 4,096 tokens: no eviction
    assert s.usage.cached_tokens == hits and s.usage.hit_rate == pytest.approx(s.predicted_unbounded)
    assert s.usage.hit_requests == 8 and s.usage.ttft_hit_ms_p50 is not None and s.usage.ttft_miss_ms_p50 is not None
    assert p.server.prefix_cache_hit_rate == pytest.approx(0.5)  # the fake's counters
    assert "not emptied first" in s.cache_reset  # the fake has no reset route
    assert any("multi-turn replay" in m and "predicted 65.4%" in m for m in said), said

    row = structured_table([result]).iloc[0]
    assert row["engine config"] == LABEL and row["requests"] == "9 of 9"
    assert row["predicted, unbounded"] == row["predicted, finite (LRU at KV capacity)"] == "65.4%"
    assert row["achieved (server counters)"] == "50.0%" and row["achieved (per-request cached_tokens)"] == "65.4%"
    assert row["achieved − predicted finite (pp)"] == "-15.4"
    assert row["KV capacity tokens"] == "4,096 (memory plan (step 4))"
    assert row["TTFT p50 ms hit / miss"].count("/") == 1 and "–" not in row["TTFT p50 ms hit / miss"]
    notes = structured_notes([result])
    assert notes[0].startswith("multi-turn replay: synthetic sessions: 3 of 3 turns, 32-token shared system prompt")
    assert any(n.startswith(f"{LABEL}, multi-turn: LRU prefix cache") for n in notes)

    # resume: the engine result is gone (an interrupted run), the structured point is kept, not re-measured
    before = path.stat().st_mtime_ns
    (tmp_path / "engines" / f"{label_slug(LABEL)}.json").unlink()
    said.clear()
    (again,) = asyncio.run(run_benchmarks(cfg, tmp_path, progress=said.append))
    assert path.stat().st_mtime_ns == before and again.points[1] == p
    assert any("multi-turn replay already measured, kept" in m for m in said), said


def test_the_h200_multi_turn_config_validates_and_runs_one_engine_at_a_time():
    path = REPO_ROOT / "playbook" / "workloads" / "h200-offline" / "multiturn-8b.yaml"
    cfg = load_config(path)
    mt = cfg.workload.multi_turn
    assert (mt.sessions, mt.turns, mt.system_prompt_tokens, mt.user_turn_tokens, mt.output_tokens) == (
        64, 5, 1000, 150, 128,
    )  # fmt: skip
    assert mt.shared_system_prompt and mt.sessions_in_flight == 32 and not cfg.evidence.search.enabled
    assert structured_workloads(cfg) == ["multi-turn"]
    on_off = [("vllm", True), ("vllm", False), ("sglang", True), ("sglang", False)]  # both, cache on and off
    assert [(e.engine, e.knobs.prefix_caching) for e in cfg.engines] == on_off
    longest = mt.system_prompt_tokens + mt.turns * mt.user_turn_tokens + (mt.turns - 1) * mt.output_tokens
    assert all(longest + mt.output_tokens <= e.knobs.max_model_len for e in cfg.engines)
    for e in cfg.engines:  # playbook run CONFIG --engines LABEL
        assert [x.label for x in select_engines(cfg, [e.label]).engines] == [e.label]
        assert build_parser().parse_args(["run", str(path), "--engines", e.label]).engines == [e.label]


def test_a_multi_turn_workload_is_searched_on_its_sessions_not_on_plain_prompts(tmp_path, monkeypatch):
    """Issue 32: every capacity probe replays the sessions (history in each turn), at ``load`` sessions at once."""
    monkeypatch.setenv("PLAYBOOK_GUIDELLM_WORKERS", "1")
    capture = tmp_path / "sent.jsonl"
    cfg = config(multi_turn=MT)
    cfg.engines[0].launcher.env["FAKE_CAPTURE_FILE"] = str(capture)
    search = {"axis": "concurrency", "start": 2, "max_probes": 2, "growth": 2, "probe_seconds": 1}
    cfg.evidence = cfg.evidence.model_validate(
        {"search": {**search, "edge_rounds_min": 0, "edge_rounds_max": 0}, "trials": {"enabled": False}}
    )
    (result,) = asyncio.run(run_benchmarks(cfg, tmp_path / "run"))
    assert result.status == "ok", result.reason
    probes = [p for p in result.points if p.phase == "search"]
    assert probes and all(p.requests == MT["sessions"] * MT["turns"] for p in probes)  # the whole replay each time
    sent = [json.loads(line)["prompt"] for line in capture.read_text().splitlines()]
    # each probe sends the sessions' turns: a later turn's prompt holds the earlier turn (its history)
    history = sum(1 for a in sent for b in sent if len(b) > len(a) and b.startswith(a))  # b continues a's session
    assert history >= len(probes) * MT["sessions"] * (MT["turns"] - 1)
    assert [p.concurrency for p in probes][:1] == [2]
