"""Speculative decoding per point: acceptance from the engine's own counters, speedup against a baseline.

vLLM counts drafted and accepted tokens and drafts (``vllm:spec_decode_num_*_total``); their deltas
over a point give the acceptance rate (accepted ÷ drafted) and the mean acceptance length
(1 + accepted ÷ drafts: the verified bonus token plus the accepted drafts). SGLang 0.5.16 exports
only gauges (``sglang:spec_accept_rate``, ``sglang:spec_accept_length``), averaged over the samples
of the point where they are above zero. The speedup of a point is its output tokens/s over the
baseline configuration's at the same concurrency (same workload, speculative decoding off).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from pydantic import BaseModel, ConfigDict, Field

from helpers.engines.base import MetricNames


class SpecDecodeStats(BaseModel):
    """What the engine says about its drafts during one point."""

    model_config = ConfigDict(extra="forbid")

    source: str = Field(description="counters (deltas over the point) or gauge (mean of the samples).")
    drafted: float | None = Field(default=None, description="Draft tokens proposed during the point.")
    accepted: float | None = Field(default=None, description="Draft tokens accepted during the point.")
    drafts: float | None = Field(default=None, description="Draft sequences proposed during the point.")
    acceptance_rate: float | None = Field(default=None, description="accepted ÷ drafted.")
    mean_acceptance_length: float | None = Field(default=None, description="Tokens per verify step, bonus included.")


def _delta(pages: Sequence[Mapping[str, float]], name: str | None) -> float | None:
    if not name or not pages or name not in pages[-1]:
        return None
    return pages[-1][name] - pages[0].get(name, 0.0)


def _gauge_mean(pages: Sequence[Mapping[str, float]], name: str | None) -> float | None:
    values = [p[name] for p in pages if name and p.get(name, 0.0) > 0]
    return sum(values) / len(values) if values else None


def spec_decode_stats(pages: Sequence[Mapping[str, float]], names: MetricNames) -> SpecDecodeStats | None:
    """Acceptance over a point from its parsed ``/metrics`` pages (first = before, last = after).

    ``pages`` are ``helpers.measure.metrics.parse_page`` results in time order. None when the engine
    exported no speculative-decoding series (speculative decoding off, or an engine without them).
    """
    drafted, accepted = _delta(pages, names.spec_drafted), _delta(pages, names.spec_accepted)
    if drafted is not None and accepted is not None:
        drafts = _delta(pages, names.spec_drafts)
        return SpecDecodeStats(
            source="counters",
            drafted=drafted,
            accepted=accepted,
            drafts=drafts,
            acceptance_rate=accepted / drafted if drafted > 0 else None,
            mean_acceptance_length=1 + accepted / drafts if drafts else None,
        )
    rate = _gauge_mean(pages, names.spec_accept_rate_gauge)
    length = _gauge_mean(pages, names.spec_accept_length_gauge)
    if rate is None and length is None:
        return None
    return SpecDecodeStats(source="gauge", acceptance_rate=rate, mean_acceptance_length=length)


def speedups(
    output_tok_s: Mapping[str, Mapping[int, float]], baseline_label: str
) -> dict[str, dict[int, float | None]]:
    """Output tokens/s of each configuration over the baseline's, per concurrency level both measured.

    ``output_tok_s`` maps label → concurrency → output tok/s. A level the baseline lacks (or measured
    at zero) gets None rather than a made-up ratio.
    """
    if baseline_label not in output_tok_s:
        raise KeyError(f"baseline configuration {baseline_label!r} has no points (have: {', '.join(output_tok_s)})")
    base = output_tok_s[baseline_label]
    return {
        label: {c: (v / base[c] if base.get(c) else None) for c, v in points.items()}
        for label, points in output_tok_s.items()
    }
