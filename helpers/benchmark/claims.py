"""The seeds' claims beside what this run measured (checklist step 5).

Each claim is a registered check that reads the run's engine results (with the config and model shape
they were measured with: ``claim_conditions.ClaimInputs``) and returns the measured value with how it was
computed, or says plainly that this run did not measure it. The seed numbers are from seed 000 (appendix)
and seed 003 (§4.1-4.3); they were measured on an H100 SXM5 80GB with Llama 3.3 70B FP8 and 512 input /
256 output tokens, so the throughput claims compare only on that model shape and at the seed's load
(``claim_conditions``), the batching claim reads the continuous-vs-static comparison (``batching``), and a
variant's speed-up (FP8, speculative decoding) is read from repeated trials where both sides have them,
with the prompts' conditions said (``workload.prompts``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import pandas as pd

from helpers.benchmark.batching import batching_labels, batching_pairs, conditions
from helpers.benchmark.claim_conditions import (
    ClaimInputs,
    at_seed_load,
    claim_inputs,
    gpu_note,
    prompt_conditions,
    reference_text,
    seed_shape_problem,
    shape_text,
    sweep,
    trial_speedup,
)
from helpers.benchmark.sla import settle_estimates
from helpers.benchmark.speculative import speedups
from helpers.core.config import PlaybookConfig
from helpers.core.registry import Registry
from helpers.engines import ENGINES
from helpers.run.records import EngineResult, Point


@dataclass(frozen=True)
class Measured:
    """A measured value as text and the basis it was computed on."""

    value: str
    basis: str


Check = Callable[[ClaimInputs], Measured | None]


@dataclass(frozen=True)
class Claim:
    """A seed claim: its text, what the seed says, and the check that reads this run's results."""

    text: str
    seed: str
    check: Check


def _family(r: EngineResult) -> str:
    return ENGINES[r.engine].family if r.engine in ENGINES else ""


def _ok(results: list[EngineResult], family: str) -> list[EngineResult]:
    return [r for r in results if _family(r) == family and sweep(r)]


def _prefix_on(r: EngineResult, on: bool) -> bool:
    knob = next((p.knobs.get("prefix_caching") for p in r.points), None)
    return (knob is None and on) or knob is on


def _ratio_at_seed(inputs: ClaimInputs, a: EngineResult, b: EngineResult) -> tuple[str, str, list[Point]]:
    """(value, basis, points) of a's total throughput over b's under the seed's conditions, or why not."""
    problem = seed_shape_problem(inputs, a, b)
    load = at_seed_load(inputs, a, b) if problem is None else None
    if problem is not None or isinstance(load, str):
        why = problem or str(load)
        return why, reference_text(inputs, a, b), []
    assert load is not None and not isinstance(load, str)
    return (
        f"{load.a_tok_s / load.b_tok_s:.2f}",
        f"{load.a_tok_s:,.0f} / {load.b_tok_s:,.0f} total tok/s {load.where} ({a.label} / {b.label}){gpu_note(inputs)}",
        list(load.points),
    )


def _sglang_vs_vllm(inputs: ClaimInputs) -> Measured | None:
    results = inputs.results
    v, s = _ok(results, "vllm"), _ok(results, "sglang")
    if not v or not s:
        return None
    value, basis, points = _ratio_at_seed(inputs, s[0], v[0])
    return Measured(value, basis + _cut_note(*points))


def _multi_turn(r: EngineResult) -> Point | None:
    """The multi-turn replay of ``r`` (phase structured), if it was measured with prefix caching not off."""
    return next(
        (p for p in r.points if p.phase == "structured" and p.structure is not None and p.requests > 0
         and p.structure.workload == "multi-turn" and p.structure.prefix_caching is not False),
        None,
    )  # fmt: skip


def _multi_turn_lead(inputs: ClaimInputs) -> Measured | None:
    """SGLang's output throughput over vLLM's on the same multi-turn sessions, with each one's achieved hit rate."""
    results = inputs.results
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


