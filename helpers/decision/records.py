"""The record of step 8: the risk register and the migration plan from primary to backup."""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import Field

from helpers.run.records import Artifact


class RiskRecord(Artifact):
    """Step 8's record, read by the run summary (``risk``) and the rollout (rollback criteria)."""

    artifact: ClassVar[str] = "risk.json"

    register: list[dict[str, Any]] = Field(default_factory=list, description="One row per (family, risk).")
    migration: dict[str, Any] = Field(default_factory=dict, description="From primary to backup: changes, effort.")
