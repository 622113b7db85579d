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
"""

from __future__ import annotations

import csv
import io
from pathlib import Path

import numpy as np
import pandas as pd

from helpers.core.errors import TraceError
from helpers.workload.traces._common import EPOCH_MS_THRESHOLD, SkipLog
from helpers.workload.traces.base import Trace, TraceReader, finish_trace

START = ("timestamp", "start_time", "arrival_time", "time")
INPUT = ("contexttokens", "input_tokens", "prompt_tokens", "input_length")
OUTPUT = ("generatedtokens", "output_tokens", "completion_tokens", "output_length")
END = ("end_time", "end_timestamp")
DURATION = {"latency_s": 1.0, "duration_s": 1.0, "latency_ms": 1e-3, "duration_ms": 1e-3}


def _header(line: str) -> list[str]:
    return [c.strip().lower() for c in next(csv.reader([line]), [])]


def _find(names: list[str], aliases: tuple[str, ...] | dict[str, float]) -> int | None:
    for a in aliases:
        if a in names:
            return names.index(a)
    return None


def _times(values: pd.Series) -> pd.Series:
    """Seconds since the epoch from numbers (s or ms) or ISO-8601 strings; NaN where unparsable."""
    num = pd.to_numeric(values, errors="coerce")
    if num.notna().sum() >= values.str.strip().ne("").sum() / 2:
        return num.where(num.abs() <= EPOCH_MS_THRESHOLD, num / 1000.0).astype(float)
    dt = pd.to_datetime(values.str.strip(), format="ISO8601", errors="coerce", utc=True)
    secs = (dt - pd.Timestamp(0, tz="UTC")) / pd.Timedelta(seconds=1)
    return secs.astype(float)


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
        """Read the rows; rows with a wrong field count or unparsable values are skipped and counted."""
        try:
            text = path.read_text(encoding="utf-8-sig")
        except (OSError, UnicodeDecodeError) as err:
            raise TraceError(f"{path}: cannot read trace file ({err})") from None
        lines = text.splitlines()
        first = next((i for i, ln in enumerate(lines) if ln.strip()), None)
        if first is None:
            raise TraceError(f"{path}: trace file is empty")
        names = _header(lines[first])
        cols = {"start": _find(names, START), "input": _find(names, INPUT), "output": _find(names, OUTPUT)}
        missing = [k for k, v in cols.items() if v is None]
        if missing:
            raise TraceError(
                f"{path}: line {first + 1}: CSV header {lines[first][:80]!r} lacks a column for "
                f"{', '.join(missing)} (accepted: start {START}, input {INPUT}, output {OUTPUT})"
            )
        end_col, dur_col = _find(names, END), _find(names, DURATION)
        dur_scale = DURATION[names[dur_col]] if dur_col is not None else 1.0
        log = SkipLog(path, self.name, self.claimed_by)
        rows: list[list[str]] = []
        linenos: list[int] = []
        width = len(names)
        body = lines[first + 1 :]
        for k, fields in enumerate(csv.reader(io.StringIO("\n".join(body)))):
            lineno = first + 2 + k
            if not fields or not any(f.strip() for f in fields):
                continue
            if len(fields) != width:
                log.skip(lineno, body[k], f"expected {width} fields, got {len(fields)}")
                continue
            rows.append(fields)
            linenos.append(lineno)
        raw = pd.DataFrame(rows, columns=range(width), dtype=str) if rows else pd.DataFrame(columns=range(width))
        frame = pd.DataFrame(
            {
                "start_s": _times(raw[cols["start"]].astype(str)),
                "input_tokens": pd.to_numeric(raw[cols["input"]], errors="coerce"),
                "output_tokens": pd.to_numeric(raw[cols["output"]], errors="coerce"),
            }
        )
        if end_col is not None:
            frame["end_s"] = _times(raw[end_col].astype(str))
        elif dur_col is not None:
            frame["end_s"] = frame["start_s"] + pd.to_numeric(raw[dur_col], errors="coerce") * dur_scale
        else:
            frame["end_s"] = np.nan
        tok = frame[["input_tokens", "output_tokens"]]
        bad = frame["start_s"].isna() | tok.isna().any(axis=1) | (tok < 0).any(axis=1)
        bad |= (tok.fillna(0) % 1 != 0).any(axis=1)
        for i in np.flatnonzero(bad.to_numpy()):
            log.skip(linenos[i], ",".join(rows[i]), "unparsable time or token count")
        frame = frame.loc[~bad.to_numpy()]
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
