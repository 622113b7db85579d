"""The OpenAI-style log reader: tokenizer counts, usage counts, system-prompt tokens, block hashes."""

from pathlib import Path

import numpy as np
import pytest

from helpers.core.errors import TraceError
from helpers.core.paths import MODELS_DIR
from helpers.workload.traces import load_trace

FIX = Path(__file__).resolve().parents[2] / "fixtures" / "traces"
TINY = MODELS_DIR / "tiny-llama"


def test_chat_log_counts_with_tokenizer():
    t = load_trace(FIX / "openai_chat.jsonl", model_dir=TINY, block_size=4)
    df = t.requests
    assert list(df["input_tokens"]) == [12, 12, 20]
    assert list(df["output_tokens"]) == [4, 2, 1]
    assert list(df["system_tokens"]) == [8, 8, 8]
    np.testing.assert_allclose(df["start_s"], [0, 1, 2])
    np.testing.assert_allclose(df["end_s"], [1.5, 2.0, 4.0])
    assert list(df["conversation"].fillna("")) == ["", "", "c0"]
    offs = t.block_offsets
    h = t.block_hashes
    assert list(np.diff(offs)) == [3, 3, 5]
    # Same system prompt -> same first two blocks; q2 repeats q0's user turn in its third block.
    assert list(h[0:2]) == list(h[3:5]) == list(h[6:8])
    assert h[2] == h[8] and h[5] != h[2]


def test_usage_counts_without_tokenizer():
    t = load_trace(FIX / "openai_usage.jsonl")
    assert list(t.requests["input_tokens"]) == [120, 80]
    assert list(t.requests["output_tokens"]) == [30, 10]
    assert t.requests["start_s"].tolist() == [0.0, 2.0]
    assert not t.has_blocks
    assert "no tokenizer" in t.no_reuse_reason


def test_text_only_needs_a_tokenizer():
    with pytest.raises(TraceError, match=r"openai_chat\.jsonl: line 1: no usage token counts; give a model folder"):
        load_trace(FIX / "openai_chat.jsonl")


def test_missing_tokenizer_file(tmp_path):
    with pytest.raises(TraceError, match=r"tokenizer\.json: tokenizer not found"):
        load_trace(FIX / "openai_chat.jsonl", model_dir=tmp_path)


def test_malformed_log_lines(tmp_path):
    good = (FIX / "openai_usage.jsonl").read_text().splitlines()
    p = tmp_path / "log.jsonl"
    p.write_text(
        "\n".join(
            [
                good[0],
                '{"prompt": "no time", "usage": {"prompt_tokens": 1, "completion_tokens": 1}}',
                '{"timestamp": 3, "messages": "oops"}',
                "[1, 2]",
                good[1],
            ]
        )
    )
    t = load_trace(p)
    assert len(t) == 2 and t.skipped == 3
    assert t.skipped_examples == [
        "line 2: no start time (one of start_time, timestamp, request_time, created)",
        "line 3: messages must be a list of objects",
        "line 4: not a JSON object",
    ]


def test_nested_request_response_and_prompt_text(tmp_path):
    p = tmp_path / "n.jsonl"
    p.write_text(
        '{"created": 1700000000000, "request": {"prompt": "w5 w6 w7"}, "response": {"choices": [{"text": "w8 w9"}]}}\n'
    )
    t = load_trace(p, "openai-log", model_dir=TINY, block_size=2)
    assert t.requests["input_tokens"].tolist() == [3]
    assert t.requests["output_tokens"].tolist() == [2]
    assert t.requests["system_tokens"].tolist() == [0]
    assert list(np.diff(t.block_offsets)) == [1]


def test_line_numbers_and_system_prompt_ids():
    t = load_trace(FIX / "openai_chat.jsonl", model_dir=TINY, block_size=4)
    assert list(t.requests["line"]) == [1, 2, 3]
    ids = list(t.requests["system_id"])
    assert len(set(ids)) == 1 and len(ids[0]) == 16  # the same system prompt in every line
    plain = load_trace(FIX / "openai_usage.jsonl")
    assert "system_id" not in plain.requests and list(plain.requests["line"]) == [1, 2]
