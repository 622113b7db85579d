"""Checklist steps 11-12: the quarterly review against archived runs, trends, and version currency.

``review`` compares this run's ``summary.json`` with the latest earlier archived run of the same workload on
the same hardware (``helpers.report.index.archived_runs``; runs on other GPUs stay in the history, not
compared): engine versions, and output throughput, TTFT p95 and $/M output tokens at each configuration's
representative measurement (``helpers.review.snapshot``), and the recommendation. A flipped decision becomes a
flag for the top of the report, and so does a regression: a change worse than
``cfg.review.regression_threshold`` that the two runs' 95% intervals show (the interval of the relative change
excludes zero; ``helpers.review.significance``). A change beyond the threshold that the intervals do not
separate from zero is a note, "within noise (±x%)"; one where either run's figure has no interval (one sample,
an archive from before intervals) is "no interval: not judged" and is never a regression. The changes table
gives each change with its interval and verdict. Representatives of different kinds (a capacity, trials at a
fixed load, a grid point) are not compared (``not_comparable``). Version currency (step 12) is in
``helpers.review.versions``, trends over time in ``helpers.review.trend``.
"""

from __future__ import annotations

import math
from typing import Any

import pandas as pd
from pydantic import BaseModel, ConfigDict, Field

from helpers.core.config import PlaybookConfig
from helpers.review.significance import Judgement, has_interval, interval_text, judge
from helpers.review.snapshot import EngineSnapshot, RunSnapshot, snapshot
from helpers.run.records import Figure
from helpers.run.summary import RunSummary


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


def _pairs(
    before: list[EngineSnapshot], now: list[EngineSnapshot]
) -> list[tuple[EngineSnapshot | None, EngineSnapshot | None]]:
    """Match configurations by label, then leftovers by engine name when that is unambiguous."""
    old = {e.label: e for e in before}
    pairs: list[tuple[EngineSnapshot | None, EngineSnapshot | None]] = []
    rest_now = []
    for e in now:
        if e.label in old:
            pairs.append((old.pop(e.label), e))
        else:
            rest_now.append(e)
    for e in rest_now:
        same = [o for o in old.values() if o.engine == e.engine]
        if len(same) == 1 and sum(x.engine == e.engine for x in rest_now) == 1:
            pairs.append((old.pop(same[0].label), e))
        else:
            pairs.append((None, e))
    pairs += [(o, None) for o in old.values()]
    return pairs


def _rel(before: float | None, now: float | None) -> float | None:
    if before is None or now is None or before == 0:
        return None
    return (now - before) / before


MEASURED_AS = {"capacity": "the SLA capacity", "fixed": "fixed-load trials", "grid": "a grid point", "none": "nothing"}


def _measured_as(e: EngineSnapshot) -> str:
    load = f" at concurrency {e.concurrency}" if e.concurrency and e.source in ("fixed", "grid") else ""
    return MEASURED_AS.get(e.source or "none", e.source or "nothing") + load


def not_comparable(before: EngineSnapshot, now: EngineSnapshot) -> str | None:
    """Why two representatives cannot be compared as a change (another kind of measurement or load); None: they can.

    Throughput, TTFT and $/M tokens at an SLA capacity answer another question than at a grid point or a fixed
    load: a change between them is the change of method, not of the engine.
    """
    same = before.source == now.source and (before.source == "capacity" or before.concurrency == now.concurrency)
    return None if same else f"{_measured_as(before)} before, {_measured_as(now)} now"


def change_text(change: Any) -> str:
    """A relative change (a fraction) as a signed percentage, ``-0.744`` → ``-74.4%``; ``–`` for none."""
    if change is None or (isinstance(change, float) and math.isnan(change)):
        return "–"
    return f"{float(change):+.1%}"


