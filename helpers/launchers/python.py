"""The ``python`` launcher: an interpreter that has the engine installed (venv, conda env, system)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import yaml

from helpers.core.paths import resolve_repo_path
from helpers.core.text import label_slug
from helpers.launchers.base import HOST, Launcher

if TYPE_CHECKING:
    from helpers.core.config import EngineSpec, LauncherSpec, ModelSpec
    from helpers.engines.base import EngineAdapter


def interpreter(spec: LauncherSpec) -> Path:
    """The interpreter of a launcher spec.

    A bare name (``python3``) is looked up on PATH; a path is resolved against the repository root; none
    (an engine section without ``launcher.python``, or without a launcher) is the interpreter running the
    playbook: the engine from the current environment.
    """
    if not spec.python:
        return Path(sys.executable)
    name = spec.python
    if "/" not in name:
        found = shutil.which(name)
        return Path(found) if found else Path(name)
    return resolve_repo_path(name)


def _pythonpath(spec: LauncherSpec) -> str:
    """The launcher's folders first, then any inherited ``PYTHONPATH``."""
    parts = [str(resolve_repo_path(p)) for p in spec.pythonpath]
    return os.pathsep.join(parts)


class PythonLauncher(Launcher):
    """Run ``<python> -m <engine module> <args>`` with the launcher's env and ``PYTHONPATH``."""

    kind = "python"

    def build(
        self, adapter: EngineAdapter, spec: EngineSpec, model: ModelSpec, port: int, run_dir: Path
    ) -> tuple[list[str], dict[str, str]]:
        """``[python, -m, module, *args]`` and the engine's env, the launcher's env and ``PYTHONPATH``."""
        if not adapter.module:
            raise ValueError(f"engine {adapter.name!r} cannot be started by the python launcher")
        cmd = [str(interpreter(spec.launcher)), "-m", adapter.module]
        cmd += adapter.server_args(spec, model, str(model.directory), HOST, port)
        cmd += _options_file_args(adapter, spec, run_dir)
        env = {**adapter.env(spec), **spec.launcher.env}
        pp = _pythonpath(spec.launcher)
        if pp:
            env["PYTHONPATH"] = pp
        return cmd, env

    def version(self, adapter: EngineAdapter, spec: EngineSpec) -> str | None:
        """Ask the interpreter for the engine package's version."""
        cmd, env = [str(interpreter(spec.launcher)), "-c", adapter.version_code()], dict(os.environ)
        pp = _pythonpath(spec.launcher)
        if pp:
            env["PYTHONPATH"] = pp
        try:
            out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120, check=False)
        except (OSError, subprocess.TimeoutExpired):
            return None
        lines = out.stdout.strip().splitlines()
        return lines[-1] if out.returncode == 0 and lines else None

    def readiness(self, adapter: EngineAdapter, spec: EngineSpec) -> tuple[str, str | None, str]:
        """Ready when the interpreter exists and can import the engine package."""
        py = interpreter(spec.launcher)
        if not py.exists():
            return "missing", None, f"interpreter {py} does not exist"
        version = self.version(adapter, spec)
        if version is None:
            return "missing", None, f"{py} cannot import the engine package"
        return "ready", version, str(py)


def _options_file_args(adapter: EngineAdapter, spec: EngineSpec, run_dir: Path) -> list[str]:
    """Write the adapter's launch options (if it has any) as YAML into the run folder and point at the file."""
    opts = adapter.launch_options(spec)
    if not opts or not adapter.options_flag:
        return []

    path = Path(run_dir) / "launch" / f"{label_slug(spec.label)}-extra-options.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(opts, sort_keys=True), encoding="utf-8")
    return [adapter.options_flag, str(path)]
