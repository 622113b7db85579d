"""Keeping secrets out of everything the playbook writes: reports, summaries, logs and notebooks.

API keys only ever come from environment variables named in the config (``api_key_env``); every
text that is archived goes through ``redact`` with the secrets known for the config.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from helpers.core.config_engines import EngineSpec

MASK = "***"


class HasEngines(Protocol):
    """What ``known_secrets`` reads of a config (``PlaybookConfig`` is one): its engine configurations."""

    @property
    def engines(self) -> Sequence[EngineSpec]:
        """The engine configurations, whose launchers name the secrets."""
        ...


_SECRET_KEY = re.compile(r"(KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL)", re.IGNORECASE)


def is_secret_name(name: str) -> bool:
    """Whether an environment-variable name looks like it holds a secret.

    Keys ending in ``_env`` (``api_key_env``) hold the NAME of a variable, not a secret.
    """
    return bool(_SECRET_KEY.search(name)) and not name.lower().endswith("_env")


def known_secrets(cfg: HasEngines) -> list[str]:
    """Secret values in force for ``cfg``: API keys from the environment and secret-looking launcher env."""
    found: list[str] = []
    for e in cfg.engines:
        if e.launcher.api_key_env and os.environ.get(e.launcher.api_key_env):
            found.append(os.environ[e.launcher.api_key_env])
        found += [v for k, v in e.launcher.env.items() if is_secret_name(k) and v]
    for k, v in os.environ.items():
        if k.startswith("PLAYBOOK_") and is_secret_name(k) and v:
            found.append(v)
    return sorted({s for s in found if len(s) >= 4}, key=len, reverse=True)


def redact(text: str, secrets: list[str]) -> str:
    """``text`` with every secret replaced by ``***``."""
    for s in secrets:
        text = text.replace(s, MASK)
    return text


def redact_data(data: Any, secrets: list[str]) -> Any:
    """Redact secrets in every string of a JSON-like structure, and mask secret-looking env values."""
    if isinstance(data, str):
        return redact(data, secrets)
    if isinstance(data, list):
        return [redact_data(x, secrets) for x in data]
    if isinstance(data, dict):
        return {
            k: (
                MASK
                if isinstance(k, str) and is_secret_name(k) and isinstance(v, str) and v
                else redact_data(v, secrets)
            )
            for k, v in data.items()
        }
    return data
