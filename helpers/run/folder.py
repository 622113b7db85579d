"""The run folder: one object through which every step saves and loads its typed records.

A run folder (``reports/<run-id>/``) holds one JSON file per artifact (``Artifact.artifact`` names it),
the measured points under ``points/`` and the engine results under ``engines/``. Steps never read a
JSON dict of another step: they ask the folder for the record's model, e.g.
``RunFolder(run_dir).load(Profile)``, and get that model or None when the step has not run.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TypeVar

from pydantic import ValidationError

from helpers.core.atomic import write_text_atomic
from helpers.core.errors import PlaybookError
from helpers.run.records import Artifact, EngineResult, Point, load_engine_results, load_point, point_path

A = TypeVar("A", bound=Artifact)


class ArtifactError(PlaybookError):
    """An artifact in the run folder that exists but does not match its record."""


class RunFolder:
    """Typed access to one run folder."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)

    @property
    def run_id(self) -> str:
        """The run id (the folder's name)."""
        return self.path.name

    def file(self, model: type[Artifact] | str) -> Path:
        """Where ``model``'s artifact (or a named file) lives in this folder."""
        name = model if isinstance(model, str) else model.artifact
        if not name:
            raise ValueError(f"{model!r} names no artifact file")
        return self.path / name

    def save(self, record: Artifact) -> Path:
        """Write ``record`` to its artifact file (atomically: never half a file)."""
        p = self.file(type(record))
        write_text_atomic(p, record.model_dump_json(indent=2))
        return p

    def load(self, model: type[A]) -> A | None:
        """The stored record of ``model``, or None when the step that writes it has not run.

        A file that exists but does not validate raises ``ArtifactError`` naming the file.
        """
        p = self.file(model)
        if not p.is_file():
            return None
        try:
            return model.model_validate_json(p.read_text(encoding="utf-8"))
        except ValidationError as err:
            first = err.errors()[0]
            where = ".".join(str(x) for x in first["loc"]) or "<root>"
            raise ArtifactError(f"{p.name}: {where}: {first['msg']}") from None

    def has(self, model: type[Artifact]) -> bool:
        """Whether ``model``'s artifact exists."""
        return self.file(model).is_file()

    def engine_results(self) -> list[EngineResult]:
        """Every engine configuration's result (status, points), in file-name order."""
        return load_engine_results(self.path)

    def points(self, label: str, phase: str) -> list[Point]:
        """Every readable stored point of ``phase`` of configuration ``label``, in file-name order."""
        folder = point_path(self.path, label, phase, 0).parent
        found = (load_point(p) for p in sorted(folder.glob(f"{phase}-*.json")))
        return [p for p in found if p is not None]

    def write_json(self, name: str, data: object) -> Path:
        """Write plain data that is an export, not a record another step reads (e.g. a CSV's JSON twin)."""
        p = self.path / name
        write_text_atomic(p, json.dumps(data, indent=2, default=str))
        return p
