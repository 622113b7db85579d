"""Launchers, registered by kind: how an engine process is started, orthogonal to which engine it is.

``python`` runs the engine's module with an interpreter that has it; ``docker`` runs an official
image; ``endpoint`` starts nothing and talks to a server given by URL. ``server`` holds the lifetime
of a started process (health polling, stop by pid).
"""

from __future__ import annotations

from helpers.core.registry import Registry
from helpers.launchers.base import Launcher
from helpers.launchers.docker import DockerLauncher
from helpers.launchers.endpoint import EndpointLauncher
from helpers.launchers.python import PythonLauncher

LAUNCHERS: Registry[Launcher] = Registry("launcher")
for _launcher in (PythonLauncher(), DockerLauncher(), EndpointLauncher()):
    LAUNCHERS.add(_launcher.kind, _launcher)

__all__ = ["LAUNCHERS", "Launcher"]
