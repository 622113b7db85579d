"""Mooncake-style JSONL traces: one request per line with block hashes of its prompt.

Each line: ``{"timestamp": <ms from trace start>, "input_length": N, "output_length": M,
"hash_ids": [h0, h1, ...]}``, where ``h_j`` identifies the content of prompt tokens
``[512 j, 512 (j + 1))``. Equal hashes at the same position mean equal content; the profile treats a
block as reusable only when the whole chain up to it matches an earlier request's.
A line whose number of hash ids is not ``ceil(input_length / 512)``, whose time is not finite or whose
length is over ``MAX_TOKENS`` (2**31 - 1) is skipped and reported.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from helpers.core.errors import TraceError
from helpers.workload.traces._common import MAX_TOKENS, SkipLog, finite, json_object, nonneg_int
from helpers.workload.traces.base import JsonLinesReader, Trace, finish_trace

MOONCAKE_BLOCK_TOKENS = 512
FIELDS = ("timestamp", "input_length", "output_length", "hash_ids")


def blocks_needed(input_tokens: np.ndarray | int) -> np.ndarray | int:
    """Hash ids a prompt of ``input_tokens`` has: one per started 512-token block."""
    return -(-input_tokens // MOONCAKE_BLOCK_TOKENS)


def _starts_with_an_object(path: Path) -> bool:
    """Whether the first non-blank character of the file (after a byte-order mark) is ``{``.

    pyarrow's JSON reader (26.0.1) crashes the process on a file whose first value is ``null``; only
    files that start like a Mooncake line go to it.
    """
    try:
        with open(path, "rb") as f:
            head = f.read(4096)
    except OSError:
        return False
    return head.removeprefix(b"\xef\xbb\xbf").lstrip()[:1] == b"{"


def _fast(path: Path) -> tuple[pd.DataFrame, np.ndarray, np.ndarray] | None:
    """Read a clean file in one pass with pyarrow; None when anything is off (the slow path explains)."""
    if not _starts_with_an_object(path):
        return None
    try:
        return _fast_unchecked(path)
    except Exception:  # noqa: BLE001 - e.g. keys that are not UTF-8: the line-by-line reader names the lines
        return None


def _fast_unchecked(path: Path) -> tuple[pd.DataFrame, np.ndarray, np.ndarray] | None:
    try:
        # pyarrow is heavy; only the fast JSON-lines path needs it
        import pyarrow as pa

        # pyarrow is heavy; only the fast JSON-lines path needs it
        import pyarrow.json as pj

        table = pj.read_json(path)
    except Exception:  # noqa: BLE001 - any failure falls back to the line-by-line reader
        return None
    if set(table.column_names) != set(FIELDS):
        return None
    hashes = table.column("hash_ids").combine_chunks()
    if not pa.types.is_list(hashes.type) or not pa.types.is_integer(hashes.type.value_type):
        return None
    cols = {}
    for name in FIELDS[:3]:
        col = table.column(name)
        if col.null_count or not (pa.types.is_integer(col.type) or pa.types.is_floating(col.type)):
            return None
        cols[name] = col.to_numpy().astype(float)
    if hashes.null_count or hashes.values.null_count:
        return None
    if not np.isfinite(cols["timestamp"]).all():
        return None
    for name in ("input_length", "output_length"):  # NaN, negative and absurd lengths: the slow path skips those lines
        if not ((cols[name] >= 0) & (cols[name] <= MAX_TOKENS)).all():
            return None
    if (cols["input_length"] % 1).any() or (cols["output_length"] % 1).any():
        return None
    frame = pd.DataFrame(
        {
            "start_s": cols["timestamp"] / 1000.0,
            "end_s": np.nan,
            "input_tokens": cols["input_length"].astype(np.int64),
            "output_tokens": cols["output_length"].astype(np.int64),
        }
    )
    offsets = hashes.offsets.to_numpy().astype(np.int64)
    values = hashes.values.to_numpy().astype(np.int64)
    if not np.array_equal(np.diff(offsets), blocks_needed(frame["input_tokens"].to_numpy())):
        return None  # the line-by-line reader names the inconsistent lines
    return frame, values[offsets[0] : offsets[-1]], offsets - offsets[0]


class MooncakeReader(JsonLinesReader):
    """Reader of Mooncake-style JSONL traces (timestamps in ms, 512-token block hashes)."""

    name = "mooncake"
    description = "JSONL: timestamp (ms), input_length, output_length, hash_ids (one per 512 tokens)."

    def claims_line(self, line: str) -> bool:
        """Claim a JSON object with Mooncake's keys."""
        obj = json_object(line)
        return obj is not None and ("hash_ids" in obj or {"input_length", "output_length"} <= obj.keys())

    def read(self, path: Path, *, model_dir: Path | None = None, block_size: int = 16) -> Trace:
        """Read the trace (block size is fixed at 512 by the format; ``block_size`` is ignored)."""
        notes = ["no end times in the trace"]
        fast = _fast(path)
        if fast is not None:
            frame, values, offsets = fast
            return finish_trace(
                path, self.name, frame, flat=(values, offsets), block_size=MOONCAKE_BLOCK_TOKENS, notes=notes
            )
        log = SkipLog(path, self.name, self.claimed_by)
        rows: list[tuple[float, int, int]] = []
        hashes: list[np.ndarray] = []
        try:
            with open(path, encoding="utf-8") as f:
                for lineno, line in enumerate(f, start=1):
                    if not line.strip():
                        continue
                    obj = json_object(line)
                    if obj is None:
                        log.skip(lineno, line, "not a JSON object")
                        continue
                    try:
                        missing = [k for k in FIELDS if k not in obj]
                        if missing:
                            raise ValueError(f"missing {', '.join(missing)}")
                        ts = finite(obj["timestamp"], "timestamp")
                        h = obj["hash_ids"]
                        if not isinstance(h, list) or not all(isinstance(x, int) for x in h):
                            raise ValueError("hash_ids must be a list of integers")
                        row = (
                            float(ts) / 1000.0,
                            nonneg_int(obj["input_length"], "input_length"),
                            nonneg_int(obj["output_length"], "output_length"),
                        )
                        block_ids = np.asarray(h, dtype=np.int64)
                        if len(h) != blocks_needed(row[1]):
                            raise ValueError(
                                f"{len(h)} hash_ids for input_length {row[1]}, which needs "
                                f"{blocks_needed(row[1])} blocks of {MOONCAKE_BLOCK_TOKENS} tokens"
                            )
                    except (ValueError, OverflowError) as err:
                        log.skip(lineno, line, str(err))
                        continue
                    rows.append(row)
                    hashes.append(block_ids)
        except (OSError, UnicodeDecodeError) as err:
            raise TraceError(f"{path}: cannot read trace file ({err})") from None
        frame = pd.DataFrame(rows, columns=["start_s", "input_tokens", "output_tokens"])
        frame["end_s"] = np.nan
        return finish_trace(
            path,
            self.name,
            frame,
            hashes=hashes,
            block_size=MOONCAKE_BLOCK_TOKENS,
            skipped=log.count,
            examples=log.examples,
            notes=notes,
        )
