"""Checklist step 12: the latest known version of each engine, from a dated file the review maintains.

``helpers/data/engine_versions.yaml`` lists, per engine adapter, its package, the latest released
version, the date it was checked and where. Comparing a run's measured versions with that file (and
not with versions the user typed into the same config) is what makes "stale" mean something; an
entry of ``review.current_versions`` still overrides the file, and every row says which source it used.
``version_currency`` lists which measured engine versions are behind the latest known ones, and
``currency_sentences`` says so in short sentences.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
import yaml
from packaging.version import InvalidVersion, Version
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from helpers.core.config import PlaybookConfig
from helpers.core.errors import ConfigError
from helpers.core.paths import DATA_DIR
from helpers.review.snapshot import as_summary
from helpers.run.summary import RunSummary

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


def _version_key(v: str):

    try:
        return Version(v.lstrip("v"))
    except InvalidVersion:
        return None


def version_currency(
    summary: RunSummary | dict[str, Any], cfg: PlaybookConfig, known: dict[str, Any] | None = None
) -> pd.DataFrame:
    """Per measured configuration: its engine version against the latest known one, and whether stale.

    ``known`` is ``helpers.review.versions.latest_versions(cfg)`` (the dated file, the config on top), and
    the table then names each row's source; without it only ``cfg.review.current_versions`` is used.
    """
    if known is None:
        current = dict(cfg.review.current_versions)
        sources = dict.fromkeys(current, "review.current_versions in the config")
    else:
        current = {k: v.version for k, v in known.items()}
        sources = {k: v.source_text for k, v in known.items()}
    rows = []
    for e in as_summary(summary).engines:
        engine, measured = e.engine or "?", e.version
        latest = current.get(engine)
        if measured is None:
            status, note = "unknown", "the run recorded no version"
        elif latest is None:
            status, note = "unknown", f"no latest version on record for {engine!r} (engine_versions.yaml)"
        else:
            a, b = _version_key(measured), _version_key(latest)
            if measured == latest or (a is not None and a == b):
                status, note = "current", ""
            elif a is not None and b is not None and a > b:
                status, note = "current", f"newer than the listed {latest}"
            else:
                status, note = "stale", f"measured {measured}, current {latest}: re-run before relying on it"
        rows.append({"label": e.label, "engine": engine, "measured version": measured,
                     "current version": latest, "status": status, "note": note,
                     "source": sources.get(engine, "")})  # fmt: skip
    columns = ["label", "engine", "measured version", "current version", "status", "note", "source"]
    return pd.DataFrame(rows, columns=columns)


def currency_sentences(df: pd.DataFrame) -> list[str]:
    """Short sentences naming the stale results of a ``version_currency`` table (or saying none is)."""
    stale = df[df["status"] == "stale"] if not df.empty else df
    if df.empty:
        return ["No engine was measured in this run."]
    if stale.empty:
        unknown = int((df["status"] == "unknown").sum())
        tail = f" ({unknown} without a listed current version)" if unknown else ""
        return [f"No stale results: every measured engine version is current{tail}."]
    return [
        f"Stale: {r['label']} was measured on {r['engine']} {r['measured version']}; current is {r['current version']}."
        for _, r in stale.iterrows()
    ]
