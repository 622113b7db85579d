"""Small text helpers used across the steps: slugs, knob text, "unknown X; allowed: ..." messages."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any


def slug(text: str) -> str:
    """A lower-case, filesystem- and URL-safe form of a name (runs of other characters become one '-')."""
    out = "".join(c if c.isalnum() or c in "-_" else "-" for c in text.lower())
    return "-".join(x for x in out.split("-") if x) or "run"


def label_slug(text: str) -> str:
    """A filesystem-safe form of an engine label (case kept, so distinct labels stay distinct)."""
    keep = [c if c.isalnum() or c in "-_." else "-" for c in text]
    return "".join(keep).strip("-") or "x"


def knob_text(knobs: Mapping[str, Any] | None, sep: str = ", ") -> str:
    """Knob values as ``name=value`` pairs in name order, e.g. ``max_num_seqs=16, prefix_caching=True``."""
    return sep.join(f"{k}={v}" for k, v in sorted((knobs or {}).items()))


def unknown_choice(what: str, value: object, allowed: Iterable[str]) -> str:
    """The one wording of "this value is not one of the allowed ones"."""
    return f"unknown {what} {value!r}; allowed: {', '.join(sorted(allowed))}"
