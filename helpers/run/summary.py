"""``summary.json``: the versioned, typed record of a run, read by the reports index and the quarterly review.

Schema 2 (this module's ``RunSummary``) names, per engine configuration, the representative measurement
that every output uses (``helpers.benchmark.sla.representative``), its $/M output tokens as step 6
priced it and its quality-gate outcome (``quality.json``, which decides eligibility; the whole gate is
in ``quality``). A version the engine result lacks (a result rebuilt from its points) is taken from step
4's engine environments, and ``version_source`` says where it came from. ``read_summary`` also reads
schema 1 (runs archived before schema 2): their stored representative point becomes a ``Representative``
of source ``grid``, and its price is taken from the summary's cost section the way the old review did.
"""

from __future__ import annotations

import json
import math
import os
import platform
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from helpers import __version__
from helpers.benchmark.roofline import ratio_text
from helpers.benchmark.sla import Representative, representatives, settle_estimates
from helpers.core.config import PlaybookConfig, public_dict
from helpers.core.errors import PlaybookError
from helpers.core.secrets import known_secrets, redact_data
from helpers.core.text import knob_text
from helpers.run.folder import RunFolder
from helpers.run.records import Artifact, EngineResult

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
    notebook_seconds: dict[str, float] = Field(default_factory=dict)
    config: dict[str, Any] = Field(default_factory=dict)

    def engine(self, label: str) -> EngineSummary | None:
        """The configuration named ``label``, if the run has it."""
        return next((e for e in self.engines if e.label == label), None)


def host_facts() -> dict[str, Any]:
    """Minimal facts about this machine, used when step 2 wrote no inventory."""
    return {"cpu_cores": os.cpu_count(), "platform": platform.platform(), "gpus": []}


def points_table(results: list[EngineResult]) -> list[dict[str, Any]]:
    """Flat rows of every measured point, for tables, CSV exports and ``summary.json``."""
    rows = []
    for r in results:
        for p in r.points:
            row = p.model_dump(mode="json", exclude={"server", "gpu", "roofline", "knobs", "structure"})
            row.update({f"server_{k}": v for k, v in p.server.model_dump().items()})
            row.update({f"gpu_{k}": v for k, v in p.gpu.model_dump().items()})
            row["knobs"] = knob_text(p.knobs)
            row["roofline"] = ratio_text(p.roofline) if p.roofline else ""
            if p.structure is not None:  # a structured replay: its predicted prefix-cache hit rates, flat
                row["predicted_hit_rate_unbounded"] = p.structure.predicted_unbounded
                row["predicted_hit_rate_finite"] = p.structure.predicted_finite
            rows.append(row)
    return rows


def _read_json(folder: RunFolder, name: str) -> Any | None:
    p = folder.file(name)
    try:
        return json.loads(p.read_text(encoding="utf-8")) if p.is_file() else None
    except (OSError, ValueError):
        return None


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


def _version(result: EngineResult, recorded: dict[Any, Any]) -> tuple[str | None, str]:
    """The engine version of ``result``, else the one step 4 found for its configuration, with where it is from."""
    if result.version:
        return result.version, "engine result"
    found = recorded.get(result.label)
    return (str(found), "step 4 engine environment") if found else (None, "")


def _gate(quality: dict[str, Any] | None, label: str) -> str | None:
    """The quality gate's outcome for ``label`` from ``quality.json`` (None when the run has no gate record)."""
    if not isinstance(quality, dict):
        return None
    row = next((r for r in quality.get("rows") or [] if isinstance(r, dict) and r.get("label") == label), None)
    passed = row.get("gate_passed") if row else None
    return "not measured" if passed is None else ("passed" if passed else "FAILED")


def _created_utc(folder: RunFolder) -> str:
    """When the run was made: its earlier summary's date, else now.

    A resumed run, or one rendered again from its points, keeps its date: the review orders runs by it.
    """
    before = _read_json(folder, "summary.json")
    when = before.get("created_utc") if isinstance(before, dict) else None
    return when if isinstance(when, str) and when else datetime.now(UTC).isoformat(timespec="seconds")


def build_summary(run_dir: Path, cfg: PlaybookConfig) -> RunSummary:
    """Gather the run's records into one ``RunSummary`` (secrets redacted)."""
    folder = RunFolder(run_dir)
    results = settle_estimates(folder.engine_results(), cfg)
    reps = representatives(results, cfg)
    decision = _read_json(folder, "decision.json") or {}
    run_info = _read_json(folder, "run.json") or {}
    env = _read_json(folder, "environment.json") or {}
    cost = _read_json(folder, "cost.json")
    risk = _read_json(folder, "risk.json") or {}
    quality = _read_json(folder, "quality.json")
    env_versions = {e.get("engine config"): e.get("version") for e in env.get("engines") or [] if isinstance(e, dict)}
    engines = []
    for r in results:
        usd, src = _priced(cost, r.label)
        version, version_source = _version(r, env_versions)
        engines.append(
            EngineSummary(
                label=r.label, engine=r.engine, version=version, version_source=version_source,
                status=r.status, reason=r.reason, quality_gate=_gate(quality, r.label),
                cold_start_s=r.cold_start_s, ready_s=r.ready_s, kv_capacity_tokens=r.kv_capacity_tokens,
                tuned_knobs=r.tuned_knobs, command=r.command, representative=reps[r.label],
                usd_per_mtok_output=usd, cost_source=src,
            )
        )  # fmt: skip
    summary = RunSummary(
        run_id=folder.run_id,
        created_utc=_created_utc(folder),
        playbook_version=__version__,
        workload=cfg.name,
        model=cfg.model.served_name or cfg.model.path,
        hardware=env.get("hardware") or host_facts(),
        recommendation=Recommendation(
            primary=decision.get("primary"), backup=decision.get("backup"), sentences=decision.get("sentences", [])
        ),
        engines=engines,
        points=points_table(results),
        profile=_read_json(folder, "profile.json"),
        cost=cost,
        quality=quality,
        decision=decision or None,
        risk=risk.get("register") or [],
        review_flags=(_read_json(folder, "review.json") or {}).get("flags", []),
        failures=run_info.get("failures", {}),
        notebook_seconds=run_info.get("notebook_seconds", {}),
        config=public_dict(cfg),
    )
    clean = redact_data(summary.model_dump(mode="json"), known_secrets(cfg))
    return RunSummary.model_validate(clean)


def write_summary(run_dir: Path, cfg: PlaybookConfig) -> Path:
    """Write ``summary.json`` into the run folder."""
    return RunFolder(run_dir).save(build_summary(run_dir, cfg))


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
