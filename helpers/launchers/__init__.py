"""Launchers, registered by kind: how an engine process is started, orthogonal to which engine it is.

``python`` runs the engine's module with an interpreter that has it; ``docker`` runs an official
image; ``endpoint`` starts nothing and talks to a server given by URL.
"""

from __future__ import annotations

from helpers.launchers import docker as _docker  # noqa: F401
from helpers.launchers import endpoint as _endpoint  # noqa: F401
from helpers.launchers import python as _python  # noqa: F401
from helpers.launchers.base import LAUNCHERS, Launcher, register_launcher

__all__ = ["LAUNCHERS", "Launcher", "register_launcher"]
