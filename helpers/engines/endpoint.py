"""The ``endpoint`` engine: an already-running OpenAI-compatible server, reached by URL."""

from __future__ import annotations

from typing import TYPE_CHECKING

from helpers.engines.base import EngineAdapter

if TYPE_CHECKING:
    from helpers.core.config import EngineSpec, Knobs, ModelSpec


class EndpointAdapter(EngineAdapter):
    """A server the playbook does not start; knobs cannot be changed from here."""

    name = "endpoint"
    display_name = "Endpoint"
    family = ""
    health_path = "/v1/models"
    install_hint = "start the server yourself and give its URL as launcher.url"

    def knob_flags(self, knobs: Knobs) -> list[str]:
        """No flags: the server is already configured."""
        return []

    def server_args(self, spec: EngineSpec, model: ModelSpec, model_path: str, host: str, port: int) -> list[str]:
        """No command line: nothing is started."""
        return []
