"""The conditions a seed claim was measured under, and whether this run's measurement meets them.

The seeds' throughput figures (seed 000 §5.2, seed 003 §4.1) were measured on one H100 SXM5 80GB serving
Llama 3.3 70B FP8 at 100 concurrent requests (512 input / 256 output tokens). A figure of this run is set
against them only on the same model shape (``seed_shape_problem``) and at the seed's load: the sweep point
at concurrency 100 of both sides, else both sides' repeated trials at their SLA capacity (``at_seed_load``).
Anything else is a row that says why it is not comparable, with this run's figure beside it for reference.
A variant's speed-up is read from what stands for both sides where it exists (``trial_speedup``: the ratio of
their SLA capacities with its interval, or their fixed-load trials with Welch's), and said with the prompts
and weights it was measured on (``prompt_conditions``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from helpers.benchmark.capacity_compare import compare_capacities
from helpers.benchmark.judged import load_of
from helpers.benchmark.sla import capacity_side, representative, standing_points
from helpers.benchmark.stats import compare
from helpers.core.config import PlaybookConfig
from helpers.core.errors import PlaybookError
from helpers.model.shape import ModelShape, count_parameters, read_model_shape
from helpers.run.records import EngineResult, Point

SEED_MODEL = "Llama 3.3 70B FP8"
SEED_SHAPE = {"hidden_size": 8192, "intermediate_size": 28672, "num_layers": 80, "num_heads": 64, "num_kv_heads": 8}
"""Llama 3.3 70B's ``config.json`` figures (the same as ``playbook/models/llama-3.3-70b-fp8``)."""
SEED_CONCURRENCY = 100
SERVED_DTYPE = {"float32": "fp32", "bfloat16": "bf16", "float16": "fp16", "half": "fp16"}
"""``model.dtype`` as the weights' precision of an unquantized checkpoint (``auto``: the checkpoint's own)."""
SEED_GPU = "H100 SXM5 80GB"


@dataclass(frozen=True)
class ClaimInputs:
    """What the claim checks read: the results, and the config and model shape they were measured with."""

    results: list[EngineResult]
    cfg: PlaybookConfig | None = None
    shape: ModelShape | None = None
    gpu: str | None = None


def claim_inputs(results: list[EngineResult], cfg: PlaybookConfig | None = None, gpu: str | None = None) -> ClaimInputs:
    """The inputs of the claims table; the model shape is read from the config's model folder when it has one."""
    shape = None
    if cfg is not None:
        try:
            shape = read_model_shape(cfg.model.directory)
        except (PlaybookError, OSError):
            shape = None
    return ClaimInputs(results=results, cfg=cfg, shape=shape, gpu=gpu)


def precision(inputs: ClaimInputs, r: EngineResult) -> str:
    """The weights' precision of ``r``: FP8 by its knob or by the checkpoint, else the checkpoint's."""
    knobs = next((p.knobs for p in r.points), {})
    if knobs.get("quantization") == "fp8":
        return "fp8"
    if inputs.shape is None:
        return "unknown"
    served = SERVED_DTYPE.get(inputs.cfg.model.dtype if inputs.cfg is not None else "auto")
    return served if served and inputs.shape.checkpoint_precision == "bf16" else inputs.shape.checkpoint_precision


def shape_text(inputs: ClaimInputs, r: EngineResult) -> str:
    """The model shape of ``r`` in words, e.g. ``llama-3.1-8b: 8.0B parameters, 32 layers, bf16 weights``."""
    s = inputs.shape
    if s is None:
        return "not known (no model folder read)"
    billions = count_parameters(s).total / 1e9
    return f"{s.name}: {billions:.1f}B parameters, {s.num_layers} layers, hidden {s.hidden_size}, " + (
        f"{precision(inputs, r)} weights"
    )


def seed_shape_problem(inputs: ClaimInputs, *results: EngineResult) -> str | None:
    """Why ``results`` are not on the seed's model shape (None when they are)."""
    s = inputs.shape
    if s is None:
        return f"not comparable: the model shape is not known (the seed's: {SEED_MODEL})"
    same = all(getattr(s, k) == v for k, v in SEED_SHAPE.items())
    for r in results:
        if not same or precision(inputs, r) != "fp8":
            return f"not comparable: model shape {shape_text(inputs, r)} (the seed's: {SEED_MODEL})"
    return None


