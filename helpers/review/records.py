"""The record of step 11: the review's flags and notes, read by the report's first lines and the summary."""

from __future__ import annotations

from typing import ClassVar

from pydantic import Field

from helpers.run.records import Artifact


class ReviewRecord(Artifact):
    """What step 11 found against earlier runs of the same workload."""

    artifact: ClassVar[str] = "review.json"

    flags: list[str] = Field(default_factory=list, description="Flipped decisions and regressions.")
    notes: list[str] = Field(default_factory=list, description="Other changes: versions, configurations.")
    headline: list[str] = Field(default_factory=list, description="Flags, then notes: the report's first lines.")
