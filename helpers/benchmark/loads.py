"""Which loads step 5 drives, read from the config alone: the probes' axis, the target and the fixed load.

Below every phase and the session: the plan, the session's loads and the phases all read them here.
"""

from __future__ import annotations

from typing import Literal

from helpers.core.config import PlaybookConfig


def load_axis(cfg: PlaybookConfig) -> Literal["rate", "concurrency"]:
    """The axis of the probes and trials: the search's, or closed-loop concurrency when the search is disabled."""
    return cfg.evidence.search.axis if cfg.evidence.search.enabled else "concurrency"


def fixed_concurrency(cfg: PlaybookConfig) -> int:
    """Streams of the fixed-load trials (search disabled): configured, else the target or top sweep level."""
    wl = cfg.workload
    return cfg.evidence.trials.fixed_concurrency or wl.target_concurrency or max(wl.concurrency)


def target_concurrency(cfg: PlaybookConfig) -> int:
    """The concurrency the SLA tuning and the comparison target."""
    return cfg.workload.target_concurrency or max(cfg.workload.concurrency)
