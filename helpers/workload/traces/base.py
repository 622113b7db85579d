"""Request traces: the loaded-trace data class and the reader base classes.

A trace is one row per request (``Trace.requests``, a DataFrame sorted by start time) plus, when
the format carries prompt content, the KV-cache block hashes of each prompt in compressed-row form
(``block_hashes`` and ``block_offsets``: the hashes of request ``i`` are
``block_hashes[block_offsets[i]:block_offsets[i + 1]]``).

Each file format is a ``TraceReader`` subclass in its own module of this package, listed in the
registry of ``helpers.workload.traces.formats``: a new format is one new file and one line there.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from helpers.core.errors import TraceError
from helpers.core.paths import repo_relative

REQUEST_COLUMNS = ("start_s", "end_s", "input_tokens", "output_tokens")
"""Columns every ``Trace.requests`` has; ``end_s`` is NaN where the trace has no end time.

Optional columns: ``system_tokens`` (leading tokens that are a system prompt) and ``conversation``
(an id shared by the turns of one conversation)."""

MAX_REPORTED_LINES = 5
"""How many skipped lines a trace describes by line number (all are counted)."""

SNIFF_LINES = 20
"""Non-empty lines read from the start of a file to detect its format."""


@dataclass
class Trace:
    """A loaded trace: one row per request, sorted by start time, times in seconds from the first."""

    requests: pd.DataFrame
    source: str
    format: str
    block_size: int | None = None
    block_hashes: np.ndarray | None = None
    block_offsets: np.ndarray | None = None
    skipped: int = 0
    skipped_examples: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    no_reuse_reason: str | None = None

    def __len__(self) -> int:
        return len(self.requests)

    @property
    def has_blocks(self) -> bool:
        """Whether the trace carries per-block prompt hashes (needed for prefix reuse)."""
        return self.block_hashes is not None and self.block_offsets is not None


class TraceReader(ABC):
    """One trace file format: how to recognise it and how to read it into a ``Trace``."""

    name: str = ""
    description: str = ""
    claimed_by: Callable[[str], str | None] | None = None
    """Set by the format registry: the name of another format that claims a line, if any (mixed files)."""

    @abstractmethod
    def sniff(self, lines: list[str]) -> bool:
        """Whether the first non-empty lines of a file look like this format."""

    def claims_line(self, line: str) -> bool:
        """Whether one line is unmistakably this format (used to report mixed-format files)."""
        return self.sniff([line])

    @abstractmethod
    def read(self, path: Path, *, model_dir: Path | None = None, block_size: int = 16) -> Trace:
        """Read the file; skip and count malformed lines; raise ``TraceError`` when nothing is usable."""


class JsonLinesReader(TraceReader):
    """A JSON-lines format: a file is this format when its first line is a record this reader claims."""

    def sniff(self, lines: list[str]) -> bool:
        """Accept a first line that ``claims_line`` claims."""
        return bool(lines) and self.claims_line(lines[0])

    @abstractmethod
    def claims_line(self, line: str) -> bool:
        """Whether one line is a JSON record of this format."""


def check_readable(path: Path) -> None:
    """Raise ``TraceError`` naming ``path`` if it is missing, not a file, unreadable or empty."""
    if not path.exists():
        raise TraceError(f"{path}: trace file not found")
    if not path.is_file():
        raise TraceError(f"{path}: not a file")
    try:
        with open(path, "rb") as f:
            head = f.read(1 << 16)
    except OSError as err:
        raise TraceError(f"{path}: cannot read trace file ({err.strerror or err})") from None
    if not head.strip():
        raise TraceError(f"{path}: trace file is empty")
    if head.startswith((b"\xff\xfe", b"\xfe\xff")):
        raise TraceError(f"{path}: UTF-16 text (a spreadsheet's 'Unicode text'); save it as UTF-8 (CSV UTF-8)")
    if b"\x00" in head:
        raise TraceError(f"{path}: not a text file (binary content)")


def head_lines(path: Path, n: int = SNIFF_LINES) -> list[str]:
    """Return the first ``n`` non-empty lines of a text file (stripped)."""
    out: list[str] = []
    try:
        with open(path, encoding="utf-8-sig", errors="replace") as f:  # -sig: a spreadsheet's byte-order mark
            for line in f:
                if line.strip():
                    out.append(line.strip())
                    if len(out) >= n:
                        break
    except OSError as err:
        raise TraceError(f"{path}: cannot read trace file ({err.strerror or err})") from None
    return out


def finish_trace(
    path: Path | str,
    fmt: str,
    frame: pd.DataFrame,
    *,
    hashes: list[np.ndarray] | None = None,
    flat: tuple[np.ndarray, np.ndarray] | None = None,
    block_size: int | None = None,
    skipped: int = 0,
    examples: list[str] | None = None,
    notes: list[str] | None = None,
    no_reuse_reason: str | None = None,
) -> Trace:
    """Build a ``Trace``: sort by start, shift times to start at 0, reorder block hashes to match.

    Block hashes come either as one array per row (``hashes``) or already flat (``flat``:
    values and offsets); without them, ``no_reuse_reason`` says why prefix reuse is unknown.
    Raises ``TraceError`` when ``frame`` has no rows.
    """
    if frame.empty:
        raise TraceError(f"{path}: no valid requests ({skipped} lines skipped" + _first(examples) + ")")
    frame = frame.reset_index(drop=True)
    order = np.argsort(frame["start_s"].to_numpy(dtype=float), kind="stable")
    t0 = float(frame["start_s"].min())
    out = frame.iloc[order].reset_index(drop=True)
    out["start_s"] = out["start_s"].astype(float) - t0
    out["end_s"] = out["end_s"].astype(float) - t0
    for col in ("input_tokens", "output_tokens"):
        out[col] = out[col].astype(np.int64)
    values = offsets = None
    if hashes is not None:
        lengths = np.fromiter((len(h) for h in hashes), dtype=np.int64, count=len(hashes))
        offsets = np.concatenate([[0], np.cumsum(lengths)])
        values = np.concatenate(hashes).astype(np.int64) if len(hashes) else np.zeros(0, np.int64)
    elif flat is not None:
        values, offsets = flat
    if values is not None and offsets is not None:
        values, offsets = reorder_blocks(values, offsets, order)
    return Trace(
        requests=out,
        source=repo_relative(str(path)),  # no machine path in a record
        format=fmt,
        block_size=block_size,
        block_hashes=values,
        block_offsets=offsets,
        skipped=skipped,
        skipped_examples=list(examples or [])[:MAX_REPORTED_LINES],
        notes=list(notes or []),
        no_reuse_reason=no_reuse_reason,
    )


def reorder_blocks(values: np.ndarray, offsets: np.ndarray, order: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Permute compressed-row block lists so that new row ``k`` is old row ``order[k]``."""
    lengths = np.diff(offsets)[order]
    new_offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    if np.array_equal(order, np.arange(len(order))):
        return values, new_offsets
    starts = np.repeat(offsets[:-1][order] - new_offsets[:-1], lengths)
    idx = np.arange(new_offsets[-1], dtype=np.int64) + starts
    return values[idx], new_offsets


def _first(examples: list[str] | None) -> str:
    return f"; first: {examples[0]}" if examples else ""