def _batching(inputs: ClaimInputs) -> Measured | None:
    """Continuous over static batching, same engine, concurrency and requests (``helpers.benchmark.batching``).

    Throughput at concurrency N over throughput at concurrency 1 is not this gain (both batch as much as their
    load allows), so without the comparison the row says it was not measured and why.
    """
    pairs = batching_pairs(inputs.results)
    if not pairs:
        cfg = inputs.cfg
        if cfg is not None and batching_labels(cfg):
            why = f"batching.enabled, but no comparison was stored for {', '.join(batching_labels(cfg))}"
        else:
            why = ("batching.enabled is false in this config: the comparison is optional (one load per static "
                   "wave, about 10 s of load-generator start-up each on two CPU cores, so the CPU default leaves "
                   "it out; playbook/workloads/cpu-claims.yaml measures it)")  # fmt: skip
        return Measured(f"not measured in this run: {why}", "a c=N ÷ c=1 throughput ratio is concurrency scaling, "
                        "not the continuous-batching gain, so none is shown")  # fmt: skip
    values = [f"{r.label}: {c.output_tok_s / s.output_tok_s:.2f}× continuous ÷ static" for r, s, c in pairs]
    bases = [
        f"{r.label}: {c.output_tok_s:,.1f} / {s.output_tok_s:,.1f} output tok/s, continuous admission vs static "
        f"waves (each waits for its slowest request), {conditions(s)}"
        for r, s, c in pairs
    ]
    return Measured(", ".join(values), "; ".join(bases) + _cut_note(*(p for _, s, c in pairs for p in (s, c))))


def _prefix(inputs: ClaimInputs) -> Measured | None:
    results, values, bases = inputs.results, [], []
    for fam in ("vllm", "sglang", "trtllm"):
        rs = _ok(results, fam)
        on = [r for r in rs if _prefix_on(r, True)]
        off = [r for r in rs if _prefix_on(r, False)]
        if not (on and off):
            continue
        common = sorted(set(sweep(on[0])) & set(sweep(off[0])))
        if not common:
            continue
        c = common[-1]  # the busiest common level: where recomputing the prefix costs most
        a, b = sweep(on[0])[c], sweep(off[0])[c]
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

    def check(inputs: ClaimInputs) -> Measured | None:
        rs = [r for r in inputs.results if _family(r) == family and r.cold_start_s]
        if not rs:
            return None
        return Measured(", ".join(f"{r.label}: {r.cold_start_s:.0f} s" for r in rs), "launch → first completed request")

    return check


def _vllm_abs(inputs: ClaimInputs) -> Measured | None:
    """The vLLM total throughput at concurrency 100 (else its SLA capacity), on the seed's model shape only."""
    rs = _ok(inputs.results, "vllm")
    if not rs:
        return None
    r = rs[0]
    sw = sweep(r)
    c = max(sw)
    ref = (
        f"for reference, {sw[c].total_tok_s:,.0f} total tok/s at concurrency {c} ({r.label}), not the seed's condition"
    )
    problem = seed_shape_problem(inputs, r)
    if problem is not None:
        return Measured(problem, ref)
    load = at_seed_load(inputs, r, r)
    if isinstance(load, str):
        return Measured(load.replace("common concurrency", "concurrency"), ref)
    return Measured(
        f"{load.a_tok_s:,.0f} total tok/s",
        f"{r.label} {load.where}, {shape_text(inputs, r)}{gpu_note(inputs)}" + _cut_note(*load.points[:1]),
    )


def _lmdeploy_vs_vllm(inputs: ClaimInputs) -> Measured | None:
    """Each LMDeploy configuration's total throughput over vLLM's under the seed's conditions (SGLang's beside)."""
    results = inputs.results
    v, lm = _ok(results, "vllm"), _ok(results, "lmdeploy")
    if not v or not lm:
        return None
    values, bases, cut = [], [], []
    for r in lm:
        value, basis, points = _ratio_at_seed(inputs, r, v[0])
        values.append(f"{r.label}: {value}")
        for s in _ok(results, "sglang")[:1]:
            s_value, _, _ = _ratio_at_seed(inputs, s, v[0])
            if points and not s_value.startswith("not"):
                basis += f"; SGLang / vLLM there {s_value} ({s.label})"
        bases.append(basis)
        cut += points
    return Measured("; ".join(values), "; ".join(b for b in bases if b) + _cut_note(*cut))