def sweep(r: EngineResult) -> dict[int, Point]:
    """The configuration's sweep points by concurrency."""
    return {p.concurrency: p for p in r.points if p.phase == "sweep" and p.requests > 0}


@dataclass(frozen=True)
class AtLoad:
    """Two configurations' total throughput at the seed's load, and where it was measured."""

    a_tok_s: float
    b_tok_s: float
    where: str
    points: tuple[Point, ...] = ()


def at_seed_load(inputs: ClaimInputs, a: EngineResult, b: EngineResult) -> AtLoad | str:
    """Total tok/s of ``a`` and ``b`` at concurrency 100, else at their SLA capacities; or why neither exists."""
    sa, sb = sweep(a), sweep(b)
    if SEED_CONCURRENCY in sa and SEED_CONCURRENCY in sb:
        pa, pb = sa[SEED_CONCURRENCY], sb[SEED_CONCURRENCY]
        return AtLoad(pa.total_tok_s, pb.total_tok_s, f"at concurrency {SEED_CONCURRENCY}", (pa, pb))
    if inputs.cfg is not None:
        ra, rb = representative(a, inputs.cfg), representative(b, inputs.cfg)
        if ra.source == rb.source == "capacity" and ra.total_tok_s and rb.total_tok_s:
            rates = [x.request_rate.mean if x.request_rate else 0.0 for x in ((ra,) if a is b else (ra, rb))]
            each = "its SLA capacity" if a is b else "each one's SLA capacity"
            where = f"at {each} ({' and '.join(f'{x:,.2f}' for x in rates)} req/s)"
            return AtLoad(ra.total_tok_s.mean, rb.total_tok_s.mean, where)
    common = sorted(set(sa) & set(sb))
    top = f"the highest common concurrency is {common[-1]}" if common else "no common concurrency"
    return (f"not measured at the seed's load: {top}, the seed's is {SEED_CONCURRENCY} (or the SLA capacity, "
            "not estimated here)")  # fmt: skip


def reference_text(inputs: ClaimInputs, a: EngineResult, b: EngineResult) -> str:
    """The ratio at the run's highest common sweep level, for reference under a 'not comparable' row."""
    sa, sb = sweep(a), sweep(b)
    common = sorted(set(sa) & set(sb))
    if not common:
        return ""
    c = common[-1]
    pa, pb = sa[c], sb[c]
    ratio = pa.total_tok_s / pb.total_tok_s if pb.total_tok_s else float("nan")
    return (f"for reference, {ratio:.2f} ({pa.total_tok_s:,.0f} / {pb.total_tok_s:,.0f} total tok/s) at concurrency "
            f"{c} ({a.label} / {b.label}), not the seed's condition")  # fmt: skip


def gpu_note(inputs: ClaimInputs) -> str:
    """A caveat when the GPU is not the seed's (the seed measured on one H100 SXM5)."""
    if not inputs.gpu or "H100" in inputs.gpu:
        return ""
    return f"; measured on {inputs.gpu}, the seed on one {SEED_GPU}"


def _bound_text(v: EngineResult, b: EngineResult, ratio: float, cfg: PlaybookConfig) -> str | None:
    """The ratio of ``v``'s capacity to ``b``'s as a bound when either capacity is only "at least"; else None.

    A search that never sized a failing load gives a lower bound (``Representative.lower_bound``).
    """
    low_v, low_b = (representative(r, cfg).lower_bound for r in (v, b))
    if low_v and low_b:
        return f"no ratio: both capacities are lower bounds ({ratio:.2f}× of the bounds)"
    if low_v:
        return f"≥ {ratio:.2f}× (its capacity is a lower bound)"
    if low_b:
        return f"≤ {ratio:.2f}× ({b.label}'s capacity is a lower bound)"
    return None


