"""Engine test environments (checklist step 4): which configured engines are installed and runnable.

Each launcher answers in its own way: the python launcher imports the engine with its interpreter
and reads the version; the docker launcher looks for the image; the endpoint launcher probes the
URL. A missing engine is a row with the command that would install it, never a crash.
"""

from __future__ import annotations

import pandas as pd

from helpers.core.config import EngineSpec, PlaybookConfig
from helpers.core.paths import repo_relative
from helpers.engines import EngineAdapter, get_engine
from helpers.engines.recipes import setup_hint
from helpers.launchers import LAUNCHERS


def engine_status(spec: EngineSpec) -> dict[str, object]:
    """One engine configuration's readiness row; a path in the repository is written from its root (``./``)."""
    adapter = get_engine(spec.engine)
    state, version, detail = LAUNCHERS[spec.launcher.kind].readiness(adapter, spec)
    install = "" if state == "ready" else _install_hint(adapter, spec)
    return _row(spec, adapter, state, version, repo_relative(detail), install)


def not_recorded_status(spec: EngineSpec) -> dict[str, object]:
    """The row of a configuration that the measuring host never checked, as a re-render from points shows it."""
    detail = (
        "not checked on the measuring host: step 4 ran there before this configuration joined the run"
        " (step 5 says how it ran)"
    )
    return _row(spec, get_engine(spec.engine), "not recorded", None, detail, "")


def _row(
    spec: EngineSpec, adapter: EngineAdapter, status: str, version: str | None, detail: str, install: str
) -> dict[str, object]:
    """A row of the engine environments table (``EngineEnvironment``'s fields, by their column names)."""
    return {
        "engine config": spec.label,
        "engine": adapter.display_name or adapter.name,
        "launcher": spec.launcher.kind,
        "status": status,
        "version": version,
        "detail": detail,
        "how to install": install,
    }


def _install_hint(adapter: EngineAdapter, spec: EngineSpec) -> str:
    """The exact set-up command where a recipe exists and the python launcher is used, else the adapter's hint."""
    hint = setup_hint(adapter.name) if spec.launcher.kind == "python" else None
    if hint is None:
        return adapter.install_hint
    target = f".engines/{adapter.name}/bin/python"
    return hint if spec.launcher.python == target else f"{hint}; then launcher.python: {target}"


def engine_status_frame(cfg: PlaybookConfig) -> pd.DataFrame:
    """Readiness of every engine configuration of the config."""
    return pd.DataFrame([engine_status(e) for e in cfg.engines])
