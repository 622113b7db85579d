"""The record of step 8: the risk register and the migration plan from primary to backup."""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import ConfigDict, Field

from helpers.run.records import Artifact


class RiskRecord(Artifact):
    """Step 8's record, read by the run summary (``risk``) and the rollout (rollback criteria)."""

    artifact: ClassVar[str] = "risk.json"
    model_config = ConfigDict(extra="forbid", populate_by_name=True, serialize_by_alias=True)

    # saved as ``register``; the attribute is ``rows`` (``register`` is a method of every pydantic model)
    rows: list[dict[str, Any]] = Field(
        default_factory=list, alias="register", description="One row per (family, risk)."
    )
    migration: dict[str, Any] = Field(default_factory=dict, description="From primary to backup: changes, effort.")
