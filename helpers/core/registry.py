"""One registry mechanism for every pluggable thing: engines, launchers, trace formats, page formats, claims.

A ``Registry`` is a read-only mapping from a name to an entry, filled by explicit ``add`` calls in
one module per kind (e.g. ``helpers/engines/__init__.py`` lists every adapter). Nothing depends on
import order or on decorators running as a side effect of importing a module. Looking up a name that
is not there raises ``UnknownName`` (a ``ConfigError`` and a ``KeyError``) whose message lists the
allowed names, so ``registry.get(name)`` still returns None for a missing name like a dict does.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Generic, TypeVar

from helpers.core.errors import ConfigError
from helpers.core.text import unknown_choice

T = TypeVar("T")


class UnknownName(ConfigError, KeyError):
    """A name that is not in a registry; the message lists the allowed names."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class Registry(Mapping[str, T], Generic[T]):
    """Named entries of one kind (``what`` names the kind in error messages)."""

    def __init__(self, what: str) -> None:
        self.what = what
        self._items: dict[str, T] = {}

    def add(self, name: str, item: T) -> T:
        """Register ``item`` under ``name``; a second entry with the same name is a programming error."""
        if not name:
            raise ValueError(f"a {self.what} needs a name")
        if name in self._items:
            raise ValueError(f"{self.what} {name!r} is registered twice")
        self._items[name] = item
        return item

    def __getitem__(self, name: str) -> T:
        try:
            return self._items[name]
        except KeyError:
            raise UnknownName(unknown_choice(self.what, name, self._items)) from None

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

    @contextmanager
    def temporarily(self, name: str, item: T) -> Iterator[T]:
        """Register ``item`` for the duration of a ``with`` block (tests, plug-ins tried once)."""
        self.add(name, item)
        try:
            yield item
        finally:
            self._items.pop(name, None)

    def names(self) -> list[str]:
        """The registered names, sorted."""
        return sorted(self._items)
