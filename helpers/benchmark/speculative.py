"""Speculative decoding per point: acceptance from the engine's own counters, speedup against a baseline.

vLLM counts drafted and accepted tokens and drafts (``vllm:spec_decode_num_*_total``); their deltas
over a point give the acceptance rate (accepted ÷ drafted) and the mean acceptance length
(1 + accepted ÷ drafts: the verified bonus token plus the accepted drafts). SGLang 0.5.16 exports
only gauges (``sglang:spec_accept_rate``, ``sglang:spec_accept_length``), averaged over the samples
of the point where they are above zero. The speedup of a point is its output tokens/s over the
baseline configuration's at the same concurrency (same workload, speculative decoding off): the
configuration with the same engine and knobs but no ``knobs.speculative`` (``spec_baseline``; launcher
and extra flags are not compared). ``compare_speculative`` puts both side by side for step 5
(``speculative.json``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import ClassVar

from pydantic import BaseModel, ConfigDict, Field

from helpers.core.config import EngineSpec, PlaybookConfig
from helpers.engines.base import MetricNames
from helpers.run.records import Artifact, EngineResult, Point, SpecDecodeStats

__all__ = ["SpecComparison", "SpecDecodeStats", "SpecRow", "compare_speculative", "spec_decode_stats", "speedups"]


class _Record(BaseModel):
    model_config = ConfigDict(extra="forbid")


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


class SpecRow(_Record):
    """One speculative configuration at one concurrency, beside the same configuration without speculation."""

    label: str
    baseline: str | None = Field(description="The same engine and knobs without speculative decoding (None: none).")
    method: str
    num_tokens: int
    concurrency: int
    acceptance_rate: float | None = None
    mean_acceptance_length: float | None = None
    drafted: float | None = None
    accepted: float | None = None
    source: str | None = Field(default=None, description="counters or gauge; None when the engine said nothing.")
    output_tok_s: float
    baseline_output_tok_s: float | None = None
    speedup: float | None = Field(default=None, description="output tok/s over the baseline's, same concurrency.")
    itl_ms_p50: float | None = None
    baseline_itl_ms_p50: float | None = None


class SpecComparison(Artifact):
    """Speculative decoding in step 5 (``speculative.json``): acceptance and speed-up per configuration and level."""

    artifact: ClassVar[str] = "speculative.json"

    rows: list[SpecRow] = Field(default_factory=list)
    note: str = ""


def _knobs_without_spec(spec: EngineSpec) -> dict:
    return spec.knobs.model_dump(exclude={"speculative"})


def spec_baseline(spec: EngineSpec, cfg: PlaybookConfig) -> EngineSpec | None:
    """The configuration of ``cfg`` with the same engine and knobs as ``spec`` but no speculative decoding."""
    want = _knobs_without_spec(spec)
    return next(
        (s for s in cfg.engines if s.knobs.speculative is None and s.engine == spec.engine and
         _knobs_without_spec(s) == want),
        None,
    )  # fmt: skip


def _sweep(result: EngineResult | None) -> dict[int, Point]:
    return {p.concurrency: p for p in result.points if p.phase == "sweep"} if result is not None else {}


def compare_speculative(results: list[EngineResult], cfg: PlaybookConfig) -> SpecComparison:
    """Every speculative configuration's sweep points with their acceptance and speed-up over the baseline."""
    by_label = {r.label: r for r in results}
    out = SpecComparison()
    specs = [s for s in cfg.engines if s.knobs.speculative is not None]
    if not specs:
        out.note = "No configuration enables speculative decoding (knobs.speculative)."
        return out
    for spec in specs:
        base = spec_baseline(spec, cfg)
        points = _sweep(by_label.get(spec.label))
        base_points = _sweep(by_label.get(base.label)) if base is not None else {}
        ratio = speedups(
            {spec.label: {c: p.output_tok_s for c, p in points.items()},
             "baseline": {c: p.output_tok_s for c, p in base_points.items()}}, "baseline"
        )[spec.label]  # fmt: skip
        for c, p in sorted(points.items()):
            sd, b = p.server.spec_decode, base_points.get(c)
            out.rows.append(
                SpecRow(
                    label=spec.label, baseline=base.label if base else None, method=spec.knobs.speculative.method,
                    num_tokens=spec.knobs.speculative.num_tokens, concurrency=c,
                    acceptance_rate=sd.acceptance_rate if sd else None,
                    mean_acceptance_length=sd.mean_acceptance_length if sd else None,
                    drafted=sd.drafted if sd else None, accepted=sd.accepted if sd else None,
                    source=sd.source if sd else None, output_tok_s=p.output_tok_s,
                    baseline_output_tok_s=b.output_tok_s if b else None, speedup=ratio.get(c),
                    itl_ms_p50=p.itl_ms_p50, baseline_itl_ms_p50=b.itl_ms_p50 if b else None,
                )
            )  # fmt: skip
    missing = [s.label for s in specs if spec_baseline(s, cfg) is None]
    if missing:
        out.note = ("No configuration with the same engine and knobs but speculative decoding off for: "
                    + ", ".join(missing) + "; add one to measure the speed-up.")  # fmt: skip
    return out
