"""Engine test environments (checklist step 4): which configured engines are installed and runnable.

Each launcher answers in its own way: the python launcher imports the engine with its interpreter
and reads the version; the docker launcher looks for the image; the endpoint launcher probes the
URL. A missing engine is a row with the command that would install it, never a crash.
"""

from __future__ import annotations

import subprocess

import httpx
import pandas as pd

from helpers.config import EngineSpec, PlaybookConfig
from helpers.engines import get_engine
from helpers.launchers import LAUNCHERS
from helpers.launchers.endpoint import api_key
from helpers.launchers.python import interpreter


def _python(spec: EngineSpec) -> tuple[str, str | None, str]:
    py = interpreter(spec.launcher)
    if not py.exists():
        return "missing", None, f"interpreter {py} does not exist"
    version = LAUNCHERS["python"].version(get_engine(spec.engine), spec)
    if version is None:
        return "missing", None, f"{py} cannot import the engine package"
    return "ready", version, str(py)


def _docker(spec: EngineSpec) -> tuple[str, str | None, str]:
    adapter = get_engine(spec.engine)
    image = spec.launcher.image or adapter.default_image or ""
    try:
        r = subprocess.run(["docker", "image", "inspect", image], capture_output=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired) as err:
        return "missing", None, f"docker not usable here: {err}"
    if r.returncode != 0:
        return "missing", None, f"image {image} not present (or no Docker engine running)"
    return "ready", LAUNCHERS["docker"].version(adapter, spec), image


def _endpoint(spec: EngineSpec) -> tuple[str, str | None, str]:
    url = (spec.launcher.url or "").rstrip("/") + get_engine(spec.engine).health_path
    key = api_key(spec.launcher)
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    try:
        r = httpx.get(url, headers=headers, timeout=10)
    except httpx.HTTPError as err:
        return "unreachable", None, f"{url}: {type(err).__name__}"
    return ("ready" if r.status_code == 200 else "unreachable"), None, f"{url}: HTTP {r.status_code}"


CHECKS = {"python": _python, "docker": _docker, "endpoint": _endpoint}


def engine_status(spec: EngineSpec) -> dict[str, object]:
    """One engine configuration's readiness row."""
    adapter = get_engine(spec.engine)
    state, version, detail = CHECKS[spec.launcher.kind](spec)
    return {
        "engine config": spec.label,
        "engine": adapter.display_name or adapter.name,
        "launcher": spec.launcher.kind,
        "status": state,
        "version": version,
        "detail": detail,
        "how to install": "" if state == "ready" else adapter.install_hint,
    }


def engine_status_frame(cfg: PlaybookConfig) -> pd.DataFrame:
    """Readiness of every engine configuration of the config."""
    return pd.DataFrame([engine_status(e) for e in cfg.engines])
