"""The CSV reader: Azure-style traces, column aliases, end times and malformed rows."""

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from helpers.core.errors import TraceError
from helpers.workload.traces import load_trace

FIX = Path(__file__).resolve().parents[2] / "fixtures" / "traces"
AZURE = Path("/work/shared/data/azure-llm-inference-trace-2023-conv.csv")


def test_reads_azure_fixture_sorted_and_relative():
    t = load_trace(FIX / "azure_small.csv")
    df = t.requests
    assert list(df["input_tokens"]) == [374, 396, 879, 91]
    assert list(df["output_tokens"]) == [44, 109, 55, 16]
    assert df["start_s"].iloc[0] == 0.0
    assert df["start_s"].iloc[1] == pytest.approx(4.314579, abs=1e-6)
    assert df["end_s"].isna().all()
    assert not t.has_blocks and t.no_reuse_reason


@pytest.mark.skipif(not AZURE.is_file(), reason="shared Azure trace not present")
def test_full_azure_trace_matches_pandas():
    t = load_trace(AZURE)
    ref = pd.read_csv(AZURE)
    assert len(t) == len(ref) == 19366
    assert t.skipped == 0
    assert sorted(t.requests["input_tokens"]) == sorted(ref["ContextTokens"])
    ts = pd.to_datetime(ref["TIMESTAMP"])
    span = (ts.max() - ts.min()).total_seconds()
    assert t.requests["start_s"].max() == pytest.approx(span, abs=1e-3)


def test_aliases_numeric_times_and_latency(tmp_path):
    p = tmp_path / "t.csv"
    p.write_text("arrival_time,prompt_tokens,completion_tokens,latency_ms\n10.5,100,20,2000\n10.0,50,5,500\n")
    df = load_trace(p).requests
    assert list(df["input_tokens"]) == [50, 100]
    np.testing.assert_allclose(df["start_s"], [0.0, 0.5])
    np.testing.assert_allclose(df["end_s"], [0.5, 2.5])


def test_malformed_rows_skipped_counted_and_located(tmp_path):
    p = tmp_path / "bad.csv"
    p.write_text(
        "TIMESTAMP,ContextTokens,GeneratedTokens\n"
        "2023-11-16 18:15:46.68,374,44\n"
        "2023-11-16 18:15:47.00,abc,44\n"
        "2023-11-16 18:15:48.00,12\n"
        "not-a-time,5,5\n"
        "2023-11-16 18:15:49.00,-3,5\n"
        "2023-11-16 18:15:50.00,10,7\n"
    )
    t = load_trace(p)
    assert len(t) == 2
    assert t.skipped == 4
    assert t.skipped_examples[0].startswith("line 4: expected 3 fields")
    assert [e.split(":")[0] for e in t.skipped_examples] == ["line 4", "line 3", "line 5", "line 6"]


def test_header_without_token_columns(tmp_path):
    p = tmp_path / "h.csv"
    p.write_text("timestamp,prompt_tokens\n1,2\n")
    with pytest.raises(TraceError, match=r"h\.csv: line 1: CSV header .* lacks a column for output"):
        load_trace(p, "csv")


def test_all_rows_bad(tmp_path):
    p = tmp_path / "b.csv"
    p.write_text("timestamp,prompt_tokens,completion_tokens\nx,y,z\n")
    with pytest.raises(TraceError, match=r"b\.csv: no valid requests \(1 lines skipped; first: line 2"):
        load_trace(p)
