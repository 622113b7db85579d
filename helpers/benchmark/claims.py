"""The seeds' claims beside what this run measured (checklist step 5).

Each claim is a registered check that reads the run's engine results and returns the measured
value with how it was computed, or says plainly that this run did not measure it. The seed
numbers are from seed 000 (appendix) and seed 003 (§4.1-4.3); they were measured on an H100 SXM5
80GB with Llama 3.3 70B FP8 and 512 input / 256 output tokens.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import pandas as pd

from helpers.benchmark.speculative import speedups
from helpers.core.registry import Registry
from helpers.engines import ENGINES
from helpers.run.records import EngineResult, Point


@dataclass(frozen=True)
class Measured:
    """A measured value as text and the basis it was computed on."""

    value: str
    basis: str


Check = Callable[[list[EngineResult]], Measured | None]


@dataclass(frozen=True)
class Claim:
    """A seed claim: its text, what the seed says, and the check that reads this run's results."""

    text: str
    seed: str
    check: Check


def _family(r: EngineResult) -> str:
    return ENGINES[r.engine].family if r.engine in ENGINES else ""


def _sweep(r: EngineResult) -> dict[int, Point]:
    return {p.concurrency: p for p in r.points if p.phase == "sweep" and p.requests > 0}


def _ok(results: list[EngineResult], family: str) -> list[EngineResult]:
    return [r for r in results if _family(r) == family and _sweep(r)]


def _prefix_on(r: EngineResult, on: bool) -> bool:
    knob = next((p.knobs.get("prefix_caching") for p in r.points), None)
    return (knob is None and on) or knob is on


def _sglang_vs_vllm(results: list[EngineResult]) -> Measured | None:
    v, s = _ok(results, "vllm"), _ok(results, "sglang")
    if not v or not s:
        return None
    common = sorted(set(_sweep(v[0])) & set(_sweep(s[0])))
    if not common:
        return None
    c = common[-1]
    pv, ps = _sweep(v[0])[c], _sweep(s[0])[c]
    return Measured(
        f"{ps.total_tok_s / pv.total_tok_s:.2f}",
        f"{ps.total_tok_s:,.0f} / {pv.total_tok_s:,.0f} total tok/s at concurrency {c} ({s[0].label} / {v[0].label})"
        + _cut_note(pv, ps),
    )


def _multi_turn(r: EngineResult) -> Point | None:
    """The multi-turn replay of ``r`` (phase structured), if it was measured with prefix caching not off."""
    return next(
        (p for p in r.points if p.phase == "structured" and p.structure is not None and p.requests > 0
         and p.structure.workload == "multi-turn" and p.structure.prefix_caching is not False),
        None,
    )  # fmt: skip


def _multi_turn_lead(results: list[EngineResult]) -> Measured | None:
    """SGLang's output throughput over vLLM's on the same multi-turn sessions, with each one's achieved hit rate."""
    v = next(((r, p) for r in results if _family(r) == "vllm" and (p := _multi_turn(r))), None)
    s = next(((r, p) for r in results if _family(r) == "sglang" and (p := _multi_turn(r))), None)
    if v is None or s is None or not v[1].output_tok_s:
        return None
    (rv, pv), (rs, ps) = v, s

    def hit(p: Point) -> str:
        rate = p.server.prefix_cache_hit_rate
        return "–" if rate is None else f"{rate:.0%}"

    lead = ps.output_tok_s / pv.output_tok_s - 1
    return Measured(
        f"SGLang {lead:+.0%}",
        f"{ps.output_tok_s:,.0f} / {pv.output_tok_s:,.0f} output tok/s on the same multi-turn replay "
        f"({rs.label} / {rv.label}; {ps.structure.description if ps.structure else ''}); prompt tokens from cache "
        f"{hit(ps)} / {hit(pv)} (engine counters)" + _cut_note(pv, ps),
    )


def _no_batching(r: EngineResult, concurrency: int) -> Point | None:
    """A point of ``r`` served without batching (``max_num_seqs=1``) at ``concurrency``, if one was measured."""
    return next(
        (p for p in r.points if p.knobs.get("max_num_seqs") == 1 and p.concurrency == concurrency and p.requests > 0),
        None,
    )


