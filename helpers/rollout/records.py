"""The records of steps 9-10: which rollout files were written, and how each validated."""

from __future__ import annotations

from typing import ClassVar

from pydantic import BaseModel, ConfigDict, Field

from helpers.run.records import Artifact


class RolloutManifest(Artifact):
    """Step 9's record: the artifact files written for the primary, by the writer's keys (run-folder paths)."""

    artifact: ClassVar[str] = "rollout.json"

    files: dict[str, str] = Field(default_factory=dict, description="Artifact key → path inside the run folder.")


class Check(BaseModel):
    """One artifact's validation: valid, invalid, or partly checked (None), and by what."""

    model_config = ConfigDict(extra="forbid")

    ok: bool | None
    message: str


class RolloutValidation(Artifact):
    """Step 10's record: every artifact checked with the ecosystem's own tool."""

    artifact: ClassVar[str] = "rollout_validation.json"

    checks: dict[str, Check] = Field(default_factory=dict)
