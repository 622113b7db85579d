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
    return {
        "engine config": spec.label,
        "engine": adapter.display_name or adapter.name,
        "launcher": spec.launcher.kind,
        "status": state,
        "version": version,
        "detail": repo_relative(detail),
        "how to install": "" if state == "ready" else _install_hint(adapter, spec),
    }


def not_recorded_status(spec: EngineSpec) -> dict[str, object]:
    """The row of a configuration that the measuring host never checked, as a re-render from points shows it."""
    adapter = get_engine(spec.engine)
    return {
        "engine config": spec.label,
        "engine": adapter.display_name or adapter.name,
        "launcher": spec.launcher.kind,
        "status": "not recorded",
        "version": None,
        "detail": "not checked on the measuring host: step 4 ran there before this configuration joined the run"
        " (step 5 says how it ran)",
        "how to install": "",
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
