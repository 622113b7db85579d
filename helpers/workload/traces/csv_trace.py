"""CSV traces: a header row, then one request per row with a timestamp and token counts.

Columns are matched by name, case-insensitively (first alias found wins):

- start time: ``TIMESTAMP``, ``timestamp``, ``start_time``, ``arrival_time``, ``time`` — ISO-8601
  date-times, or numbers (epoch seconds; milliseconds when above 1e11);
- input tokens: ``ContextTokens``, ``input_tokens``, ``prompt_tokens``, ``input_length``;
- output tokens: ``GeneratedTokens``, ``output_tokens``, ``completion_tokens``, ``output_length``;
- optional end: ``end_time`` / ``end_timestamp`` (same time format), or a duration
  ``latency_s`` / ``duration_s`` / ``latency_ms`` / ``duration_ms``.

The Azure LLM inference traces (TIMESTAMP, ContextTokens, GeneratedTokens) are this format.
CSV carries no prompt content, so prefix reuse is unknown for it.

What a spreadsheet exports reads as is: a UTF-8 byte-order mark and CRLF line ends. Each line is one
row (a quoted field cannot span lines, so a stray quote spoils only its own line); bytes that are not
UTF-8 spoil only their row. Rows are split and converted with pyarrow's compute functions, so a trace
of ten million lines loads in seconds; only quoted and malformed rows are looked at one by one.
"""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from helpers.core.errors import TraceError
from helpers.workload.traces._common import EPOCH_MS_THRESHOLD, MAX_TOKENS, SkipLog
from helpers.workload.traces.base import Trace, TraceReader, finish_trace

START = ("timestamp", "start_time", "arrival_time", "time")
INPUT = ("contexttokens", "input_tokens", "prompt_tokens", "input_length")
OUTPUT = ("generatedtokens", "output_tokens", "completion_tokens", "output_length")
END = ("end_time", "end_timestamp")
DURATION = {"latency_s": 1.0, "duration_s": 1.0, "latency_ms": 1e-3, "duration_ms": 1e-3}

_NUMBER = r"^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$"


def _header(line: str) -> list[str]:
    """The lower-cased column names of a header line ([] when it is not one CSV row)."""
    try:
        fields = next(csv.reader([line.lstrip("\ufeff")]), [])
    except csv.Error:
        return []
    return [c.strip().lower() for c in fields]


def _find(names: list[str], aliases: tuple[str, ...] | dict[str, float]) -> int | None:
    for a in aliases:
        if a in names:
            return names.index(a)
    return None


def _split(line: str) -> list[str] | None:
    """The fields of one quoted row with the csv module (None if it refuses the row)."""
    try:
        return next(csv.reader([line]), [])
    except csv.Error:  # e.g. a field over csv.field_size_limit()
        return None


def _numbers(col: pa.Array) -> np.ndarray:
    """Floats of a string column; NaN where a value is not a plain decimal number."""
    s = pc.utf8_trim_whitespace(col)
    ok = pc.match_substring_regex(s, _NUMBER)
    vals = pc.cast(pc.if_else(ok, s, "0"), pa.float64()).to_numpy(zero_copy_only=False)
    return np.where(ok.to_numpy(zero_copy_only=False), vals, np.nan)


def _times(col: pa.Array) -> np.ndarray:
    """Seconds since the epoch from numbers (s or ms) or ISO-8601 strings; NaN where unparsable or not finite."""
    num = _numbers(col)
    filled = len(col) - pc.sum(pc.equal(pc.utf8_trim_whitespace(col), "")).as_py() if len(col) else 0
    if np.count_nonzero(~np.isnan(num)) >= filled / 2:
        secs = np.where(np.abs(num) <= EPOCH_MS_THRESHOLD, num, num / 1000.0)
    else:
        secs = _iso_seconds(pd.Series(pc.utf8_trim_whitespace(col).to_pylist(), dtype=object))
    return np.where(np.isfinite(secs), secs, np.nan)


def _iso_seconds(text: pd.Series) -> np.ndarray:
    """Seconds since the epoch of ISO-8601 strings; NaN where unparsable.

    The difference is taken in the parsed values' own unit: ``-1`` parses as the year -1, which a
    nanosecond ``Timestamp`` cannot hold (``OutOfBoundsDatetime``).
    """
    dt = pd.to_datetime(text, format="ISO8601", errors="coerce", utc=True)
    if not isinstance(dt.dtype, pd.DatetimeTZDtype):  # nothing parsed
        return np.full(len(text), np.nan)
    values = dt.dt.tz_convert(None).to_numpy()
    with np.errstate(invalid="ignore"):
        return ((values - np.datetime64(0, "s")) / np.timedelta64(1, "s")).astype(float)


def _tokens(col: pa.Array) -> np.ndarray:
    """Token counts; NaN where unparsable, negative, fractional or implausibly large."""
    num = _numbers(col)
    with np.errstate(invalid="ignore"):
        ok = (num >= 0) & (num <= MAX_TOKENS) & (num % 1 == 0)
    return np.where(ok, num, np.nan)