def _change_with_interval(change: Any, low: Any, high: Any) -> str:
    """``-67.9% (95%: -93% to +340%)``, or the change alone where it has no interval."""
    text = change_text(change)
    if text == "–" or low is None or high is None or (isinstance(low, float) and math.isnan(low)):
        return text
    return f"{text} (95%: {low:+.0%} to {f'{high:+.0%}' if math.isfinite(high) else '+∞'})"


def changes_for_people(df: pd.DataFrame) -> pd.DataFrame:
    """``ReviewResult.changes()`` for people: each change as a percentage with its 95% interval, then its verdict.

    The interval's bounds are folded into the change's cell; no change column is ever formatted as money.
    """
    out = df.copy()
    for col in [c for c in out.columns if str(c).endswith(" change")]:
        lo, hi = f"{col} low", f"{col} high"
        if lo in out.columns and hi in out.columns:
            cells = [_change_with_interval(c, a, b) for c, a, b in zip(out[col], out[lo], out[hi], strict=True)]
            out[col] = pd.Series(cells, index=out.index, dtype=object)
            out = out.drop(columns=[lo, hi])
        else:
            out[col] = out[col].map(change_text).astype(object)
    return out


# metric → (column stem, higher is better, unit format)
METRICS: dict[str, tuple[str, bool, str]] = {
    "output_tok_s": ("output throughput", True, "{:,.0f} tok/s"),
    "ttft_ms_p95": ("TTFT p95", False, "{:,.0f} ms"),
    "usd_per_mtok": ("$/M output tokens", False, "${:,.3f}"),
}


def judged(before: EngineSnapshot, now: EngineSnapshot, key: str, threshold: float) -> Judgement | None:
    """The verdict on metric ``key`` between two comparable representatives; None where either has no number."""
    fb, fn = before.figure(key), now.figure(key)
    if fb is None or fn is None or fb.mean == 0:
        return None
    return judge(fb, fn, METRICS[key][1], threshold)


def _without_interval(before: Figure | None, now: Figure | None) -> str:
    """Which run's figure has no 95% interval, in words."""
    missing = [w for w, f in (("the earlier run's", before), ("this run's", now)) if not has_interval(f)]
    if len(missing) == 2:
        return "neither run's figure has a 95% interval"
    return f"{missing[0] if missing else 'neither'} figure has no 95% interval"


def _interval_cell(f: Figure | None) -> str:
    """A figure's 95% interval and n for the history table: ``6,251 to 7,197 (n=9)``, ``no interval (n=1)``, ``–``."""
    if f is None:
        return "–"
    if not has_interval(f):
        return f"no interval (n={f.n})"
    assert f.low is not None and f.high is not None
    high = f"{f.high:,.4g}" if math.isfinite(f.high) else "∞"
    return f"{f.low:,.4g} to {high} (n={f.n})"


INTERVAL_COLUMNS = {"capacity": "capacity 95% interval", "output_tok_s": "output tok/s 95% interval",
                    "ttft_ms_p95": "TTFT p95 95% interval", "usd_per_mtok": "$/M 95% interval"}  # fmt: skip


