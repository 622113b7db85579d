"""``summary.json``: the versioned, typed record of a run, read by the reports index and the quarterly review.

Schema 2 (this module's ``RunSummary``) names, per engine configuration, the representative measurement
that every output uses (``helpers.benchmark.sla.representative``, as step 6 saved it), its $/M output
tokens as step 6 priced it and its quality-gate outcome (``quality.json``, which decides eligibility; the
whole gate is in ``quality``). A version the engine result lacks (a result rebuilt from its points) is
taken from step 4's engine environments, and ``version_source`` says where it came from. It is written by
``helpers.report.run_summary`` from the saved records. ``read_summary`` also reads schema 1 (runs archived
before schema 2): their stored representative point becomes a ``Representative`` of source ``grid``, and
its price is taken from that summary's own cost section.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from helpers.core.errors import PlaybookError
from helpers.core.text import knob_text
from helpers.run.records import Artifact, Representative

SCHEMA = 2


class SummaryError(PlaybookError):
    """A ``summary.json`` that cannot be read as any known schema."""


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Recommendation(_Model):
    """The decision in short: primary and backup configuration, and the four-sentence answer."""

    primary: str | None = None
    backup: str | None = None
    sentences: list[str] = Field(default_factory=list)
    evidence: str | None = Field(
        default=None,
        description="What the measurement says of the two best (``decision.verdict_words.evidence_line``): 'measured, "
        "+x% [...] for A', 'equivalent (±x%)', 'not conclusive', with what decided; None: an older summary.",
    )


class EngineSummary(_Model):
    """One engine configuration of the run: what ran, and the measurement that stands for it."""

    label: str
    engine: str
    version: str | None = None
    version_source: str = Field(default="", description="engine result, step 4 engine environment, or empty.")
    status: str | None = None
    reason: str | None = None
    quality_gate: str | None = Field(
        default=None, description="passed, FAILED or not measured (step 5's quality gate); None: no gate recorded."
    )
    cold_start_s: float | None = None
    ready_s: float | None = None
    kv_capacity_tokens: int | None = None
    tuned_knobs: dict[str, Any] | None = None
    command: list[str] = Field(default_factory=list)
    representative: Representative | None = None
    usd_per_mtok_output: float | None = Field(default=None, description="$/M output tokens of the representative.")
    cost_source: str = ""


class RunSummary(Artifact):
    """The whole run in one record (schema 2)."""

    artifact: ClassVar[str] = "summary.json"
    model_config = ConfigDict(extra="forbid", populate_by_name=True, serialize_by_alias=True)

    schema_version: int = Field(default=SCHEMA, alias="schema")
    run_id: str
    created_utc: str | None = None
    playbook_version: str | None = None
    workload: str = "?"
    model: str | None = None
    hardware: dict[str, Any] = Field(default_factory=dict)
    recommendation: Recommendation = Field(default_factory=Recommendation)
    engines: list[EngineSummary] = Field(default_factory=list)
    points: list[dict[str, Any]] = Field(default_factory=list, description="Every measured point, flat.")
    profile: dict[str, Any] | None = None
    cost: dict[str, Any] | None = None
    quality: dict[str, Any] | None = Field(default=None, description="Step 5's quality gate (quality.json).")
    decision: dict[str, Any] | None = None
    risk: list[dict[str, Any]] = Field(default_factory=list)
    review_flags: list[str] = Field(default_factory=list)
    failures: dict[str, str] = Field(default_factory=dict)
    notebook_seconds: dict[str, float] = Field(
        default_factory=dict,
        description="Wall time of each notebook in the measuring run (run.json's; a re-render from points keeps it).",
    )
    config: dict[str, Any] = Field(default_factory=dict)

    def engine(self, label: str) -> EngineSummary | None:
        """The configuration named ``label``, if the run has it."""
        return next((e for e in self.engines if e.label == label), None)


def _priced(cost: dict[str, Any] | None, label: str, point: dict[str, Any] | None = None) -> tuple[float | None, str]:
    """$/M output tokens of ``label``'s representative from the run's cost section (step 6's ``cost.json``).

    Schema 2 reads the configuration's ``best`` row (its representative, priced). A schema-1 run's point
    is matched in the ``points`` table on label, phase, concurrency and knobs first, then its fleet row.
    """
    rows: list[dict[str, Any]] = []
    if point is not None:
        want = (label, point.get("phase"), point.get("concurrency"), knob_text(point.get("knobs"), ","))
        rows += [
            r
            for r in (cost or {}).get("points") or []
            if isinstance(r, dict)
            and (r.get("label"), r.get("phase"), r.get("concurrency"), r.get("knobs") or "") == want
        ]
    for table in ("best", "fleet", "best_points"):
        rows += [r for r in (cost or {}).get(table) or [] if isinstance(r, dict) and r.get("label") == label]
    for row in rows:
        v = row.get("usd_per_mtok_output")
        if isinstance(v, int | float) and not math.isnan(v):
            return float(v), "summary cost section"
    return None, "no priced measurement"


def _schema_1_representative(label: str, engine: str, point: dict[str, Any]) -> dict[str, Any] | None:
    """A schema-1 ``representative_point`` (whatever fields it has) as ``Representative`` data."""

    def fig(key: str) -> dict[str, float] | None:
        v = point.get(key)
        return {"mean": float(v)} if isinstance(v, int | float) and not isinstance(v, bool) else None

    if fig("output_tok_s") is None:
        return None
    return Representative(
        label=label,
        engine=engine,
        source="grid",
        meets_sla=bool(point.get("sla_met")),
        phase=point.get("phase"),
        concurrency=point.get("concurrency"),
        request_rate=fig("req_s"),
        output_tok_s=fig("output_tok_s"),
        total_tok_s=fig("total_tok_s"),
        ttft_ms_p95=fig("ttft_ms_p95"),
        itl_ms_p95=fig("itl_ms_p95"),
        requests=int(point.get("requests") or 0),
        knobs=point.get("knobs") or {},
        basis="schema-1 summary: the point that run compared at (tuned or target concurrency)",
    ).model_dump(mode="json")


def _from_schema_1(data: dict[str, Any]) -> dict[str, Any]:
    """A schema-1 summary as schema-2 data: representative points become ``Representative`` records."""
    out = {k: v for k, v in data.items() if k in RunSummary.model_fields or k == "schema"}
    out["schema"] = SCHEMA
    out.setdefault("run_id", data.get("_dir") or "?")
    engines = []
    for e in data.get("engines") or []:
        point = e.get("representative_point")
        label, engine = e.get("label") or "?", e.get("engine") or "?"
        rep = _schema_1_representative(label, engine, point) if isinstance(point, dict) else None
        usd, src = _priced(data.get("cost"), label, point if isinstance(point, dict) else None)
        keep = {k: e.get(k) for k in EngineSummary.model_fields if k in e and k != "representative"}
        engines.append({**keep, "label": label, "engine": engine, "representative": rep,
                        "usd_per_mtok_output": usd, "cost_source": src})  # fmt: skip
    out["engines"] = engines
    out["recommendation"] = {
        k: v for k, v in (data.get("recommendation") or {}).items() if k in Recommendation.model_fields
    }
    return out


def parse_summary(data: dict[str, Any], source: str = "summary") -> RunSummary:
    """A summary mapping of schema 1 or 2 as a ``RunSummary``; ``SummaryError`` names what does not fit."""
    if not isinstance(data, dict):
        raise SummaryError(f"{source}: not a JSON object")
    schema = data.get("schema", 1)
    try:
        if schema == 1:
            return RunSummary.model_validate(_from_schema_1(data))
        if schema == SCHEMA:
            return RunSummary.model_validate(data)
    except ValidationError as err:
        first = err.errors()[0]
        raise SummaryError(f"{source}: {'.'.join(map(str, first['loc']))}: {first['msg']}") from None
    raise SummaryError(f"{source}: unknown summary schema {schema!r}; this playbook reads 1 and {SCHEMA}")


def read_summary(path: str | Path) -> RunSummary:
    """Read a ``summary.json`` (schema 1 or 2)."""
    p = Path(path)
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        raise SummaryError(f"{p}: cannot read ({err})") from None
    return parse_summary(data, str(p))
