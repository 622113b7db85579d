"""The seeds' engine table beside this run's engines (checklist step 5, shown after the claims).

Seed 000 §5.2 gives one table (one 80 GB GPU, Llama 3.3 70B FP8, total tok/s): vLLM ~12,500 (100%), SGLang
~16,200 (130%), LMDeploy ~16,200 (130%), TensorRT-LLM ~14,500-16,500 (116-132%). Each engine configuration of
the run gets a row with what it measured at the seeds' load (the sweep point at concurrency 100: one grid
sample, no interval) and at its SLA capacity (``sla.representative``: output and total tok/s with their 95%
intervals), its ratio to vLLM at both (at the capacity with the interval of ``claim_conditions.trial_speedup``),
and whether the seed's figure is comparable at all (``claim_conditions.seed_shape_problem``: the seed's model
shape; the GPU is said). A cell that was not measured says why; an engine of the seed's table that the run
has no result for gets a row that says why (TensorRT-LLM: no installable wheel, and what fills the row).
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from helpers.benchmark.claim_conditions import (
    SEED_CONCURRENCY,
    claim_inputs,
    gpu_note,
    seed_shape_problem,
    sweep,
    trial_speedup,
)
from helpers.benchmark.sla import representative
from helpers.core.config import PlaybookConfig
from helpers.engines import ENGINES
from helpers.run.records import EngineResult


@dataclass(frozen=True)
class SeedEngine:
    """One row of the seed's table: the engine family, its figure and its share of vLLM's, as the seed writes them."""

    family: str
    name: str
    tok_s: str
    share: str
    backend: str | None = None  # the engine's default backend, which a figure without one is of


SEED_TABLE = (
    SeedEngine("vllm", "vLLM", "~12,500", "100%"),
    SeedEngine("sglang", "SGLang", "~16,200", "130%"),
    SeedEngine("lmdeploy", "LMDeploy", "~16,200", "130%", backend="turbomind"),
    SeedEngine("trtllm", "TensorRT-LLM", "~14,500-16,500", "116-132%"),
)
SEED_SOURCE = "seed 000 §5.2 (one 80 GB GPU, Llama 3.3 70B FP8, total tok/s)"
TITLE = (
    "The seeds' engine table beside this run's engines: output / total tok/s at the seeds' load (concurrency 100) "
    "and at each one's SLA capacity (95% intervals), the ratio to vLLM, and the seed's figure"
)
TRTLLM_ABSENT = (
    "no installable TensorRT-LLM for this Python in the package registry (tensorrt-llm 1.2.1 pins "
    "torch ≤ 2.10, and its PyPI package is a stub that downloads from NVIDIA's index); its adapter is tested on "
    "the commands it builds. To fill this row where TensorRT-LLM is installed: add an engine `engine: trtllm` with "
    "`launcher: {kind: python, python: <its interpreter>}` (it runs `trtllm-serve serve MODEL`), or start "
    "`trtllm-serve serve MODEL` yourself and add it as `engine: endpoint` with `launcher: {kind: endpoint, url: "
    "...}`; then `playbook run CONFIG --engines LABEL`"
)
ABSENT = {
    "lmdeploy": "; playbook/workloads/h200-offline/chat-8b-turbomind.yaml (Llama-3.1-8B bf16) and "
    "chat-70b-fp8-turbomind.yaml (the seed's Llama-3.3-70B FP8) measure LMDeploy's TurboMind beside vLLM and SGLang",
}
REFERENCE = "1 (the reference)"
WHY = "why not measured / how to fill the row"
MEASURED_COLUMNS = (
    "at concurrency 100",
    "÷ vLLM at concurrency 100",
    "at the SLA capacity",
    "÷ vLLM at the SLA capacity",
)


def _family(r: EngineResult) -> str:
    return ENGINES[r.engine].family if r.engine in ENGINES else r.engine


def _at_load(r: EngineResult) -> str:
    """Output / total tok/s of the sweep point at concurrency 100, or why there is none."""
    sw = sweep(r)
    p = sw.get(SEED_CONCURRENCY)
    if p is None:
        levels = ", ".join(str(c) for c in sorted(sw)) or "none"
        return f"not measured: this run's grid is {levels}, not {SEED_CONCURRENCY}"
    cut = f"; the time cap cut it ({p.incomplete} in flight): understated" if p.incomplete else ""
    return f"{p.output_tok_s:,.0f} / {p.total_tok_s:,.0f} (one grid sample, no interval{cut})"


def _load_ratio(r: EngineResult, v: EngineResult | None) -> str:
    """Total tok/s over vLLM's at concurrency 100, or why not."""
    if v is None:
        return "not measured: no vLLM configuration measured in this run"
    a, b = sweep(r).get(SEED_CONCURRENCY), sweep(v).get(SEED_CONCURRENCY)
    if a is None or b is None or not b.total_tok_s:
        return f"not measured: no {'' if a is None else 'vLLM '}point at concurrency {SEED_CONCURRENCY}"
    if r is v:
        return REFERENCE
    return f"{a.total_tok_s / b.total_tok_s:.2f} ({a.total_tok_s:,.0f} / {b.total_tok_s:,.0f} total tok/s)"


