"""Checklist step 12: the latest known version of each engine, from a dated file the review maintains.

``helpers/data/engine_versions.yaml`` lists, per engine adapter, its package, the latest released
version, the date it was checked and where. Comparing a run's measured versions with that file (and
not with versions the user typed into the same config) is what makes "stale" mean something; an
entry of ``review.current_versions`` still overrides the file, and every row says which source it used.
"""

from __future__ import annotations

from pathlib import Path

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from helpers.core.config import PlaybookConfig
from helpers.core.errors import ConfigError
from helpers.core.paths import DATA_DIR

ENGINE_VERSIONS_FILE = DATA_DIR / "engine_versions.yaml"
CONFIG_SOURCE = "review.current_versions in the config"


class KnownVersion(BaseModel):
    """The latest version of one engine known to the review, with when and where it was checked."""

    model_config = ConfigDict(extra="forbid")

    version: str
    package: str | None = None
    date: str | None = Field(default=None, description="When the version was checked (YYYY-MM-DD).")
    source: str = Field(description="Where the version was read.")

    @property
    def source_text(self) -> str:
        """Source and date in one phrase, for a table."""
        return f"{self.source}, checked {self.date}" if self.date else self.source


def load_engine_versions(path: Path | None = None) -> dict[str, KnownVersion]:
    """The dated file of latest engine versions (``helpers/data/engine_versions.yaml`` unless ``path``)."""
    p = Path(path) if path else ENGINE_VERSIONS_FILE
    data = yaml.safe_load(p.read_text(encoding="utf-8")) or {}
    out = {}
    for engine, entry in data.items():
        try:
            out[str(engine)] = KnownVersion.model_validate(entry)
        except ValidationError as err:
            raise ConfigError(f"{p.name}: {engine}: {err.errors()[0]['msg']}") from None
    return out


def latest_versions(cfg: PlaybookConfig, path: Path | None = None) -> dict[str, KnownVersion]:
    """The versions a review compares with: the dated file, with the config's ``current_versions`` on top."""
    known = load_engine_versions(path)
    for engine, version in cfg.review.current_versions.items():
        known[engine] = KnownVersion(version=version, source=CONFIG_SOURCE)
    return known
