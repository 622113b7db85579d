"""``playbook run --set KEY=VALUE``: change one field of a workload config for one run, without editing the file.

``KEY`` is a dotted path into the YAML (``cost.gpu``, ``evidence.crosscheck.enabled``); a number picks an item of
a list (``engines.1.knobs.memory_fraction``). ``VALUE`` is read as YAML (``0.95``, ``false``, ``[1, 8]``, a
string). The config is validated after every override is applied, so an unknown key fails with its dotted
path as a typo in the file would; the run folder's ``config.yaml`` records the config as run.
"""

from __future__ import annotations

import copy
from typing import Any

import yaml

from helpers.core.errors import ConfigError


def _index(node: list[Any], key: str, where: str) -> int:
    """``key`` as an index of the list ``node``, or a ``ConfigError`` naming ``where``."""
    if not key.isdigit() or int(key) >= len(node):
        raise ConfigError(f"--set {where}: {key!r} is not an index of that list (0-{len(node) - 1})")
    return int(key)


def _step(node: Any, key: str, where: str) -> Any:
    """The child ``key`` of ``node`` on the way to an override's field, or a ``ConfigError`` naming ``where``."""
    if isinstance(node, list):
        return node[_index(node, key, where)]
    if not isinstance(node, dict):
        raise ConfigError(f"--set {where}: the value before {key!r} is not a mapping")
    if node.get(key) is None:  # absent, or an empty section in the YAML
        node[key] = {}
    return node[key]


def apply_overrides(data: dict[str, Any], overrides: list[str] | tuple[str, ...]) -> dict[str, Any]:
    """A copy of the config mapping ``data`` with each ``KEY=VALUE`` of ``overrides`` applied (module doc)."""
    out = copy.deepcopy(data)
    for item in overrides:
        key, eq, raw = item.partition("=")
        parts = key.strip().split(".")
        if not eq or not all(parts):
            raise ConfigError(f"--set {item!r}: expected KEY=VALUE with a dotted KEY, e.g. cost.gpu=H100-SXM5-80GB")
        try:
            value = yaml.safe_load(raw) if raw.strip() else ""
        except yaml.YAMLError as err:
            raise ConfigError(f"--set {key}: the value is not valid YAML ({str(err).splitlines()[0]})") from None
        node: Any = out
        for i, part in enumerate(parts[:-1]):
            node = _step(node, part, ".".join(parts[: i + 1]))
        last = parts[-1]
        if isinstance(node, list):
            node[_index(node, last, key)] = value
        elif isinstance(node, dict):
            node[last] = value
        else:
            raise ConfigError(f"--set {key}: the value before {last!r} is not a mapping")
    return out
