"""Step 5's quality phase: each configuration answers the evaluation set while its engine is up; the gate judges.

``QUALITY`` (``QualityPhase``: ``measure_quality``) runs on the session right after the engine is healthy: the
configuration answers the evaluation set (``helpers.benchmark.quality.run_quality``) and the outcome is written to
``quality/<label>.json`` at once; a re-run keeps a stored outcome (resume), and the phase's ``records``
tell the stored engine result that it is not complete without one. On dummy or random weights
(``EngineSpec.placeholder_weights``) nothing is asked: the outcome says "not measured (dummy weights)".

``judge_gate`` compares every configuration with the reference configuration (``quality.reference``,
default: the first) into ``QualityGate`` (``quality.json``): accuracy with its 95% Wilson interval,
the paired difference in points with its 95% interval, agreement with the reference's outputs, and
the verdict against ``quality.threshold_points`` (seed 003 §5.4 pitfall 2: accept a loss under 2%
on your own test set). Beside each row stands what the seed expects of its precision (§5.1: FP8
< 1%, INT8 1-3%, INT4 3-8%). A configuration that fails the gate cannot be recommended
(``helpers.decision.scores.score_engines`` reads ``QualityGate.failed``).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import ClassVar

from pydantic import Field

from helpers.benchmark.quality import (
    QualityOutcome,
    QualityRow,
    judge_quality,
    load_eval_set,
    load_outcome,
    run_quality,
    unmeasured,
)
from helpers.benchmark.session import EngineSession, Phase
from helpers.core.config import EngineSpec, PlaybookConfig
from helpers.core.paths import resolve_repo_path
from helpers.core.text import label_slug
from helpers.run.records import Artifact, EngineResult, write_json_atomic

QUALITY_DIR = "quality"
NOT_MEASURED_DUMMY = "not measured (dummy weights)"
# seed 003 §5.1: accuracy loss of each weight precision against BF16/FP16, in points (low, high)
SEED_LOSS: dict[str, tuple[float, float]] = {"fp8": (0.0, 1.0), "int8": (1.0, 3.0), "int4": (3.0, 8.0)}


class GateRow(QualityRow):
    """The gate's verdict on one configuration, with its precision and what the seed expects of it."""

    precision: str = Field(default="", description="Weights and KV cache, e.g. 'bf16 weights, fp8 KV'.")
    speculative: str | None = Field(default=None, description="Speculative decoding, if the configuration uses it.")
    expected: str = Field(default="", description="The loss the seed expects of this precision (§5.1).")
    note: str = Field(default="", description="When the interval straddles the limit: the verdict is not sure.")


class QualityGate(Artifact):
    """Step 5's quality gate over every configuration (``quality.json``)."""

    artifact: ClassVar[str] = "quality.json"

    enabled: bool
    measured: bool = Field(default=False, description="A configuration was judged against a measured reference.")
    reason: str | None = Field(default=None, description="Why the gate measured nothing, in words.")
    reference: str | None = None
    threshold_points: float = 2.0
    eval_set: str = ""
    items: int = Field(default=0, description="Items each configuration was asked.")
    rows: list[GateRow] = Field(default_factory=list)

    def failed(self) -> dict[str, str]:
        """Configurations that failed the gate → why (the decision excludes them)."""
        return {r.label: f"failed the quality gate: {r.reason}" for r in self.rows if r.gate_passed is False}

    def row(self, label: str) -> GateRow | None:
        """The row of one configuration, if it has one."""
        return next((r for r in self.rows if r.label == label), None)


def outcome_path(run_dir: Path, label: str) -> Path:
    """Where one configuration's answers are stored in the run folder."""
    return Path(run_dir) / QUALITY_DIR / f"{label_slug(label)}.json"


async def measure_quality(session: EngineSession) -> QualityOutcome | None:
    """Ask the running engine the evaluation set greedily and store the outcome (kept on a re-run).

    Returns None when the gate is off (``quality.enabled: false``). Request failures count as wrong
    answers inside the outcome; they never stop the benchmark.
    """
    q, path = session.cfg.quality, outcome_path(session.run_dir, session.spec.label)
    if not q.enabled:
        return None
    if path.is_file():
        session.say(f"{session.spec.label}: quality answers already in this run folder, kept")
        return load_outcome(path)
    assert session.handle is not None
    t0 = time.monotonic()
    out = await run_quality(
        session.handle.base_url,
        session.adapter.served_model_name(session.cfg.model),
        resolve_repo_path(q.eval_set),
        api_key=session.handle.api_key,
        concurrency=q.concurrency,
        max_tokens=q.max_tokens,
        timeout_s=q.timeout_s,
        limit=q.max_items,
        dummy_weights=session.spec.placeholder_weights,
    )
    if not out.measurable:
        out.reason = NOT_MEASURED_DUMMY
    session.account("quality", t0)
    write_json_atomic(path, out.model_dump(mode="json"))
    if out.measurable:
        session.say(
            f"{session.spec.label}: quality {out.correct}/{out.n} right ({out.errors} failed) in {out.seconds:.0f} s"
        )
    return out


