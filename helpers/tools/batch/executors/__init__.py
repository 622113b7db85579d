"""Batch executors, registered by kind.

``local`` runs cells one after another here; ``ray`` hands them to a Ray cluster (a local one, a remote
head, or a KubeRay cluster through ``ray://``).

Adding an executor means one module here with an ``Executor`` subclass, and one line in the list below.
"""

from __future__ import annotations

from helpers.core.registry import Registry
from helpers.tools.batch.executors.base import Executor
from helpers.tools.batch.executors.local import LocalExecutor
from helpers.tools.batch.executors.ray_cluster import RayExecutor

EXECUTORS: Registry[type[Executor]] = Registry("executor")
for _executor in (LocalExecutor, RayExecutor):
    EXECUTORS.add(_executor.kind, _executor)

__all__ = ["EXECUTORS", "Executor"]