class ReviewResult(_Model):
    """The quarterly review of one run: what changed since the last run of the same workload, and flags."""

    workload: str
    current: RunSnapshot
    previous: RunSnapshot | None = Field(description="The latest earlier run of the workload, if any.")
    history: list[RunSnapshot] = Field(default_factory=list, description="Earlier runs, oldest first.")
    threshold: float
    flags: list[str] = Field(default_factory=list, description="Flipped decision and regressions (top of report).")
    notes: list[str] = Field(default_factory=list, description="Other changes: versions, configurations, noise.")

    @property
    def has_history(self) -> bool:
        """Whether an earlier run of the workload exists."""
        return self.previous is not None

    def headline(self) -> list[str]:
        """Sentences for the top of the report: flags first, then notes."""
        return self.flags + self.notes

    def changes(self) -> pd.DataFrame:
        """One row per configuration: version, throughput, TTFT p95 and $/Mtok, before and now, with changes.

        A change is a fraction (``changes_for_people`` writes it as %), with the 95% interval of the relative
        change (``change low``/``change high``; None without an interval on both sides) and a verdict
        (``helpers.review.significance.judge``: regression, within noise (±x%), no interval: not judged,
        worse within the threshold, better). All are None where the two representatives are not comparable
        (``not_comparable``), and the ``compared`` column says why.
        """
        if self.previous is None:
            return pd.DataFrame()
        rows = []
        for b, n in _pairs(self.previous.engines, self.current.engines):
            why = not_comparable(b, n) if b and n else None
            row: dict[str, Any] = {
                "label": (n or b).label,
                "engine": (n or b).engine,
                "version before": b.version if b else None,
                "version now": n.version if n else None,
                "measured as before": _measured_as(b) if b else None,
                "measured as now": _measured_as(n) if n else None,
            }
            for key, (stem, _, _) in METRICS.items():
                vb, vn = (getattr(b, key) if b else None), (getattr(n, key) if n else None)
                j = judged(b, n, key, self.threshold) if b and n and not why else None
                row[f"{stem} before"], row[f"{stem} now"] = vb, vn
                row[f"{stem} change"] = None if why else _rel(vb, vn)
                row[f"{stem} change low"] = j.low if j else None
                row[f"{stem} change high"] = j.high if j else None
                row[f"{stem} verdict"] = j.text if j else None
            row["compared"] = f"not comparable: {why}" if why else ("yes" if b and n else "–")
            rows.append(row)
        return pd.DataFrame(rows)

    def decision_table(self) -> pd.DataFrame:
        """Primary and backup of the earlier run and of this one."""
        p, c = self.previous, self.current
        return pd.DataFrame(
            [
                {"role": "primary", "before": p.primary if p else None, "now": c.primary},
                {"role": "backup", "before": p.backup if p else None, "now": c.backup},
                {"role": "primary family", "before": p.primary_family if p else None, "now": c.primary_family},
            ]
        )

    def history_table(self) -> pd.DataFrame:
        """Every run of the workload (earlier ones and this one) with each configuration's numbers."""
        runs = [*self.history, self.current]
        return pd.DataFrame(
            [
                {
                    "run": r.run_id,
                    "date (UTC)": r.created_utc,
                    "primary": r.primary,
                    **e.model_dump(exclude={"figures"}),
                    **{col: _interval_cell(e.figure(key)) for key, col in INTERVAL_COLUMNS.items()},
                }
                for r in runs
                for e in r.engines
            ]
        )


def _earlier(current: RunSnapshot, archive: list[RunSummary] | list[dict[str, Any]]) -> list[RunSnapshot]:
    """Archived runs of the same workload other than ``current``, older than it, oldest first."""
    out = []
    for s in archive:
        snap = snapshot(s)
        if snap.workload != current.workload or snap.run_id == current.run_id:
            continue
        if current.created_utc and snap.created_utc and snap.created_utc > current.created_utc:
            continue
        out.append(snap)
    return sorted(out, key=lambda r: (r.created_utc or "", r.run_id))


def _decision_flags(prev: RunSnapshot, cur: RunSnapshot, since: str) -> tuple[list[str], list[str]]:
    flags, notes = [], []
    if prev.primary and cur.primary and prev.primary != cur.primary:
        fam = (
            f" ({prev.primary_family} → {cur.primary_family})"
            if prev.primary_family and cur.primary_family and prev.primary_family != cur.primary_family
            else ""
        )
        if fam or not (prev.primary_family and prev.primary_family == cur.primary_family):
            flags.append(f"Decision flipped{since}: primary was {prev.primary}, now {cur.primary}{fam}.")
        else:
            notes.append(f"Primary configuration renamed or retuned{since}: {prev.primary} → {cur.primary} "
                         f"(same engine family, {cur.primary_family}).")  # fmt: skip
    if prev.backup != cur.backup:
        notes.append(f"Backup changed{since}: {prev.backup or 'none'} → {cur.backup or 'none'}.")
    return flags, notes


