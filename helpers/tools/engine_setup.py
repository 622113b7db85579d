"""Engine environments under ``.engines/``: each engine in its own venv, never in the playbook's.

A recipe per installable engine (``helpers.engines.recipes``, beside the adapters). ``ensure_engine`` is
idempotent: a ready marker records the pins, and a second call with the same pins does nothing.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from helpers.core.errors import EngineError
from helpers.core.paths import ENGINES_DIR
from helpers.engines.recipes import RECIPES, setup_hint  # noqa: F401  (setup_hint: re-exported)


def commands(name: str) -> list[list[str]]:
    """The commands ``ensure_engine`` runs for ``name`` in a fresh environment, in order."""
    if name not in RECIPES:
        raise EngineError(f"no set-up recipe for engine {name!r}; known: {', '.join(sorted(RECIPES))}")
    recipe, py = RECIPES[name], str(interpreter(name))
    out = [
        [sys.executable, "-m", "venv", str(env_dir(name))],
        [py, "-m", "pip", "install", "--quiet", "--upgrade", "pip"],
    ]
    out.append([py, "-m", "pip", "install", "--quiet", *recipe.packages])
    if recipe.remove:
        out.append([py, "-m", "pip", "uninstall", "--quiet", "--yes", *recipe.remove])
    if recipe.check:
        out.append([py, "-c", recipe.check])
    return out


def env_dir(name: str) -> Path:
    """The folder of an engine environment."""
    return ENGINES_DIR / name


def interpreter(name: str) -> Path:
    """The Python interpreter of an engine environment."""
    return env_dir(name) / "bin" / "python"


def _marker(name: str) -> Path:
    return env_dir(name) / ".playbook-ready.json"


def is_ready(name: str) -> bool:
    """Whether the environment was fully set up with the current recipe."""
    m = _marker(name)
    if not m.is_file() or not interpreter(name).exists():
        return False
    try:
        return json.loads(m.read_text(encoding="utf-8")).get("packages") == RECIPES[name].packages
    except (OSError, ValueError, KeyError):
        return False


def _run(cmd: list[str]) -> None:
    print("+", " ".join(cmd), flush=True)
    proc = subprocess.run(cmd, check=False)
    if proc.returncode != 0:
        raise EngineError(f"command failed with exit code {proc.returncode}: {' '.join(cmd)}")


def ensure_engine(name: str, force: bool = False) -> Path:
    """Create the engine's venv and install its recipe unless it is ready; return its interpreter."""
    if name not in RECIPES:
        raise EngineError(f"no set-up recipe for engine {name!r}; known: {', '.join(sorted(RECIPES))}")
    recipe = RECIPES[name]
    if is_ready(name) and not force:
        print(f"{name}: ready at {env_dir(name)}", flush=True)
        return interpreter(name)
    d = env_dir(name)
    if not interpreter(name).exists():
        _run([sys.executable, "-m", "venv", str(d)])
    py = str(interpreter(name))
    _run([py, "-m", "pip", "install", "--quiet", "--upgrade", "pip"])
    _run([py, "-m", "pip", "install", "--quiet", *recipe.packages])
    if recipe.remove:
        _run([py, "-m", "pip", "uninstall", "--quiet", "--yes", *recipe.remove])
    if recipe.check:
        _run([py, "-c", recipe.check])
    _marker(name).write_text(json.dumps({"packages": recipe.packages}), encoding="utf-8")
    return interpreter(name)
