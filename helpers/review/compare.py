"""Checklist steps 11-12: the quarterly review against archived runs, trends, and version currency.

``review`` compares this run's ``summary.json`` with the earlier archived runs of the same workload
(``helpers.report.index.archived_runs``): engine versions, throughput and TTFT p95 at each configuration's
representative (tuned) point, $/M output tokens, and the recommendation. A flipped decision, or a
throughput, TTFT or cost regression larger than ``cfg.review.regression_threshold``, becomes a short
sentence for the top of the report. ``version_currency`` lists which measured engine versions are
behind ``cfg.review.current_versions`` (step 12). Trends over time are in ``helpers.review.trend``.
"""

from __future__ import annotations

import math
from types import SimpleNamespace
from typing import Any

import pandas as pd
from packaging.version import InvalidVersion, Version
from pydantic import BaseModel, ConfigDict, Field

from helpers.core.config import Cost, PlaybookConfig
from helpers.core.errors import PlaybookError
from helpers.cost.compute import cost_per_million, family_of, price_for
from helpers.run.summary import EngineSummary, RunSummary, parse_summary


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class EngineSnapshot(_Model):
    """One configuration of one archived run, at its representative point."""

    label: str
    engine: str
    family: str = ""
    version: str | None = None
    status: str | None = None
    representative: str | None = Field(default=None, description="Identity of the representative measurement.")
    source: str | None = Field(default=None, description="capacity, fixed, grid or none: what kind it is.")
    concurrency: int | None = None
    output_tok_s: float | None = None
    ttft_ms_p95: float | None = None
    usd_per_mtok: float | None = Field(default=None, description="$/M output tokens at the representative point.")
    cost_source: str = ""


class RunSnapshot(_Model):
    """What a review needs from one ``summary.json``."""

    run_id: str
    created_utc: str | None = None
    workload: str
    primary: str | None = None
    backup: str | None = None
    primary_family: str | None = None
    engines: list[EngineSnapshot] = Field(default_factory=list)


def _price(summary: RunSummary, engine: str, label: str, knobs: dict[str, Any]) -> tuple[float | None, str]:
    """$/hour of one replica of ``label`` as the archived config priced it (price × tensor-parallel GPUs)."""
    conf = summary.config or {}
    try:
        cost = Cost.model_validate(conf.get("cost") or {})
        price, source, _ = price_for(engine, SimpleNamespace(cost=cost))  # price_for reads only cfg.cost
    except (PlaybookError, ValueError) as err:
        return None, f"no price: {err}"
    gpus = knobs.get("tensor_parallel")
    if not gpus:
        spec = next((e for e in conf.get("engines") or [] if e.get("label") == label), {})
        gpus = (spec.get("knobs") or {}).get("tensor_parallel") or 1
    return price * int(gpus), f"computed: {int(gpus)} × {source}"


def _as_summary(summary: RunSummary | dict[str, Any]) -> RunSummary:
    return summary if isinstance(summary, RunSummary) else parse_summary(summary)


def _engine_snapshot(summary: RunSummary, e: EngineSummary) -> EngineSnapshot:
    """One configuration at its representative measurement (the same one every output uses)."""
    rep = e.representative
    out = rep.output_tok_s.mean if rep is not None and rep.output_tok_s is not None else None
    usd, source = e.usd_per_mtok_output, e.cost_source or "summary"
    if usd is None and out:
        hourly, source = _price(summary, e.engine, e.label, rep.knobs if rep else {})
        usd = None if hourly is None else cost_per_million(hourly, out)
        usd = None if usd is None or math.isnan(usd) else usd
    elif usd is None:
        source = "no measured point"
    return EngineSnapshot(
        label=e.label,
        engine=e.engine,
        family=family_of(e.engine),
        version=e.version,
        status=e.status,
        representative=rep.key if rep is not None else None,
        source=rep.source if rep is not None else None,
        concurrency=rep.concurrency if rep is not None else None,
        output_tok_s=out,
        ttft_ms_p95=rep.ttft_ms_p95.mean if rep is not None and rep.ttft_ms_p95 is not None else None,
        usd_per_mtok=usd,
        cost_source=source,
    )


def snapshot(summary: RunSummary | dict[str, Any]) -> RunSnapshot:
    """The review's view of one run summary (schema 1 or 2)."""
    s = _as_summary(summary)
    rec = s.recommendation
    engines = [_engine_snapshot(s, e) for e in s.engines]
    fam = (s.decision or {}).get("primary_family")
    if not fam and rec.primary:
        fam = next((e.family for e in engines if e.label == rec.primary), None)
    return RunSnapshot(
        run_id=s.run_id,
        created_utc=s.created_utc,
        workload=s.workload,
        primary=rec.primary,
        backup=rec.backup,
        primary_family=fam or None,
        engines=engines,
    )


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


MEASURED_AS = {"capacity": "capacity trials", "fixed": "fixed-load trials", "grid": "a grid point", "none": "nothing"}


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


def changes_for_people(df: pd.DataFrame) -> pd.DataFrame:
    """``ReviewResult.changes()`` with every change column as a percentage (never formatted as money)."""
    out = df.copy()
    for col in (c for c in out.columns if str(c).endswith(" change")):
        out[col] = out[col].map(change_text).astype(object)
    return out


# metric → (column stem, higher is better, unit format)
METRICS: dict[str, tuple[str, bool, str]] = {
    "output_tok_s": ("output throughput", True, "{:,.0f} tok/s"),
    "ttft_ms_p95": ("TTFT p95", False, "{:,.0f} ms"),
    "usd_per_mtok": ("$/M output tokens", False, "${:,.3f}"),
}


