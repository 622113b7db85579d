"""A config checked against the registries: each engine configuration's engine and launcher are registered ones.

The typed config (``helpers.core.config``) is the foundation and knows no registry; this module, above the
engine adapters and the launchers, checks what only they know: the engine and launcher names, what each
launcher kind needs (``Launcher.check_spec``), what each engine can do (``EngineAdapter.check_spec``, its
server module, its speculative methods). Every place that loads a config for a run (``playbook run``,
``playbook check``, ``playbook init``, batch cells, the notebooks' ``start``) loads it through
``load_config``/``parse_config`` here; an error is one ``ConfigError`` line naming the file and the field, as
pydantic's are.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from helpers.core import config as core_config
from helpers.core.config import EngineSpec, PlaybookConfig, one_line
from helpers.core.errors import ConfigError
from helpers.core.text import unknown_choice
from helpers.engines import ENGINES
from helpers.launchers import LAUNCHERS


def spec_problem(spec: EngineSpec) -> tuple[str, str] | None:
    """The first registry problem of one engine configuration: (field under it, message), or None."""
    if spec.engine not in ENGINES:
        return "engine", unknown_choice("engine", spec.engine, ENGINES)
    if spec.launcher.kind not in LAUNCHERS:
        return "launcher.kind", unknown_choice("launcher", spec.launcher.kind, LAUNCHERS)
    try:
        LAUNCHERS[spec.launcher.kind].check_spec(spec.launcher)
        adapter = ENGINES[spec.engine]
        if spec.launcher.kind == "python" and not adapter.module:
            raise ValueError(
                f"engine {spec.engine!r} has no server module to start with the python launcher (the launcher "
                f"a section without one gets); {adapter.install_hint or 'give launcher.kind docker or endpoint'}"
            )
        adapter.check_spec(spec)
        methods = adapter.speculative_methods
        if spec.knobs.speculative is not None and spec.knobs.speculative.method not in methods:
            raise ValueError(
                f"knobs.speculative.method {spec.knobs.speculative.method!r} is not supported by engine "
                f"{spec.engine!r} (supported: {', '.join(sorted(methods)) or 'none'})"
            )
    except ValueError as err:
        return "", str(err)
    return None


def check_registries(cfg: PlaybookConfig, source: str = "<config>") -> PlaybookConfig:
    """``cfg`` when every engine configuration passes ``spec_problem``; else one ``ConfigError`` line naming it.

    The line reads as pydantic's would: ``SOURCE: engines.N.engine: unknown engine 'x'; allowed: ...``.
    """
    for i, spec in enumerate(cfg.engines):
        problem = spec_problem(spec)
        if problem is not None:
            field, msg = problem
            loc = f"engines.{i}" + (f".{field}" if field else "")
            raise ConfigError(one_line(f"{source}: {loc}: {msg}"))
    return cfg


def parse_config(data: dict[str, Any], source: str = "<config>") -> PlaybookConfig:
    """``helpers.core.config.parse_config`` and then the registries' check."""
    return check_registries(core_config.parse_config(data, source), source)


def load_config(path: str | Path, overrides: list[str] | tuple[str, ...] = ()) -> PlaybookConfig:
    """``helpers.core.config.load_config`` (with ``--set`` overrides), then the registries' check: as a run uses it."""
    return check_registries(core_config.load_config(path, overrides), str(Path(path)))
