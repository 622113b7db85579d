"""The one reader of a run folder's saved records, by type: what the summary, first page, review and index read.

``read(folder, Model)`` is the record or None; ``need(folder, Model)`` is the record or a
``MissingRecordError`` naming the step and the notebook that writes it. Nothing here computes a figure:
a record that is not there is said to be missing, never made again. The record types themselves
belong to their steps; callers pass them in, so this module stays below the steps.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from helpers.core.errors import PlaybookError
from helpers.run.folder import RunFolder
from helpers.run.records import Artifact, EngineResult
from helpers.run.summary import RunSummary, read_summary

A = TypeVar("A", bound=Artifact)
R = TypeVar("R", bound=BaseModel)

# which step, and which notebook, writes each record (ARCHITECTURE.md's records table)
WRITTEN_BY: dict[str, tuple[str, str]] = {
    "profile.json": ("step 1", "playbook/01_workload.ipynb"),
    "environment.json": ("steps 2-4", "playbook/02_environment.ipynb"),
    "memory_plan.json": ("steps 2-4", "playbook/02_environment.ipynb"),
    "prediction.json": ("steps 2-4", "playbook/02_environment.ipynb"),
    "quality.json": ("step 5", "playbook/03_benchmark.ipynb"),
    "cost.json": ("step 6", "playbook/04_cost.ipynb"),
    "decision.json": ("step 7", "playbook/05_decision.ipynb"),
    "risk.json": ("step 8", "playbook/05_decision.ipynb"),
    "rollout.json": ("step 9", "playbook/06_rollout.ipynb"),
    "review.json": ("step 11", "playbook/07_review.ipynb"),
    "summary.json": ("the runner", "`playbook run` (helpers.tools.runner)"),
}


class MissingRecordError(PlaybookError):
    """A record a later step needs is not in the run folder: the message names the step that writes it."""

    def __init__(self, artifact: str, needed_by: str = "") -> None:
        step, notebook = WRITTEN_BY.get(artifact, ("an earlier step", "the notebook that writes it"))
        who = f" ({needed_by} reads it)" if needed_by else ""
        super().__init__(f"{artifact} is missing{who}: run {step} first ({notebook}); nothing is recomputed here")
        self.artifact = artifact


def folder_of(run: RunFolder | str | Path) -> RunFolder:
    """``run`` as a ``RunFolder``."""
    return run if isinstance(run, RunFolder) else RunFolder(run)


def read(run: RunFolder | str | Path, model: type[A]) -> A | None:
    """The saved record of ``model`` in ``run``, or None when its step has not run."""
    return folder_of(run).load(model)


def need(run: RunFolder | str | Path, model: type[A], needed_by: str = "") -> A:
    """The saved record of ``model`` in ``run``; ``MissingRecordError`` naming its step when it is not there."""
    record = read(run, model)
    if record is None:
        raise MissingRecordError(model.artifact, needed_by)
    return record


def engine_results(run: RunFolder | str | Path) -> list[EngineResult]:
    """Step 5's records: every engine configuration's result with its points, as saved."""
    return folder_of(run).engine_results()


def embedded(data: dict[str, Any] | None, model: type[R]) -> R | None:
    """A record that another record holds as JSON data (``summary.json``'s ``cost``), typed; None if it does not fit."""
    if not isinstance(data, dict):
        return None
    try:
        return model.model_validate(data)
    except ValidationError:
        return None


def run_summary(run: RunFolder | str | Path) -> RunSummary:
    """The run's ``summary.json`` (schema 1 or 2); ``SummaryError`` when it is missing or reads as neither."""
    return read_summary(folder_of(run).file(RunSummary))
