"""Launch commands that carry no path of the benchmark machine: its paths become shell variables.

The benchmark's commands name this machine's folders: the model folder (config and tokenizer only;
a pilot serves the real checkpoint), the run folder (options files), the configured interpreter and
``PYTHONPATH``. The pilot runs elsewhere, so ``launch.sh``/``launch-docker.sh``/``launch.json`` name
``${MODEL_DIR}``, ``${RUN_DIR}``, ``${ENGINE_PYTHON}`` and ``${ENGINE_PYTHONPATH}`` instead, and the
scripts demand or derive them (``RUN_DIR`` is the folder above the script's ``rollout/``).
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from pathlib import Path

from helpers.core.paths import REPO_ROOT


@dataclass(frozen=True)
class Variable:
    """A shell variable standing for one absolute path of the benchmark machine."""

    name: str
    path: str
    line: str  # how the script sets it


def _shown(path: Path) -> str:
    """A path as a hint: relative to the repository when inside it, else just its last part."""
    try:
        return path.resolve().relative_to(REPO_ROOT).as_posix()
    except ValueError:
        return path.name


def variables(model_dir: Path, run_dir: Path, python: str, pythonpath: str | None, engine: str) -> list[Variable]:
    """The variables of one launch, longest path first (so a longer path is replaced before its parent)."""
    out = [
        Variable(
            "MODEL_DIR",
            str(model_dir),
            f'MODEL_DIR="${{MODEL_DIR:?set MODEL_DIR to the model checkpoint folder (benchmarked with '
            f'{_shown(model_dir)}: config and tokenizer only)}}"',
        ),
        Variable(
            "RUN_DIR",
            str(Path(run_dir).resolve()),
            'RUN_DIR="${RUN_DIR:-$(cd "$(dirname "$0")/.." && pwd)}"  # the run folder above rollout/',
        ),
    ]
    if python.startswith("/"):
        out.append(
            Variable("ENGINE_PYTHON", python,
                     f'ENGINE_PYTHON="${{ENGINE_PYTHON:?set ENGINE_PYTHON to an interpreter that has {engine}}}"')
        )  # fmt: skip
    if pythonpath and "/" in pythonpath:
        out.append(
            Variable("ENGINE_PYTHONPATH", pythonpath,
                     'ENGINE_PYTHONPATH="${ENGINE_PYTHONPATH:-}"  # folders with the engine (launcher.pythonpath)')
        )  # fmt: skip
    return sorted(out, key=lambda v: -len(v.path))


def substitute(text: str, vs: list[Variable]) -> str:
    """``text`` with every variable's path replaced by ``${NAME}``."""
    for v in vs:
        text = text.replace(v.path, f"${{{v.name}}}")
    return text


def word(arg: str) -> str:
    """One shell word: single-quoted as usual, double-quoted where it holds a ``${...}`` to expand."""
    if "${" not in arg:
        return shlex.quote(arg)
    return '"' + arg.replace("\\", "\\\\").replace('"', '\\"').replace("`", "\\`") + '"'


def command_line(args: list[str], vs: list[Variable]) -> str:
    """``args`` as one shell line with the machine's paths as variables."""
    return " ".join(word(substitute(a, vs)) for a in args)


def used(vs: list[Variable], texts: list[str]) -> list[Variable]:
    """The variables that occur in ``texts``."""
    joined = "\n".join(texts)
    return [v for v in vs if f"${{{v.name}}}" in joined]
