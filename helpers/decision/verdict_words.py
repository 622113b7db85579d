"""A saved evidence verdict in a few words: the first page's headline and the reports index's line.

Wording only, from the ``decision.evidence.EvidenceVerdict`` a run saved (as a dict, so that summaries of
older runs read too): nothing is computed here, and rendering a page from saved records may call it.
"""

from __future__ import annotations

from typing import Any


def evidence_line(verdict: dict[str, Any]) -> str:
    """The headline with whom it favours and what decided: the reports index's line under a run's primary.

    ``measured, +15.3% [+2.6%, +29.6%] for SGLang 0.5.16; decided by the tree and operations cost``: a
    primary that is not the faster configuration is then read as the decision it is, not as a misprint.
    """
    line = verdict_headline(verdict)
    kind, faster, by = verdict.get("verdict"), verdict.get("faster"), verdict.get("decided_by")
    if kind == "measured" and faster:
        line = f"{line} for {faster}"
    if kind in ("measured", "equivalent") and by and by != "measurement":
        line = f"{line}; decided by the {by}" if by.startswith("tree") else f"{line}; decided by {by}"
    return line


def verdict_headline(verdict: dict[str, Any]) -> str:
    """A verdict in a few words: ``measured, +12.0% [+6.1%, unbounded]``, ``equivalent (±5%)``, ``not conclusive``.

    Read from a saved ``EvidenceVerdict`` (a dict in ``decision.json`` or ``summary.json``); an archive made
    before verdicts existed says what decided instead. An end of the interval that is not bounded reads
    "unbounded".
    """
    kind = verdict.get("verdict")
    if kind == "measured" and verdict.get("difference_pct") is not None:
        lo, hi = verdict.get("low_pct"), verdict.get("high_pct")
        ends = ["unbounded" if x is None else f"{x:+.1f}%" for x in (lo, hi)]
        return f"measured, {verdict['difference_pct']:+.1f}% [{ends[0]}, {ends[1]}]"
    if kind == "equivalent":
        return f"equivalent (±{verdict.get('margin_pct', 5):g}%)"
    if kind == "not_conclusive":
        return "not conclusive"
    return str(verdict.get("decided_by") or "as archived (a run made before the three verdicts)")
