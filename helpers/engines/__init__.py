"""Engine adapters, registered by name: each knows its command line, flags, health and metric names.

Generic code looks engines up in ``ENGINES`` and never branches on an engine's name. Adding an
engine means one new module here that subclasses ``EngineAdapter`` and is decorated with
``register_engine``, plus its import below.
"""

from __future__ import annotations

from helpers.engines import endpoint as _endpoint  # noqa: F401  (registers endpoint)
from helpers.engines import sglang as _sglang  # noqa: F401  (registers sglang)
from helpers.engines import trtllm as _trtllm  # noqa: F401  (registers trtllm)
from helpers.engines import vllm as _vllm  # noqa: F401  (registers vllm, vllm-cpu)
from helpers.engines.base import ENGINES, EngineAdapter, MetricNames, get_engine, register_engine

__all__ = ["ENGINES", "EngineAdapter", "MetricNames", "get_engine", "register_engine"]
