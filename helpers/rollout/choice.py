"""The configuration to roll out: the decision's primary, with its tuned knobs, measured facts and backup.

Every rollout artifact (launch command, alerts, dashboard, manifests, canary plan) is built from one
``Chosen``. The benchmark may have served placeholder weights (``knobs.dummy_weights``, or a random-weight
folder through ``engine_options: {weights: random}``, LMDeploy's way); a pilot serves the real model, so the
chosen spec always has ``dummy_weights`` off and no ``weights: random`` option.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from helpers.benchmark.sla import Representative, representative, settle_estimates
from helpers.core.config import EngineSpec, Knobs, PlaybookConfig
from helpers.core.errors import PlaybookError
from helpers.engines import EngineAdapter, get_engine
from helpers.run.records import EngineResult

if TYPE_CHECKING:
    from helpers.decision.tree import DecisionResult


class RolloutError(PlaybookError):
    """The rollout artifacts cannot be built (no chosen engine, or one that cannot be deployed)."""


@dataclass
class Chosen:
    """The configuration to deploy and what the run measured for it."""

    spec: EngineSpec  # the config entry with tuned knobs applied and real weights (no dummy, no random)
    adapter: EngineAdapter
    workload: str
    served_name: str
    result: EngineResult | None = None
    representative: Representative | None = None
    tuned_applied: dict[str, Any] = field(default_factory=dict)
    backup: str | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def version(self) -> str | None:
        """The engine version the run measured, else the one the config declares (``playbook check`` compares it)."""
        return (self.result.version if self.result else None) or self.spec.version

    @property
    def name(self) -> str:
        """A Kubernetes-safe name (DNS-1123 label) for this workload and configuration."""
        return dns_label(f"{self.workload}-{self.spec.label}")


def dns_label(text: str, limit: int = 50) -> str:
    """``text`` as a DNS-1123 label: lower case, alphanumerics and '-', at most ``limit`` characters."""
    s = re.sub(r"[^a-z0-9-]+", "-", text.lower()).strip("-")
    s = re.sub(r"-{2,}", "-", s)[:limit].strip("-")
    return s or "engine"


def _knob_fields() -> set[str]:
    return set(Knobs.model_fields)


def real_weights_options(options: dict[str, str]) -> dict[str, str]:
    """``engine_options`` without the random weights: ``weights: random`` and ``weights_root``, where they were written.

    (``config_engines.placeholder_weights`` reads ``weights: random`` as placeholder weights.)
    """
    random = options.get("weights") == "random"
    return {k: v for k, v in options.items() if not (random and k in ("weights", "weights_root"))}


def apply_tuned(spec: EngineSpec, tuned: dict[str, Any] | None) -> tuple[EngineSpec, dict[str, Any]]:
    """``spec`` with the tuned knob values (those that are ``Knobs`` fields) applied and real weights.

    Real weights: dummy weights off and ``engine_options.weights: random`` dropped, so the pilot loads the
    checkpoint (``spec.placeholder_weights`` is False for the result).
    """
    applied = {k: v for k, v in (tuned or {}).items() if k in _knob_fields()}
    knobs = Knobs.model_validate({**spec.knobs.model_dump(), **applied, "dummy_weights": False})
    update = {"knobs": knobs, "engine_options": real_weights_options(spec.engine_options)}
    return spec.model_copy(update=update), applied


def _find_spec(cfg: PlaybookConfig, decision: DecisionResult) -> EngineSpec:
    """The config entry the decision chose: by label, else the first entry of the chosen family."""
    for spec in cfg.engines:
        if spec.label == decision.primary:
            return spec
    for spec in cfg.engines:
        if get_engine(spec.engine).family == decision.primary_family:
            return spec
    raise RolloutError(
        f"decision primary {decision.primary!r} (family {decision.primary_family!r}) matches no entry of "
        f"the config's engines ({', '.join(e.label for e in cfg.engines)}); add one to roll it out"
    )


def choose(cfg: PlaybookConfig, decision: DecisionResult, results: list[EngineResult]) -> Chosen:
    """The decision's primary configuration, ready to deploy, with its measured result and tuned point."""
    spec = _find_spec(cfg, decision)
    adapter = get_engine(spec.engine)
    if not adapter.module and not adapter.default_image and not spec.launcher.image:
        raise RolloutError(
            f"engine {spec.engine!r} of {spec.label!r} is not started by the playbook (no module, no image): "
            "it cannot be deployed from here"
        )
    result = next((r for r in settle_estimates(results, cfg) if r.label == spec.label), None)
    tuned, applied = apply_tuned(spec, result.tuned_knobs if result else None)
    rep = representative(result, cfg) if result is not None else None
    notes: list[str] = []
    if rep is not None and rep.source != "none" and not rep.meets_sla:
        notes.append(
            f"The trials that stand for {spec.label!r} missed the SLA (TTFT p95 ≤ {cfg.sla.ttft_p95_ms:g} ms): the "
            "baseline below is that measurement, and the pilot should start with less load per replica."
        )
    if spec.placeholder_weights:
        notes.append(
            "The benchmark served random weights (dummy loader or a random-weight folder); the rollout loads the real "
            "checkpoint from the model volume, so check quality on real traffic during the pilot."
        )
    if result is None:
        notes.append(f"No measured result for {spec.label!r}: flags are the configured ones, not tuned.")
    elif not applied:
        notes.append(f"{spec.label!r} has no tuned knobs (no tuning run within the SLA): configured flags are used.")
    return Chosen(
        spec=tuned,
        adapter=adapter,
        workload=cfg.name,
        served_name=adapter.served_model_name(cfg.model),
        result=result,
        representative=rep,
        tuned_applied=applied,
        backup=decision.backup,
        notes=notes,
    )