def _at_capacity(r: EngineResult, cfg: PlaybookConfig) -> str:
    """Output / total tok/s of what stands for ``r`` (its SLA capacity, or fixed-load trials), or why not."""
    rep = representative(r, cfg)
    if rep.source not in ("capacity", "fixed") or rep.output_tok_s is None or rep.total_tok_s is None:
        return f"not measured: {rep.basis or 'no SLA capacity'}"
    where = (
        f"at {rep.request_rate.text('{:,.2f}')} req/s" if rep.source == "capacity" and rep.request_rate
        else f"trials at a fixed concurrency {rep.concurrency} (no capacity search)"
    )  # fmt: skip
    sla = "" if rep.meets_sla else ", missed the SLA"
    figures = f"{rep.output_tok_s.text()} / {rep.total_tok_s.text()} {where}{sla}"
    return f"≥ {figures} (a lower bound: no failing load sized)" if rep.lower_bound else figures


def _capacity_ratio(r: EngineResult, v: EngineResult | None, cfg: PlaybookConfig) -> str:
    """The ratio of SLA capacities to vLLM's with its interval (``trial_speedup``), else of the means, or why not."""
    if v is None:
        return "not measured: no vLLM configuration measured in this run"
    if r is v:
        return REFERENCE if representative(r, cfg).total_tok_s is not None else "not measured: no SLA capacity"
    found = trial_speedup(r, v, cfg)
    if found is not None:
        return found[0].removeprefix(f"{r.label}: ")
    a, b = representative(r, cfg), representative(v, cfg)
    if a.total_tok_s is None or b.total_tok_s is None or not b.total_tok_s.mean:
        return "not measured: " + ("no SLA capacity of this configuration" if a.total_tok_s is None
                                   else "no SLA capacity of vLLM")  # fmt: skip
    return f"{a.total_tok_s.mean / b.total_tok_s.mean:.2f} (means only: no interval for this pair)"


def _against_seed(r: EngineResult, seed: SeedEngine | None, cfg: PlaybookConfig, gpu: str | None) -> str:
    """Whether the seed's figure compares with this row: its model shape and backend, the GPU said."""
    if seed is None:
        return "not in the seed's table"
    inputs = claim_inputs([r], cfg, gpu)
    problem = seed_shape_problem(inputs, r)
    spec = next((e for e in cfg.engines if e.label == r.label), None)
    backend = spec.engine_options.get("backend", seed.backend) if spec is not None else seed.backend
    if seed.backend is not None and backend != seed.backend:
        why = f"the {backend} backend, not {seed.backend} (the engine's default, which the seed's figure is of)"
        problem = f"{problem}; {why}" if problem else f"not comparable: {why}"
    return problem or f"comparable: the seed's model shape{gpu_note(inputs)}"


def engine_table(results: list[EngineResult], cfg: PlaybookConfig, gpu: str | None = None) -> pd.DataFrame:
    """One row per engine configuration of the run (in the seed's order), then one per seed engine it lacks."""
    seeds = {s.family: s for s in SEED_TABLE}
    order = {s.family: i for i, s in enumerate(SEED_TABLE)}
    ordered = sorted(results, key=lambda r: order.get(_family(r), len(order)))
    v = next((r for r in ordered if _family(r) == "vllm" and r.points), None)
    rows = []
    for r in ordered:
        seed = seeds.get(_family(r))
        row = {"engine": seed.name if seed else ENGINES[r.engine].display_name if r.engine in ENGINES else r.engine}
        row |= {"configuration": r.label, SEED_SOURCE: f"{seed.tok_s} ({seed.share})" if seed else "—"}
        if not r.points:
            row |= dict.fromkeys(MEASURED_COLUMNS, f"not measured (see '{WHY}')")
            row |= {"against the seed's figure": "no measurement to set against it"}
            rows.append(row | {WHY: f"{r.status}: {r.reason or 'no point measured'}"})
            continue
        row |= {
            MEASURED_COLUMNS[0]: _at_load(r),
            MEASURED_COLUMNS[1]: _load_ratio(r, v),
            MEASURED_COLUMNS[2]: _at_capacity(r, cfg),
            MEASURED_COLUMNS[3]: _capacity_ratio(r, v, cfg),
        }
        rows.append(row | {"against the seed's figure": _against_seed(r, seed, cfg, gpu), WHY: ""})
    measured = {_family(r) for r in results}
    for seed in (s for s in SEED_TABLE if s.family not in measured):
        why = TRTLLM_ABSENT if seed.family == "trtllm" else f"not in this run's config{ABSENT.get(seed.family, '')}"
        rows.append(
            {"engine": seed.name, "configuration": "—", SEED_SOURCE: f"{seed.tok_s} ({seed.share})"}
            | dict.fromkeys(MEASURED_COLUMNS, f"not measured (see '{WHY}')")
            | {"against the seed's figure": "no measurement to set against it", WHY: why}
        )
    return pd.DataFrame(rows)