def trial_speedup(v: EngineResult, b: EngineResult, cfg: PlaybookConfig | None = None) -> tuple[str, str] | None:
    """(value, basis) of ``v`` over ``b`` from what stands for each, with the 95% interval.

    Both searched: the ratio of their SLA capacities per accelerator (``capacity_compare``, paired where they
    ran the same streams). Both at the same fixed load: their trials' output tok/s (Welch). None otherwise.
    """
    cv, cb = v.capacity, b.capacity
    if cv is None or cb is None or cv.axis != cb.axis or cv.searched != cb.searched:
        return None
    if cv.searched:
        sv = capacity_side(v, cfg, 1) if cfg is not None else None
        sb = capacity_side(b, cfg, 1) if cfg is not None else None
        if sv is None or sb is None:
            return None
        d = compare_capacities(sv, sb, margin=cfg.evidence.equivalence_margin if cfg else 0.05)
        if d.ratio is None:
            return None
        lo = "unbounded" if d.low is None else f"{100 * (d.low - 1):+.1f}"
        hi = "unbounded" if d.high is None else f"{100 * (d.high - 1):+.1f}"
        how = f"paired over {d.pairs} streams" if d.paired else "unpaired"
        value = f"{v.label}: {d.ratio:.2f}× ({100 * (d.ratio - 1):+.1f}% [{lo}, {hi}] 95% CI, SLA capacities, {how})"
        bound = _bound_text(v, b, d.ratio, cfg) if cfg is not None else None
        if bound:
            value = f"{v.label}: {bound}"
        basis = f"{v.label} ÷ {b.label}: requests served per second at the SLA capacity ({d.verdict.replace('_', ' ')})"
        return value, basis
    tv, tb = standing_points(v), standing_points(b)
    if len(tv) < 2 or len(tb) < 2 or cv.trial_load != cb.trial_load:
        return None
    cmp = compare([p.output_tok_s for p in tv], [p.output_tok_s for p in tb])
    if cmp.rel_diff_pct is None:
        return None
    where = f"at a fixed {load_of(tv[0], cv.axis):g} streams"
    value = (f"{v.label}: {1 + cmp.rel_diff_pct / 100:.2f}× ({cmp.rel_diff_pct:+.1f}% [{cmp.rel_low_pct:+.1f}, "
             f"{cmp.rel_high_pct:+.1f}] 95% CI, trials {where})")  # fmt: skip
    basis = (f"{v.label} ÷ {b.label}: mean output tok/s {cmp.a.mean:,.0f} / {cmp.b.mean:,.0f} over {len(tv)} and "
             f"{len(tb)} trial(s) (Welch)")  # fmt: skip
    return value, basis


def sampling(spec: object) -> str:
    """``greedy`` when the configuration's extra flags set the engine's default temperature to 0, else its default.

    The load generator sends no temperature, so the engine's default sampling applies (vLLM's
    ``--override-generation-config`` changes it).
    """
    args = list(getattr(spec, "extra_args", []) or [])
    for flag, value in zip(args, args[1:], strict=False):
        if flag == "--override-generation-config" and re.search(r'"temperature"\s*:\s*0(\.0*)?\b', value):
            return "greedy decoding"
    return "the engine's default sampling"


def prompt_conditions(inputs: ClaimInputs, v: EngineResult, drafting: bool = False) -> str:
    """The model, prompts and weights a variant was measured with, in words.

    ``drafting`` (speculative decoding): say whether the prompts give n-gram drafting anything to copy.
    """
    cfg = inputs.cfg
    if cfg is None:
        return "model, prompts and weights not known"
    spec = next((e for e in cfg.engines if e.label == v.label), None)
    weights = "random weights" if spec is not None and spec.placeholder_weights else "real weights"
    wl = cfg.workload
    lengths = f"{wl.input_tokens} prompt / {wl.output_tokens} output tokens, {sampling(spec)}"
    model = shape_text(inputs, v)
    if wl.prompts == "edit-text":
        return f"{model}; edit-this-text prompts (the answer repeats the prompt), {weights}, {lengths}"
    copy = (" (nothing to copy: not the condition n-gram drafting is for; workload.prompts: edit-text is)"
            if drafting else "")  # fmt: skip
    return f"{model}; random-word prompts{copy}, {weights}, {lengths}"
