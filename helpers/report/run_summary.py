"""Writing ``summary.json`` (``run.summary.RunSummary``) from the run folder's saved records, and nothing else.

Every figure is read through ``helpers.run.reader`` from the record of the step that computed it: each
configuration's representative and its $/M output tokens from step 6's ``cost.json`` (the priced row whose
``representative`` is that measurement), the decision, risk, quality gate and review from theirs. A cost
record saved before step 6 kept the representatives whole is read with the representatives of the run's
earlier ``summary.json``; where neither has one, the configuration's representative is not recorded
(``cost_source`` says so). Nothing here computes a representative or a price.
"""

from __future__ import annotations

import os
import platform
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from helpers import __version__
from helpers.benchmark.quality_phase import QualityGate
from helpers.core.config import PlaybookConfig, public_dict
from helpers.core.secrets import known_secrets, redact_data
from helpers.cost.records import CostAnalysis
from helpers.decision.records import RiskRecord
from helpers.decision.tree import DecisionResult
from helpers.decision.verdict_words import evidence_line
from helpers.environment.records import EnvironmentRecord
from helpers.report.points import points_table
from helpers.review.records import ReviewRecord
from helpers.run import reader
from helpers.run.folder import RunFolder
from helpers.run.records import EngineResult, Representative
from helpers.run.rerender import run_notes
from helpers.run.summary import EngineSummary, Recommendation, RunSummary, SummaryError, read_summary
from helpers.workload.profile import Profile

NOT_RECORDED = "not recorded (step 6's record has no priced representative for it)"


def host_facts() -> dict[str, Any]:
    """Minimal facts about this machine, used when step 2 wrote no inventory."""
    return {"cpu_cores": os.cpu_count(), "platform": platform.platform(), "gpus": []}


def _earlier(folder: RunFolder) -> RunSummary | None:
    """The run's earlier ``summary.json`` (a resumed or re-rendered run), if it reads."""
    path = folder.file(RunSummary)
    try:
        return read_summary(path) if path.is_file() else None
    except SummaryError:
        return None


def representatives_of(cost: CostAnalysis | None, earlier: RunSummary | None) -> dict[str, Representative]:
    """Each configuration's representative as saved: step 6's record, else the run's earlier summary."""
    if cost is not None and cost.representatives is not None:
        return {r.label: r for r in cost.representatives}
    if earlier is not None:
        return {e.label: e.representative for e in earlier.engines if e.representative is not None}
    return {}


def priced(cost: CostAnalysis | None, rep: Representative | None) -> tuple[float | None, str]:
    """$/M output tokens of ``rep`` as step 6 priced it: the priced row keyed by that same representative."""
    if cost is None or rep is None:
        return None, "no priced measurement"
    for row in [*cost.best, *cost.fleet]:
        if row.representative == rep.key and row.usd_per_mtok_output is not None:
            return row.usd_per_mtok_output, "summary cost section"
    return None, NOT_RECORDED if rep.source != "none" else "no priced measurement"


def _version(result: EngineResult, env: EnvironmentRecord | None) -> tuple[str | None, str]:
    """The engine version of ``result``, else the one step 4 found for its configuration, with where it is from."""
    if result.version:
        return result.version, "engine result"
    found = env.version_of(result.label) if env else None
    return (found, "step 4 engine environment") if found else (None, "")


def _gate(quality: QualityGate | None, label: str) -> str | None:
    """The quality gate's outcome for ``label`` (None when the run has no gate record)."""
    if quality is None:
        return None
    row = quality.row(label)
    passed = row.gate_passed if row else None
    return "not measured" if passed is None else ("passed" if passed else "FAILED")


def _created_utc(earlier: RunSummary | None) -> str:
    """When the run was made: its earlier summary's date, else now (the review orders runs by it)."""
    when = earlier.created_utc if earlier is not None else None
    return when or datetime.now(UTC).isoformat(timespec="seconds")


def _dump(record: Any) -> dict[str, Any] | None:
    return record.model_dump(mode="json", by_alias=True) if record is not None else None


def _engines(
    results: list[EngineResult],
    cost: CostAnalysis | None,
    earlier: RunSummary | None,
    env: EnvironmentRecord | None,
    quality: QualityGate | None,
) -> list[EngineSummary]:
    """One ``EngineSummary`` per engine result, its figures from the saved records."""
    reps = representatives_of(cost, earlier)
    out = []
    for r in results:
        rep = reps.get(r.label)
        usd, src = priced(cost, rep)
        version, version_source = _version(r, env)
        out.append(
            EngineSummary(
                label=r.label, engine=r.engine, version=version, version_source=version_source,
                status=r.status, reason=r.reason, quality_gate=_gate(quality, r.label),
                cold_start_s=r.cold_start_s, ready_s=r.ready_s, kv_capacity_tokens=r.kv_capacity_tokens,
                tuned_knobs=r.tuned_knobs, command=r.command, representative=rep,
                usd_per_mtok_output=usd, cost_source=src,
            )
        )  # fmt: skip
    return out


def build_summary(run_dir: Path, cfg: PlaybookConfig) -> RunSummary:
    """Gather the run's saved records into one ``RunSummary`` (secrets redacted)."""
    folder = RunFolder(run_dir)
    earlier = _earlier(folder)
    cost = reader.read(folder, CostAnalysis)
    decision, env = reader.read(folder, DecisionResult), reader.read(folder, EnvironmentRecord)
    risk, review = reader.read(folder, RiskRecord), reader.read(folder, ReviewRecord)
    quality, results = reader.read(folder, QualityGate), reader.engine_results(folder)
    run_info = run_notes(run_dir)  # the runner's own notes (failures, timings), not a step's record
    summary = RunSummary(
        run_id=folder.run_id,
        created_utc=_created_utc(earlier),
        playbook_version=__version__,
        workload=cfg.name,
        model=cfg.model.served_name or cfg.model.path,
        hardware=(_dump(env.hardware) if env is not None and env.hardware else None) or host_facts(),
        recommendation=Recommendation(
            primary=decision.primary if decision else None,
            backup=decision.backup if decision else None,
            sentences=decision.sentences if decision else [],
            evidence=evidence_line(decision.verdict.model_dump()) if decision and decision.verdict else None,
        ),
        engines=_engines(results, cost, earlier, env, quality),
        points=points_table(results),
        profile=_dump(reader.read(folder, Profile)),
        cost=_dump(cost),
        quality=_dump(quality),
        decision=_dump(decision),
        risk=risk.rows if risk is not None else [],
        review_flags=review.flags if review is not None else [],
        failures=run_info.get("failures", {}),
        notebook_seconds=run_info.get("notebook_seconds", {}),
        config=public_dict(cfg),
    )
    clean = redact_data(summary.model_dump(mode="json"), known_secrets(cfg))
    return RunSummary.model_validate(clean)


def write_summary(run_dir: Path, cfg: PlaybookConfig) -> Path:
    """Write ``summary.json`` into the run folder."""
    return RunFolder(run_dir).save(build_summary(run_dir, cfg))
