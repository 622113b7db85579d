"""Parsing helpers shared by the trace readers: skipped-line bookkeeping and time values."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from helpers.core.errors import TraceError
from helpers.workload.traces.base import MAX_REPORTED_LINES

EPOCH_MS_THRESHOLD = 1e11
"""Numeric times above this are taken as epoch milliseconds, not seconds (1e11 s is year 5138)."""

MAX_TOKENS = 2**31 - 1
"""Largest token count taken as real. A larger one is a corrupt value and its line is skipped: kept, it
overflows int64 arithmetic into negative counts and breaks the profile's histograms."""


@dataclass
class SkipLog:
    """Counts malformed lines and keeps the first few, each with its line number."""

    path: Path
    fmt: str
    claimed_by: Callable[[str], str | None] | None = None
    count: int = 0
    examples: list[str] = field(default_factory=list)

    def skip(self, lineno: int, line: str, why: str) -> None:
        """Record line ``lineno`` as skipped; raise ``TraceError`` if another format claims it."""
        other = self.claimed_by(line) if self.claimed_by else None
        if other:
            raise TraceError(
                f"{self.path}: line {lineno} looks like {other} but the file is read as {self.fmt} "
                "(mixed formats in one file)"
            )
        self.count += 1
        if len(self.examples) < MAX_REPORTED_LINES:
            self.examples.append(f"line {lineno}: {why}")


def json_object(line: str) -> dict[str, Any] | None:
    """``line`` parsed as a JSON object, or None."""
    s = line.strip()
    if not s.startswith("{"):
        return None
    try:
        obj = json.loads(s)
    except ValueError:
        return None
    return obj if isinstance(obj, dict) else None


def to_seconds(value: Any) -> float:
    """Convert a time value to seconds: epoch seconds or milliseconds (numbers), or an ISO-8601 string."""
    if isinstance(value, bool):
        raise ValueError(f"not a time: {value!r}")
    if isinstance(value, int | float):
        v = finite(value, "time")
        return v / 1000.0 if abs(v) > EPOCH_MS_THRESHOLD else v
    if isinstance(value, str):
        try:
            return to_seconds(float(value))
        except ValueError:
            pass
        return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    raise ValueError(f"not a time: {value!r}")


def finite(value: Any, name: str) -> float:
    """``value`` as a finite float, else ``ValueError`` naming ``name`` (inf, NaN, or an int beyond float range)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"{name} must be a number, got {_short(value)}")
    try:
        v = float(value)
    except OverflowError:
        raise ValueError(f"{name} is out of range, got {_short(value)}") from None
    if not math.isfinite(v):
        raise ValueError(f"{name} must be finite, got {v!r}")
    return v


def _short(value: Any) -> str:
    """``repr(value)``, cut to 40 characters (a 400-digit integer stays readable in a skip note)."""
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def nonneg_int(value: Any, name: str) -> int:
    """``value`` as a non-negative int, else ``ValueError`` naming ``name``."""
    if isinstance(value, bool) or not isinstance(value, int | float) or value != value or value < 0:
        raise ValueError(f"{name} must be a non-negative number, got {_short(value)}")
    if value > MAX_TOKENS:
        raise ValueError(f"{name} of {_short(value)} is not a plausible token count (at most {MAX_TOKENS:,})")
    if float(value) != int(value):
        raise ValueError(f"{name} must be a whole number, got {value!r}")
    return int(value)
