"""The launcher interface (the registry of launchers is ``helpers.launchers.LAUNCHERS``)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from helpers.launchers.server import start_process

if TYPE_CHECKING:
    from helpers.core.config import EngineSpec, LauncherSpec, ModelSpec
    from helpers.engines.base import EngineAdapter
    from helpers.launchers.server import ServerHandle

HOST = "127.0.0.1"


class Launcher:
    """Builds the command for an engine and starts it; subclasses set ``kind``."""

    kind: ClassVar[str] = ""
    starts_engine: ClassVar[bool] = True  # False: the server already runs (its cold start is not ours)

    def check_spec(self, spec: LauncherSpec) -> None:
        """Raise ``ValueError`` naming the missing field when ``spec`` lacks what this launcher needs."""

    def build(
        self, adapter: EngineAdapter, spec: EngineSpec, model: ModelSpec, port: int, run_dir: Path
    ) -> tuple[list[str], dict[str, str]]:
        """The command line and the extra environment that would start the engine."""
        raise NotImplementedError

    def start(
        self,
        adapter: EngineAdapter,
        spec: EngineSpec,
        model: ModelSpec,
        port: int,
        run_dir: Path,
        log_path: Path,
    ) -> ServerHandle:
        """Start the engine and return a handle (not yet healthy)."""
        cmd, env = self.build(adapter, spec, model, port, run_dir)
        return start_process(cmd, env, log_path, base_url=f"http://{HOST}:{port}", adapter=adapter, run_dir=run_dir)

    def version(self, adapter: EngineAdapter, spec: EngineSpec) -> str | None:
        """The engine's version as this launcher can read it, or None."""
        return None

    def readiness(self, adapter: EngineAdapter, spec: EngineSpec) -> tuple[str, str | None, str]:
        """Whether the engine can run with this launcher here: (status, version, detail)."""
        raise NotImplementedError