class QualityPhase(Phase):
    """The evaluation set, answered while the engine is up (no unit of the progress plan: it is short)."""

    name = "quality"

    def records(self, spec: EngineSpec, cfg: PlaybookConfig, run_dir: Path) -> list[Path]:
        """The stored answers a configuration owes the gate; none on dummy or random weights (nothing is asked)."""
        owes = cfg.quality.enabled and not spec.placeholder_weights
        return [outcome_path(run_dir, spec.label)] if owes else []

    async def run(self, session: EngineSession) -> bool:
        """Ask the evaluation set (``measure_quality``); never stops the benchmark."""
        await measure_quality(session)
        return True


QUALITY = QualityPhase()


def precision_text(spec: EngineSpec) -> str:
    """The configuration's weight and KV-cache precision in words."""
    k = spec.knobs
    weights = "fp8 weights" if k.quantization == "fp8" else "checkpoint weights"
    return weights + (", fp8 KV" if k.kv_cache_dtype == "fp8" else "")


def expected_loss(spec: EngineSpec) -> str:
    """What seed 003 §5.1 expects this configuration to lose against BF16, in words."""
    k = spec.knobs
    if k.quantization == "fp8" or k.kv_cache_dtype == "fp8":
        return f"< {SEED_LOSS['fp8'][1]:g} point (FP8, seed 003 §5.1)"
    if k.speculative is not None:
        return "none: drafts are verified, greedy outputs should match"
    return "none (same weights as the reference)" if k.quantization == "none" else ""


def _outcome(run_dir: Path, spec: EngineSpec, results: dict[str, EngineResult]) -> QualityOutcome:
    if spec.placeholder_weights:  # answers of random weights are noise, even where a run stored them
        return unmeasured(NOT_MEASURED_DUMMY)
    path = outcome_path(run_dir, spec.label)
    if path.is_file():
        return load_outcome(path)
    r = results.get(spec.label)
    why = f"engine {r.status}: {r.reason}" if r is not None and r.status != "ok" else "no answers stored"
    return unmeasured(f"not measured ({why})")


def _note(row: GateRow) -> str:
    if row.gate_passed is None or row.delta_low is None or row.delta_high is None:
        return ""
    limit = -row.threshold_points
    if row.delta_low < limit < row.delta_high:
        return (
            f"the 95% interval [{row.delta_low:+.1f}, {row.delta_high:+.1f}] points includes the limit "
            f"({limit:+g}): more items would be needed to be sure"
        )
    return ""


def judge_gate(cfg: PlaybookConfig, run_dir: Path, results: list[EngineResult]) -> QualityGate:
    """Judge every configuration's stored answers against the reference configuration's."""
    q = cfg.quality
    eval_path = resolve_repo_path(q.eval_set)
    gate = QualityGate(enabled=q.enabled, threshold_points=q.threshold_points, eval_set=eval_path.name)
    if not q.enabled:
        gate.reason = "not measured (quality.enabled is false)"
        return gate
    gate.items = len(load_eval_set(eval_path, q.max_items))
    gate.reference = q.reference or cfg.engines[0].label
    by_label = {r.label: r for r in results}
    outcomes = {s.label: _outcome(run_dir, s, by_label) for s in cfg.engines}
    specs = {s.label: s for s in cfg.engines}
    for row in judge_quality(outcomes, gate.reference, q.threshold_points, q.min_agreement):
        spec = specs[row.label]
        g = GateRow(
            **row.model_dump(),
            precision=precision_text(spec),
            speculative=spec.knobs.speculative.method if spec.knobs.speculative else None,
            expected=expected_loss(spec),
        )
        g.note = _note(g)
        gate.rows.append(g)
    gate.measured = any(r.gate_passed is not None and r.label != gate.reference for r in gate.rows)
    if all(s.placeholder_weights for s in cfg.engines):
        gate.reason = NOT_MEASURED_DUMMY
    elif not outcomes[gate.reference].measurable:
        gate.reason = f"reference {gate.reference!r} {outcomes[gate.reference].reason}"
    return gate