class ReviewResult(_Model):
    """The quarterly review of one run: what changed since the last run of the same workload, and flags."""

    workload: str
    current: RunSnapshot
    previous: RunSnapshot | None = Field(description="The latest earlier run of the workload, if any.")
    history: list[RunSnapshot] = Field(default_factory=list, description="Earlier runs, oldest first.")
    threshold: float
    flags: list[str] = Field(default_factory=list, description="Flipped decision and regressions (top of report).")
    notes: list[str] = Field(default_factory=list, description="Other changes: versions, configurations.")

    @property
    def has_history(self) -> bool:
        """Whether an earlier run of the workload exists."""
        return self.previous is not None

    def headline(self) -> list[str]:
        """Sentences for the top of the report: flags first, then notes."""
        return self.flags + self.notes

    def changes(self) -> pd.DataFrame:
        """One row per configuration: version, throughput, TTFT p95 and $/Mtok, before and now, with changes.

        A change is a fraction (``changes_for_people`` writes it as %); it is None where the two representatives
        are not comparable (``not_comparable``), and the ``compared`` column says why.
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
                row[f"{stem} before"], row[f"{stem} now"] = vb, vn
                row[f"{stem} change"] = None if why else _rel(vb, vn)
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
                {"run": r.run_id, "date (UTC)": r.created_utc, "primary": r.primary, **e.model_dump()}
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


def review(
    current_summary: RunSummary | dict[str, Any], archive: list[RunSummary] | list[dict[str, Any]], cfg: PlaybookConfig
) -> ReviewResult:
    """Compare this run with the latest earlier run of the same workload in ``archive``; flag what matters."""
    cur = snapshot(current_summary)
    history = _earlier(cur, archive)
    thr = cfg.review.regression_threshold
    if not history:
        note = (
            f"No earlier run of workload {cur.workload!r} in the archive: this run is the baseline for the next review."
        )
        return ReviewResult(workload=cur.workload, current=cur, previous=None, history=[], threshold=thr, notes=[note])
    prev = history[-1]
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
        for key, (stem, higher_better, fmt) in METRICS.items():
            vb, vn = getattr(b, key), getattr(n, key)
            change = _rel(vb, vn)
            if change is None:
                continue
            worse = -change if higher_better else change
            if worse > thr:
                flags.append(
                    f"Regression: {n.label} {stem} {fmt.format(vb)} → {fmt.format(vn)} ({change:+.0%}){since}, "
                    f"beyond the {thr:.0%} threshold."
                )
        if b.concurrency != n.concurrency and b.concurrency and n.concurrency:
            notes.append(f"{n.label}: representative point moved from concurrency {b.concurrency} to "
                         f"{n.concurrency}; compare the numbers with that in mind.")  # fmt: skip
    if not flags:
        notes.insert(0, f"No flipped decision and no regression beyond {thr:.0%}{since}.")
    return ReviewResult(
        workload=cur.workload, current=cur, previous=prev, history=history, threshold=thr, flags=flags, notes=notes
    )


def _version_key(v: str):

    try:
        return Version(v.lstrip("v"))
    except InvalidVersion:
        return None


def version_currency(
    summary: RunSummary | dict[str, Any], cfg: PlaybookConfig, known: dict[str, Any] | None = None
) -> pd.DataFrame:
    """Per measured configuration: its engine version against the latest known one, and whether stale.

    ``known`` is ``helpers.review.versions.latest_versions(cfg)`` (the dated file, the config on top), and
    the table then names each row's source; without it only ``cfg.review.current_versions`` is used.
    """
    if known is None:
        current = dict(cfg.review.current_versions)
        sources = dict.fromkeys(current, "review.current_versions in the config")
    else:
        current = {k: v.version for k, v in known.items()}
        sources = {k: v.source_text for k, v in known.items()}
    rows = []
    for e in _as_summary(summary).engines:
        engine, measured = e.engine or "?", e.version
        latest = current.get(engine)
        if measured is None:
            status, note = "unknown", "the run recorded no version"
        elif latest is None:
            status, note = "unknown", f"no latest version on record for {engine!r} (engine_versions.yaml)"
        else:
            a, b = _version_key(measured), _version_key(latest)
            if measured == latest or (a is not None and a == b):
                status, note = "current", ""
            elif a is not None and b is not None and a > b:
                status, note = "current", f"newer than the listed {latest}"
            else:
                status, note = "stale", f"measured {measured}, current {latest}: re-run before relying on it"
        rows.append({"label": e.label, "engine": engine, "measured version": measured,
                     "current version": latest, "status": status, "note": note,
                     "source": sources.get(engine, "")})  # fmt: skip
    columns = ["label", "engine", "measured version", "current version", "status", "note", "source"]
    return pd.DataFrame(rows, columns=columns)


def currency_sentences(df: pd.DataFrame) -> list[str]:
    """Short sentences naming the stale results of a ``version_currency`` table (or saying none is)."""
    stale = df[df["status"] == "stale"] if not df.empty else df
    if df.empty:
        return ["No engine was measured in this run."]
    if stale.empty:
        unknown = int((df["status"] == "unknown").sum())
        tail = f" ({unknown} without a listed current version)" if unknown else ""
        return [f"No stale results: every measured engine version is current{tail}."]
    return [
        f"Stale: {r['label']} was measured on {r['engine']} {r['measured version']}; current is {r['current version']}."
        for _, r in stale.iterrows()
    ]
