"""The ``endpoint`` launcher: nothing is started; the server at ``launcher.url`` is used as it is."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

import httpx

from helpers.launchers.base import Launcher
from helpers.launchers.server import ServerHandle, record_for_run

if TYPE_CHECKING:
    from helpers.core.config import EngineSpec, LauncherSpec, ModelSpec
    from helpers.engines.base import EngineAdapter
    from helpers.launchers.server import ServerHandle, record_for_run


def api_key(spec: LauncherSpec) -> str | None:
    """The API key, read from the environment variable the config names (never from the YAML)."""
    return os.environ.get(spec.api_key_env) if spec.api_key_env else None


class EndpointLauncher(Launcher):
    """An already-running OpenAI-compatible server."""

    kind = "endpoint"
    starts_engine = False

    def check_spec(self, spec: LauncherSpec) -> None:
        """The endpoint launcher needs ``url``."""
        if not spec.url:
            raise ValueError("launcher.url is required for the endpoint launcher")

    def build(
        self, adapter: EngineAdapter, spec: EngineSpec, model: ModelSpec, port: int, run_dir: Path
    ) -> tuple[list[str], dict[str, str]]:
        """Nothing to run."""
        return [], {}

    def readiness(self, adapter: EngineAdapter, spec: EngineSpec) -> tuple[str, str | None, str]:
        """Ready when the server's health path answers 200."""
        url = (spec.launcher.url or "").rstrip("/") + adapter.health_path
        key = api_key(spec.launcher)
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        try:
            r = httpx.get(url, headers=headers, timeout=10)
        except httpx.HTTPError as err:
            return "unreachable", None, f"{url}: {type(err).__name__}"
        return ("ready" if r.status_code == 200 else "unreachable"), None, f"{url}: HTTP {r.status_code}"

    def start(
        self,
        adapter: EngineAdapter,
        spec: EngineSpec,
        model: ModelSpec,
        port: int,
        run_dir: Path,
        log_path: Path,
    ) -> ServerHandle:
        """A handle on the remote server, with no process (the caller's own group is recorded: the load's workers)."""
        record_for_run(run_dir, None, "")
        log_path.parent.mkdir(parents=True, exist_ok=True)
        log_path.write_text(f"endpoint {spec.launcher.url}: not started by the playbook\n", encoding="utf-8")
        return ServerHandle(
            base_url=(spec.launcher.url or "").rstrip("/"),
            adapter=adapter,
            log_path=log_path,
            process=None,
            api_key=api_key(spec.launcher),
        )
