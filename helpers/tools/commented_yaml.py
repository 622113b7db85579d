"""Config data written as YAML with a comment above each key: the description of its pydantic field.

``playbook init`` writes its config this way, so that every value it chose says what it is, in the
words of the schema that validates it (``helpers.core.config``). Mappings and lists of scalars are
written inline (``{kind: trace, ...}``, ``[1, 4]``) when they are short; sections are written nested.
"""

from __future__ import annotations

import textwrap
import types
import typing
from typing import Any

import yaml
from pydantic import BaseModel

WIDTH = 110
INLINE_MAX = 60


def model_of(annotation: object) -> type[BaseModel] | None:
    """The pydantic model an annotation holds (``Spec``, ``Spec | None``, ``list[Spec]``), or None."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    if typing.get_origin(annotation) in (typing.Union, types.UnionType, list):
        for arg in typing.get_args(annotation):
            found = model_of(arg)
            if found is not None:
                return found
    return None


def describe(model: type[BaseModel], key: str) -> str:
    """What a key means: its field's description, else the first line of its model's docstring."""
    field = model.model_fields[key]
    if field.description:
        return field.description
    sub = model_of(field.annotation)
    return (sub.__doc__ or "").strip().splitlines()[0] if sub is not None and sub.__doc__ else ""


def scalar(value: Any) -> str:
    """One value as inline YAML (``'0.26.0'``, ``[1, 4]``, ``{VLLM_CPU_KVCACHE_SPACE: '1'}``)."""
    text = yaml.safe_dump(value, default_flow_style=True, width=10**9, sort_keys=False, allow_unicode=True)
    return text.removesuffix("\n...\n").strip()


def comment(text: str, pad: str) -> list[str]:
    """``text`` as comment lines at ``pad``, wrapped."""
    if not text:
        return []
    return [f"{pad}# {ln}" for ln in textwrap.wrap(" ".join(text.split()), WIDTH - len(pad) - 2)]


def render(
    model: type[BaseModel], data: dict[str, Any], indent: int = 0, first_prefix: str = "", comments: bool = True
) -> list[str]:
    """``data`` (keys of ``model``) as lines, each key under its description (``comments``).

    ``first_prefix``: ``- `` for an item of a list; the items after a list's first are not commented again.
    """
    lines: list[str] = []
    for i, (key, value) in enumerate(data.items()):
        pad = " " * indent
        head = pad[: -len(first_prefix)] + first_prefix if (i == 0 and first_prefix) else pad
        lines += comment(describe(model, key), pad) if comments else []
        sub = model_of(model.model_fields[key].annotation)
        if sub is not None and isinstance(value, dict) and len(scalar(value)) > INLINE_MAX:
            lines.append(f"{head}{key}:")
            lines += render(sub, value, indent + 2, comments=comments)
        elif sub is not None and isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
            lines.append(f"{head}{key}:")
            for n, item in enumerate(value):
                lines += render(sub, item, indent + 4, first_prefix="- ", comments=comments and n == 0)
        else:
            lines.append(f"{head}{key}: {scalar(value)}")
    return lines


def commented_yaml(model: type[BaseModel], data: dict[str, Any], header: list[str]) -> str:
    """The whole file: ``header`` comment lines, then ``data`` rendered against ``model``."""
    top = [f"# {ln}" if ln else "#" for ln in header]
    return "\n".join([*top, *render(model, data)]) + "\n"