def _lines(path: Path) -> pa.Array:
    """The file's lines (BOM and CR line ends removed, bad UTF-8 replaced), as one Arrow string array."""
    try:
        text = path.read_bytes().decode("utf-8-sig", errors="replace")
    except OSError as err:
        raise TraceError(f"{path}: cannot read trace file ({err.strerror or err})") from None
    lines = pc.split_pattern(pa.array([text], pa.large_string()), "\n").flatten()
    return pc.utf8_rtrim(lines, characters="\r")


class CsvTraceReader(TraceReader):
    """Reader of CSV request traces (e.g. the Azure LLM inference trace)."""

    name = "csv"
    description = "CSV with a header: a timestamp column and input/output token-count columns."

    def sniff(self, lines: list[str]) -> bool:
        """Accept a first line that is a CSV header naming a start-time and an input-token column."""
        if not lines or lines[0].lstrip().startswith("{") or "," not in lines[0]:
            return False
        names = _header(lines[0])
        return _find(names, START) is not None and _find(names, INPUT) is not None

    def read(self, path: Path, *, model_dir: Path | None = None, block_size: int = 16) -> Trace:
        """Read the rows; rows with a wrong field count or unparsable values are skipped and counted.

        Blank lines and rows of empty cells (a spreadsheet leaves them at the end) are ignored.
        """
        lines = _lines(path)
        blank = pc.equal(pc.utf8_length(pc.utf8_trim(lines, characters=" \t\v\f,")), 0).to_numpy(zero_copy_only=False)
        filled = np.flatnonzero(~blank)
        if not len(filled):
            raise TraceError(f"{path}: trace file is empty")
        first = int(filled[0])
        head = lines[first].as_py()
        names = _header(head)
        cols = {"start": _find(names, START), "input": _find(names, INPUT), "output": _find(names, OUTPUT)}
        missing = [k for k, v in cols.items() if v is None]
        if missing:
            raise TraceError(
                f"{path}: line {first + 1}: CSV header {head[:80]!r} lacks a column for "
                f"{', '.join(missing)} (accepted: start {START}, input {INPUT}, output {OUTPUT})"
            )
        end_col, dur_col = _find(names, END), _find(names, DURATION)
        picks = [cols["start"], cols["input"], cols["output"]] + [c for c in (end_col, dur_col) if c is not None]
        width = len(names)
        log = SkipLog(path, self.name, self.claimed_by)

        body = lines.slice(first + 1)
        rows = ~blank[first + 1 :]
        quoted = pc.match_substring(body, '"').to_numpy(zero_copy_only=False) & rows
        parts = pc.split_pattern(body, ",")
        counts = pc.list_value_length(parts).to_numpy(zero_copy_only=False)
        plain_ok = rows & ~quoted & (counts == width)
        wrong = {int(i): str(counts[i]) for i in np.flatnonzero(rows & ~quoted & (counts != width))}
        q_idx: list[int] = []
        q_vals: list[list[str]] = [[] for _ in picks]
        for i in np.flatnonzero(quoted):
            fields = _split(body[int(i)].as_py())
            if fields is None or len(fields) != width:
                wrong[int(i)] = "an unreadable row" if fields is None else str(len(fields))
                continue
            q_idx.append(int(i))
            for out, c in zip(q_vals, picks, strict=True):
                out.append(fields[c])
        for i in sorted(wrong):
            log.skip(first + 2 + i, body[i].as_py(), f"expected {width} fields, got {wrong[i]}")

        kept = parts.filter(pa.array(plain_ok))
        idx = np.flatnonzero(plain_ok)
        columns = [pc.list_element(kept, c) if len(kept) else pa.array([], pa.large_string()) for c in picks]
        if q_idx:
            idx = np.concatenate([idx, np.asarray(q_idx, dtype=np.int64)])
            order = pa.array(np.argsort(idx, kind="stable"))
            columns = [
                pa.concat_arrays([col, pa.array(q, pa.large_string())]).take(order)
                for col, q in zip(columns, q_vals, strict=True)
            ]
            idx = np.sort(idx, kind="stable")
        frame = pd.DataFrame(
            {"start_s": _times(columns[0]), "input_tokens": _tokens(columns[1]), "output_tokens": _tokens(columns[2])}
        )
        if end_col is not None:
            frame["end_s"] = _times(columns[3])
        elif dur_col is not None:
            end = frame["start_s"].to_numpy() + _numbers(columns[3]) * DURATION[names[dur_col]]
            frame["end_s"] = np.where(np.isfinite(end), end, np.nan)
        else:
            frame["end_s"] = np.nan
        bad = frame[["start_s", "input_tokens", "output_tokens"]].isna().any(axis=1).to_numpy()
        for i in idx[bad]:
            log.skip(first + 2 + int(i), body[int(i)].as_py(), "unparsable time or token count")
        frame = frame.loc[~bad]
        notes = [] if end_col is not None or dur_col is not None else ["no end times in the trace"]
        return finish_trace(
            path,
            self.name,
            frame,
            skipped=log.count,
            examples=log.examples,
            notes=notes,
            no_reuse_reason="a CSV trace has token counts but no prompt content: prefixes cannot be seen",
        )
