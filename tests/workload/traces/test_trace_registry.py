"""The trace registry, format detection and the errors every reader shares."""

import os
from pathlib import Path

import pytest

from helpers.core.errors import TraceError
from helpers.core.paths import REPO_ROOT
from helpers.workload.traces import detect_format, load_trace, trace_formats

FIX = Path(__file__).resolve().parents[2] / "fixtures" / "traces"


def test_registry_discovers_every_format_module():
    assert {"csv", "mooncake", "openai-log"} <= set(trace_formats())


@pytest.mark.parametrize(
    ("name", "fmt"),
    [
        ("azure_small.csv", "csv"),
        ("mooncake_small.jsonl", "mooncake"),
        ("openai_chat.jsonl", "openai-log"),
        ("openai_usage.jsonl", "openai-log"),
    ],
)
def test_detects_format(name, fmt):
    assert detect_format(FIX / name) == fmt


def test_unknown_format_names_file_and_formats(tmp_path):
    p = tmp_path / "weird.txt"
    p.write_text("hello world\nmore\n")
    with pytest.raises(TraceError, match=r"weird\.txt: unknown trace format.*mooncake"):
        load_trace(p)


def test_unknown_format_name_given(tmp_path):
    with pytest.raises(TraceError, match=r"unknown trace format 'parquet'; allowed: csv"):
        load_trace(FIX / "azure_small.csv", "parquet")


@pytest.mark.parametrize("content", ["", "\n\n   \n"])
def test_empty_file_is_a_clear_error(tmp_path, content):
    p = tmp_path / "empty.jsonl"
    p.write_text(content)
    with pytest.raises(TraceError, match=r"empty\.jsonl: trace file is empty"):
        load_trace(p, "mooncake")


def test_missing_file(tmp_path):
    with pytest.raises(TraceError, match=r"nope\.csv: trace file not found"):
        load_trace(tmp_path / "nope.csv")


def test_directory_is_not_a_trace(tmp_path):
    with pytest.raises(TraceError, match="not a file"):
        load_trace(tmp_path)


def test_binary_file(tmp_path):
    p = tmp_path / "blob.bin"
    p.write_bytes(b"\x00\x01\x02garbage")
    with pytest.raises(TraceError, match=r"blob\.bin: not a text file"):
        load_trace(p)


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads files whatever their mode")
def test_unreadable_file(tmp_path):
    p = tmp_path / "secret.csv"
    p.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n1,2,3\n")
    p.chmod(0)
    try:
        with pytest.raises(TraceError, match=r"secret\.csv: cannot read trace file"):
            load_trace(p)
    finally:
        p.chmod(0o600)


def test_mixed_mooncake_and_openai_lines_name_the_line(tmp_path):
    lines = (FIX / "mooncake_small.jsonl").read_text().splitlines()
    chat = (FIX / "openai_chat.jsonl").read_text().splitlines()[0]
    p = tmp_path / "mixed.jsonl"
    p.write_text("\n".join(lines[:2] + [chat] + lines[2:]) + "\n")
    with pytest.raises(
        TraceError, match=r"mixed\.jsonl: line 3 looks like openai-log but the file is read as mooncake"
    ):
        load_trace(p)


def test_mixed_csv_with_json_line_names_the_line(tmp_path):
    p = tmp_path / "mixed.csv"
    p.write_text(
        "TIMESTAMP,ContextTokens,GeneratedTokens\n"
        "2023-11-16 18:15:46.68,374,44\n"
        '{"timestamp": 0, "input_length": 5, "output_length": 3, "hash_ids": [1]}\n'
        "2023-11-16 18:15:47.68,37,4\n"
    )
    with pytest.raises(TraceError, match=r"line 3 looks like mooncake but the file is read as csv"):
        load_trace(p)


def test_mixed_openai_log_with_csv_header(tmp_path):
    chat = (FIX / "openai_chat.jsonl").read_text().splitlines()
    p = tmp_path / "mixed.jsonl"
    p.write_text("\n".join([chat[0], "", "TIMESTAMP,ContextTokens,GeneratedTokens", chat[1]]) + "\n")
    with pytest.raises(TraceError, match=r"line 3 looks like csv"):
        load_trace(p)


@pytest.mark.parametrize("name", ["azure_small.csv", "mooncake_small.jsonl", "openai_usage.jsonl"])
def test_a_trace_inside_the_repository_is_recorded_by_its_relative_path(name):
    path = REPO_ROOT / "tests" / "fixtures" / "traces" / name
    trace = load_trace(path)
    assert trace.source == f"./tests/fixtures/traces/{name}"
    assert str(REPO_ROOT) not in trace.source