def _batching(results: list[EngineResult]) -> Measured | None:
    """The batching gain where a no-batching point exists; else, labelled as such, the concurrency scaling.

    Throughput at concurrency N over throughput at concurrency 1 is not the batching gain: both points
    batch as much as their load allows. Only ``max_num_seqs=1`` at the same concurrency turns batching off.
    """
    values, bases, cut_points = [], [], []
    for r in results:
        sw = _sweep(r)
        if len(sw) < 2:
            continue
        lo, hi = min(sw), max(sw)
        off = _no_batching(r, hi)
        if off is not None and off.output_tok_s:
            values.append(f"{r.label}: {sw[hi].output_tok_s / off.output_tok_s:.1f}× batching gain")
            bases.append(f"{r.label}: output tok/s at concurrency {hi}, batching on ÷ max_num_seqs=1")
            cut_points += [sw[hi], off]
        elif sw[lo].output_tok_s:
            values.append(f"{r.label}: {sw[hi].output_tok_s / sw[lo].output_tok_s:.1f}× throughput scaling")
            bases.append(f"{r.label}: output tok/s at concurrency {hi} ÷ at concurrency {lo}")
            cut_points += [sw[lo], sw[hi]]
    if not values:
        return None
    scaling_only = all("scaling" in v for v in values)
    note = (
        " — throughput scaling from concurrency 1 to N, not the batching gain: no point without batching "
        "(max_num_seqs=1 at the same concurrency) was measured"
        if scaling_only
        else ""
    )
    return Measured(", ".join(values), "; ".join(bases) + note + _cut_note(*cut_points))


def _prefix(results: list[EngineResult]) -> Measured | None:
    values, bases = [], []
    for fam in ("vllm", "sglang", "trtllm"):
        rs = _ok(results, fam)
        on = [r for r in rs if _prefix_on(r, True)]
        off = [r for r in rs if _prefix_on(r, False)]
        if not (on and off):
            continue
        common = sorted(set(_sweep(on[0])) & set(_sweep(off[0])))
        if not common:
            continue
        c = common[-1]  # the busiest common level: where recomputing the prefix costs most
        a, b = _sweep(on[0])[c], _sweep(off[0])[c]
        if not (a.ttft_ms_p50 and b.ttft_ms_p50):
            continue
        hit = a.server.prefix_cache_hit_rate
        cached = f"{hit:.0%} of prompt tokens from cache, " if hit is not None else ""
        values.append(f"{on[0].label}: {cached}TTFT p50 {1 - a.ttft_ms_p50 / b.ttft_ms_p50:.0%} lower")
        bases.append(
            f"{a.ttft_ms_p50:,.0f} vs {b.ttft_ms_p50:,.0f} ms at concurrency {c} ({on[0].label} vs {off[0].label})"
        )
    if not values:
        return None
    return Measured("; ".join(values), "; ".join(bases) + " — hit rate from the engine's own counters")


def _cold_start(family: str) -> Check:
    """A check reading the measured cold starts of one engine family."""

    def check(results: list[EngineResult]) -> Measured | None:
        rs = [r for r in results if _family(r) == family and r.cold_start_s]
        if not rs:
            return None
        return Measured(", ".join(f"{r.label}: {r.cold_start_s:.0f} s" for r in rs), "launch → first completed request")

    return check


def _vllm_abs(results: list[EngineResult]) -> Measured | None:
    rs = _ok(results, "vllm")
    if not rs:
        return None
    sw = _sweep(rs[0])
    c = max(sw)
    return Measured(
        f"{sw[c].total_tok_s:,.0f} total tok/s",
        f"{rs[0].label} at concurrency {c}, on this run's model and GPU (compare like with like){_cut_note(sw[c])}",
    )


def _lmdeploy_vs_vllm(results: list[EngineResult]) -> Measured | None:
    """Each LMDeploy configuration's total throughput over vLLM's at their busiest common level (SGLang's beside)."""
    v, lm = _ok(results, "vllm"), _ok(results, "lmdeploy")
    if not v or not lm:
        return None
    values, bases, cut = [], [], []
    for r in lm:
        common = sorted(set(_sweep(v[0])) & set(_sweep(r)))
        if not common:
            continue
        c = common[-1]
        pv, pl = _sweep(v[0])[c], _sweep(r)[c]
        values.append(f"{r.label}: {pl.total_tok_s / pv.total_tok_s:.2f}")
        bases.append(
            f"{pl.total_tok_s:,.0f} / {pv.total_tok_s:,.0f} total tok/s at concurrency {c} ({r.label} / {v[0].label})"
        )
        cut += [pv, pl]
        for s in _ok(results, "sglang")[:1]:
            if c in _sweep(s):
                bases[-1] += f"; SGLang / vLLM there {_sweep(s)[c].total_tok_s / pv.total_tok_s:.2f} ({s.label})"
    if not values:
        return None
    return Measured("; ".join(values), "; ".join(bases) + _cut_note(*cut))