def _variant_pairs(results: list[EngineResult], knob: str) -> list[tuple[EngineResult, EngineResult]]:
    """(variant, baseline) pairs: same engine and knobs except ``knob``, which only the variant sets."""

    def knobs(r: EngineResult) -> dict:
        return next((dict(p.knobs) for p in r.points if p.phase == "sweep"), {})

    measured = [r for r in results if sweep(r)]
    pairs = []
    for v in (r for r in measured if knobs(r).get(knob) not in (None, "none")):
        rest = {k: x for k, x in knobs(v).items() if k != knob}
        base = next((b for b in measured if b.engine == v.engine and b is not v and knobs(b) == rest), None)
        if base is not None:
            pairs.append((v, base))
    return pairs


def _accepted(v: EngineResult) -> str:
    """The engine's mean draft acceptance over the variant's trials (else its sweep), when it counted drafts."""
    pts = [p for p in v.points if p.phase == "trial"] or [p for p in v.points if p.phase == "sweep"]
    rates = [p.server.spec_decode.acceptance_rate for p in pts if p.server.spec_decode]
    rates = [x for x in rates if x is not None]
    return f"; drafts accepted {sum(rates) / len(rates):.0%} on average (engine counters)" if rates else ""


def _speedup(knob: str, what: str) -> Check:
    """A check of a knob's variants over their baselines: from repeated trials where both have them, else grid.

    Grid points are single samples per level and are labelled so; the conditions of the prompts are said.
    """

    def check(inputs: ClaimInputs) -> Measured | None:
        values, bases, cut = [], [], []
        for v, b in _variant_pairs(inputs.results, knob):
            cond = f" ({what}; {prompt_conditions(inputs, v, drafting=knob == 'speculative')}{_accepted(v)})"
            trial = trial_speedup(v, b, inputs.cfg)
            if trial is not None:
                values.append(trial[0])
                bases.append(trial[1] + cond)
                continue
            sv, sb = sweep(v), sweep(b)
            tok_s = {key: {c: p.output_tok_s for c, p in pts.items()} for key, pts in (("variant", sv), ("base", sb))}
            ratio = speedups(tok_s, "base")["variant"]
            pairs = [(c, sv[c], sb[c]) for c in sorted(sv) if ratio[c] is not None]
            if not pairs:
                continue
            values.append(f"{v.label}: " + ", ".join(f"{ratio[c]:.2f}× at c={c}" for c, _, _ in pairs)
                          + " (single grid samples)")  # fmt: skip
            bases.append(
                f"output tok/s of {v.label} ÷ {b.label}: "
                + ", ".join(f"{pv.output_tok_s:,.0f} / {pb.output_tok_s:,.0f}" for _, pv, pb in pairs)
                + " — single grid samples, no trials of both"
                + cond
            )
            cut += [p for _, pv, pb in pairs for p in (pv, pb)]
        if not values:
            return None
        return Measured("; ".join(values), "; ".join(bases) + _cut_note(*cut))

    return check


def _cut_note(*points: Point) -> str:
    """A caveat when a point was ended by its time cap (its throughput is understated)."""
    cut = [p for p in points if p.incomplete]
    if not cut:
        return ""
    return "; time cap cut " + ", ".join(f"{p.label} at c={p.concurrency} ({p.incomplete} in flight)" for p in cut)


def claims_table(
    results: list[EngineResult], cfg: PlaybookConfig | None = None, gpu: str | None = None
) -> pd.DataFrame:
    """Claimed vs measured, one row per registered claim.

    ``cfg`` (the run's config) gives the model shape, the SLA capacities and the prompts' conditions; without
    it the throughput claims say the shape is not known. ``gpu`` names the GPU measured on.
    """
    if cfg is not None:
        settle_estimates(results, cfg)
    rows, inputs = [], claim_inputs(results, cfg, gpu)
    for c in CLAIMS.values():
        text, seed, m = c.text, c.seed, c.check(inputs)
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
        "≈1.30 (16.2k vs 12.5k tok/s, seed 000 §5.2: 70B FP8, one H100, 100 concurrent)",
        _sglang_vs_vllm,
    ),
    (
        "Continuous batching gain (continuous admission vs static waves, same engine and concurrency)",
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
    (
        "vLLM total throughput at high concurrency",
        "~12,500 tok/s (seed 000 §5.2: 70B FP8, one H100, 100 concurrent)",
        _vllm_abs,
    ),
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