def _change_sentence(
    b: EngineSnapshot, n: EngineSnapshot, key: str, thr: float, since: str
) -> tuple[str | None, str | None]:
    """(flag, note) for one metric of two comparable representatives; (None, None) for nothing to say.

    A regression is a flag; a change beyond the threshold that the intervals do not show is a note (within
    noise, or not judged).
    """
    j = judged(b, n, key, thr)
    if j is None:
        return None, None
    stem, higher_better, fmt = METRICS[key]
    moved = f"{n.label} {stem} {fmt.format(getattr(b, key))} → {fmt.format(getattr(n, key))} ({j.change:+.0%}"
    if j.flagged:
        assert j.low is not None and j.high is not None
        return f"Regression: {moved}, {interval_text(j.low, j.high)}){since}, beyond the {thr:.0%} threshold.", None
    if (-j.change if higher_better else j.change) <= thr:
        return None, None
    if j.verdict == "not judged":
        without = _without_interval(b.figure(key), n.figure(key))
        return None, f"{moved}){since}: no interval: not judged ({without})."
    if j.verdict == "within noise":
        return None, f"{moved}){since}: {j.text}, not a regression."
    return None, None


def review(
    current_summary: RunSummary | dict[str, Any], archive: list[RunSummary] | list[dict[str, Any]], cfg: PlaybookConfig
) -> ReviewResult:
    """Compare this run with the latest earlier run of the same workload and hardware; flag what matters."""
    cur = snapshot(current_summary)
    history = _earlier(cur, archive)
    thr = cfg.review.regression_threshold
    if not history:
        note = (
            f"No earlier run of workload {cur.workload!r} in the archive: this run is the baseline for the next review."
        )
        return ReviewResult(workload=cur.workload, current=cur, previous=None, history=[], threshold=thr, notes=[note])
    alike = [r for r in history if not (r.hardware and cur.hardware and r.hardware != cur.hardware)]
    if not alike:
        others = sorted({str(r.hardware) for r in history})
        note = (
            f"No earlier run of workload {cur.workload!r} on this hardware ({cur.hardware}): the {len(history)} "
            f"earlier run(s) ran on {', '.join(others)} and are in the history, not compared (another GPU is not a "
            "regression); this run is the baseline for the next review on this hardware."
        )
        return ReviewResult(
            workload=cur.workload, current=cur, previous=None, history=history, threshold=thr, notes=[note]
        )
    prev = alike[-1]
    since = f" since run {prev.run_id}" + (f" ({prev.created_utc[:10]})" if prev.created_utc else "")
    flags, notes = _decision_flags(prev, cur, since)
    for b, n in _pairs(prev.engines, cur.engines):
        if b is None or n is None:
            e = b or n
            notes.append(f"Configuration {e.label} ({e.engine}) {'added' if b is None else 'no longer measured'}.")
            continue
        if b.version != n.version:
            notes.append(f"{n.label}: {n.engine} {b.version or 'version not recorded'} → "
                         f"{n.version or 'version not recorded'}.")  # fmt: skip
        why = not_comparable(b, n)
        if why:
            notes.append(f"{n.label}: not compared ({why}); the next review compares like with like.")
            continue
        for key in METRICS:
            flag, note = _change_sentence(b, n, key, thr, since)
            flags += [flag] if flag else []
            notes += [note] if note else []
        if b.concurrency != n.concurrency and b.concurrency and n.concurrency:
            notes.append(f"{n.label}: representative point moved from concurrency {b.concurrency} to "
                         f"{n.concurrency}; compare the numbers with that in mind.")  # fmt: skip
    if not flags:
        notes.insert(0, f"No flipped decision and no regression beyond {thr:.0%}{since} that the two runs' 95% "
                        "intervals show.")  # fmt: skip
    return ReviewResult(
        workload=cur.workload, current=cur, previous=prev, history=history, threshold=thr, flags=flags, notes=notes
    )