def _variant_pairs(results: list[EngineResult], knob: str) -> list[tuple[EngineResult, EngineResult]]:
    """(variant, baseline) pairs: same engine and knobs except ``knob``, which only the variant sets."""

    def knobs(r: EngineResult) -> dict:
        return next((dict(p.knobs) for p in r.points if p.phase == "sweep"), {})

    measured = [r for r in results if _sweep(r)]
    pairs = []
    for v in (r for r in measured if knobs(r).get(knob) not in (None, "none")):
        rest = {k: x for k, x in knobs(v).items() if k != knob}
        base = next((b for b in measured if b.engine == v.engine and b is not v and knobs(b) == rest), None)
        if base is not None:
            pairs.append((v, base))
    return pairs


def _speedup(knob: str, what: str) -> Check:
    """A check of the output-throughput ratio of a knob's variants over their baselines, per common level."""

    def check(results: list[EngineResult]) -> Measured | None:
        values, bases, cut = [], [], []
        for v, b in _variant_pairs(results, knob):
            sv, sb = _sweep(v), _sweep(b)
            tok_s = {key: {c: p.output_tok_s for c, p in pts.items()} for key, pts in (("variant", sv), ("base", sb))}
            ratio = speedups(tok_s, "base")["variant"]
            pairs = [(c, sv[c], sb[c]) for c in sorted(sv) if ratio[c] is not None]
            if not pairs:
                continue
            values.append(f"{v.label}: " + ", ".join(f"{ratio[c]:.2f}× at c={c}" for c, _, _ in pairs))
            bases.append(
                f"output tok/s of {v.label} ÷ {b.label} ({what}): "
                + ", ".join(f"{pv.output_tok_s:,.0f} / {pb.output_tok_s:,.0f}" for _, pv, pb in pairs)
            )
            cut += [p for _, pv, pb in pairs for p in (pv, pb)]
        if not values:
            return None
        return Measured(
            "; ".join(values), "; ".join(bases) + " — single grid samples, on this run's model" + _cut_note(*cut)
        )

    return check


def _cut_note(*points: Point) -> str:
    """A caveat when a point was ended by its time cap (its throughput is understated)."""
    cut = [p for p in points if p.incomplete]
    if not cut:
        return ""
    return "; time cap cut " + ", ".join(f"{p.label} at c={p.concurrency} ({p.incomplete} in flight)" for p in cut)


def claims_table(results: list[EngineResult]) -> pd.DataFrame:
    """Claimed vs measured, one row per registered claim."""
    rows = []
    for c in CLAIMS.values():
        text, seed, m = c.text, c.seed, c.check(results)
        rows.append(
            {
                "claim": text,
                "seed says": seed,
                "measured here": m.value if m else "not measured in this run",
                "basis": m.basis if m else "",
            }
        )
    return pd.DataFrame(rows)


CLAIMS: Registry[Claim] = Registry("claim")
for _text, _seed, _check in (
    (
        "SGLang / vLLM total throughput at high concurrency",
        "≈1.30 (16.2k vs 12.5k tok/s, seed 000 §5.2)",
        _sglang_vs_vllm,
    ),
    (
        "Continuous batching gain (batching on vs off at the same load)",
        "3-10× (seed 000 appendix)",
        _batching,
    ),
    ("Prefix caching saves prefill (shared prefix, cache on vs off)", "80-90% of prefill (seed 000)", _prefix),
    (
        "SGLang leads multi-turn throughput (RadixAttention)",
        "~30% ahead of vLLM (seed 000 §5.2)",
        _multi_turn_lead,
    ),
    ("vLLM cold start", "62 s (seed 003 §4.3, 70B on H100)", _cold_start("vllm")),
    ("SGLang cold start", "not given by the seeds", _cold_start("sglang")),
    (
        "TensorRT-LLM cold start",
        "28 min first engine build; ~90 s PyTorch backend (seed 003 §4.3)",
        _cold_start("trtllm"),
    ),
    ("vLLM total throughput at the highest concurrency", "~12,500 tok/s (seed 000 §5.2: 70B FP8, one H100)", _vllm_abs),
    (
        "FP8 weights / bf16, same engine and load",
        "1.5-2× faster at < 1% accuracy loss (seed 003 §5.1)",
        _speedup("quantization", "FP8 weights vs the same configuration in bf16"),
    ),
    (
        "Speculative decoding speed-up",
        "2-3× (seed 000); 2-5× (seed 003 §6.2); TensorRT-LLM up to 3.6×",
        _speedup("speculative", "with vs without speculative decoding"),
    ),
    (
        "LMDeploy / vLLM total throughput at high concurrency",
        "≈1.30, level with SGLang (LMDeploy ≈ SGLang ≈ 16.2k vs vLLM 12.5k tok/s, seed 000 §5.2: 70B FP8)",
        _lmdeploy_vs_vllm,
    ),
):
    CLAIMS.add(_text, Claim(_text, _seed, _check))
