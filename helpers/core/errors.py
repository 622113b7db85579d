"""The playbook's exception hierarchy: one base class, one subclass per concern."""

from __future__ import annotations


class PlaybookError(Exception):
    """Base class of every error the playbook raises on purpose."""


class ConfigError(PlaybookError):
    """A workload config that is missing, malformed or invalid; the message names the field."""


class EngineError(PlaybookError):
    """An engine that could not be launched, became unhealthy or died."""


class TraceError(PlaybookError):
    """A trace file that cannot be read or parsed."""


class BundleError(PlaybookError):
    """An offline install bundle that cannot be built or does not verify."""


class TimeLimitReached(PlaybookError):
    """A run stopped before an engine configuration it could not finish within its time limit; resumable."""
