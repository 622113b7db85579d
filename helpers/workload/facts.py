"""The few numbers of the workload profile that later steps use, read in one place.

Steps 6 and 7 need the peak arrival rate, the output length, the p99 concurrency and the prefix
reuse, and whether they were measured on a real trace or come from the synthetic stand-in.
``facts_of`` reads them from a ``Profile`` (or a profile mapping from an archived run).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class ProfileFacts:
    """What the cost and decision steps read from the step-1 profile."""

    measured_trace: bool = False
    peak_requests_per_s: float | None = None
    output_tokens_mean: float | None = None
    concurrency_p99: float | None = None
    prefix_reuse_ratio: float | None = None
    finite_cache_hit_rate: float | None = None
    source: str = ""


def facts_of(profile: Any) -> ProfileFacts:
    """``ProfileFacts`` of a ``Profile``, a profile mapping, or None (no profile: nothing known)."""
    if profile is None:
        return ProfileFacts()
    get = profile.get if isinstance(profile, dict) else lambda k, d=None: getattr(profile, k, d)
    fmt = get("format", "") or ""
    source = get("source", "") or ""
    measured = bool(fmt) and fmt != "synthetic" and source != "synthetic"
    return ProfileFacts(
        measured_trace=measured,
        peak_requests_per_s=get("peak_requests_per_s"),
        output_tokens_mean=get("output_tokens_mean"),
        concurrency_p99=get("concurrency_p99"),
        prefix_reuse_ratio=get("prefix_reuse_ratio"),
        finite_cache_hit_rate=get("finite_cache_hit_rate"),
        source=source,
    )
