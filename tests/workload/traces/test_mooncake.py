"""The Mooncake reader: fast and line-by-line paths, block hashes reordered with their requests."""

from pathlib import Path

import numpy as np
import pytest

from helpers.core.errors import TraceError
from helpers.workload.traces import load_trace

FIX = Path(__file__).resolve().parents[2] / "fixtures" / "traces"


def _blocks(t):
    return [list(t.block_hashes[a:b]) for a, b in zip(t.block_offsets[:-1], t.block_offsets[1:], strict=True)]


def test_reads_fixture_sorted_with_hashes():
    t = load_trace(FIX / "mooncake_small.jsonl")
    assert t.block_size == 512 and t.skipped == 0
    np.testing.assert_allclose(t.requests["start_s"], [0, 1, 2, 3, 4, 5])
    assert list(t.requests["input_tokens"]) == [1536, 1300, 2048, 1024, 2560, 1536]
    assert _blocks(t) == [[1, 2, 3], [1, 2, 4], [1, 2, 3, 5], [7, 2], [1, 2, 3, 5, 6], [1, 2, 8]]


def test_malformed_lines_take_the_slow_path_and_are_reported(tmp_path):
    good = (FIX / "mooncake_small.jsonl").read_text().splitlines()
    p = tmp_path / "bad.jsonl"
    p.write_text(
        "\n".join(
            [
                good[0],
                "{not json",
                '{"timestamp": 5, "input_length": 10, "hash_ids": [1]}',
                good[1],
                '{"timestamp": 6, "input_length": -1, "output_length": 3, "hash_ids": [1]}',
                '{"timestamp": 7, "input_length": 1, "output_length": 3, "hash_ids": ["a"]}',
                good[2],
            ]
        )
        + "\n"
    )
    t = load_trace(p)
    assert len(t) == 3
    assert t.skipped == 4
    assert t.skipped_examples == [
        "line 2: not a JSON object",
        "line 3: missing output_length",
        "line 5: input_length must be a non-negative number, got -1",
        "line 6: hash_ids must be a list of integers",
    ]
    assert _blocks(t) == [[1, 2, 3], [1, 2, 4], [1, 2, 3, 5]]


def test_only_first_five_skipped_lines_are_described(tmp_path):
    good = (FIX / "mooncake_small.jsonl").read_text().splitlines()[0]
    p = tmp_path / "many.jsonl"
    p.write_text(good + "\n" + "garbage\n" * 9)
    t = load_trace(p, "mooncake")
    assert t.skipped == 9 and len(t.skipped_examples) == 5
    assert t.skipped_examples[-1] == "line 6: not a JSON object"


def test_nothing_valid(tmp_path):
    p = tmp_path / "none.jsonl"
    p.write_text('{"hash_ids": [1]}\n')
    with pytest.raises(TraceError, match=r"none\.jsonl: no valid requests \(1 lines skipped; first: line 1: missing"):
        load_trace(p)


def test_hash_ids_inconsistent_with_input_length_are_skipped_by_line(tmp_path):
    good = (FIX / "mooncake_small.jsonl").read_text().splitlines()
    p = tmp_path / "inconsistent.jsonl"
    bad = [
        '{"timestamp": 9000, "input_length": 2048, "output_length": 5, "hash_ids": [1, 2]}',
        '{"timestamp": 9001, "input_length": 100, "output_length": 5, "hash_ids": [1, 2]}',
    ]
    p.write_text("\n".join(good[:2] + bad + good[2:]) + "\n")
    t = load_trace(p)
    assert len(t) == len(good) and t.skipped == 2
    assert t.skipped_examples == [
        "line 3: 2 hash_ids for input_length 2048, which needs 4 blocks of 512 tokens",
        "line 4: 2 hash_ids for input_length 100, which needs 1 blocks of 512 tokens",
    ]
    assert _blocks(t) == _blocks(load_trace(FIX / "mooncake_small.jsonl"))
