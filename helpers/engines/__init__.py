"""Engine adapters, registered by name: each knows its command line, flags, health and metric names.

Generic code looks engines up in ``ENGINES`` and never branches on an engine's name. Adding an
engine means one new module here with an ``EngineAdapter`` subclass, and one line in the list below.
"""

from __future__ import annotations

from helpers.core.registry import Registry
from helpers.engines.base import EngineAdapter, MetricNames
from helpers.engines.endpoint import EndpointAdapter
from helpers.engines.lmdeploy import LmdeployAdapter
from helpers.engines.sglang import SglangAdapter
from helpers.engines.trtllm import TrtllmAdapter
from helpers.engines.vllm import VllmAdapter, VllmCpuAdapter

ENGINES: Registry[EngineAdapter] = Registry("engine")
for _adapter in (
    VllmAdapter(),
    VllmCpuAdapter(),
    SglangAdapter(),
    TrtllmAdapter(),
    LmdeployAdapter(),
    EndpointAdapter(),
):
    ENGINES.add(_adapter.name, _adapter)


def get_engine(name: str) -> EngineAdapter:
    """The adapter registered as ``name``; an ``UnknownName`` error listing the allowed names otherwise."""
    return ENGINES[name]


__all__ = ["ENGINES", "EngineAdapter", "MetricNames", "get_engine"]
