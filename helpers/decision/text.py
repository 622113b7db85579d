"""The written side of step 7: warnings, reasons, the four-sentence answer, the phase plan.

The choice itself (primary, backup, the evidence verdict) is made in ``decision.choice.choose``; this module
only words it.

Every number in the sentences is formatted from the rounded value stored in the decision's
tables (``DecisionResult.tables``), with ``ROUND`` giving the decimals, so a reader can trace it.
Identifiers (labels, GPU names) are written in backticks.
"""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

from helpers.core.config import PlaybookConfig
from helpers.cost.compute import family_of
from helpers.decision.choice import Choice
from helpers.decision.departures import concurrency_evidence
from helpers.decision.evidence import ESTIMATES_ONLY, qualify_break_even
from helpers.decision.scores import rank_candidates
from helpers.decision.tree import (
    DISPLAY,
    DecisionResult,
    EngineScore,
    Phase,
    TreeStep,
    rubric,
)
from helpers.run.records import EngineResult
from helpers.workload.facts import facts_of

ROUND = {
    "concurrency": 0, "request_rate": 2, "output_tok_s": 0, "ttft_ms_p95": 0, "sla_share": 2, "usd_per_mtok_output": 3,
    "price_per_hour": 2, "gpus": 0, "gpu_monthly_usd": 0, "ops_monthly_usd": 0, "tco_monthly_usd": 0,
    "demand_output_tok_s": 0, "demand_concurrency": 0, "build_s": 0, "sla_ttft_p95_ms": 0,
    "extra_ops_usd_month": 0, "gpu_saving_per_token_pct": 1, "break_even_output_tok_s": 0,
    "break_even_requests_per_s": 2, "break_even_gpus_easier": 1,
}  # fmt: skip


def _r(key: str, v: Any) -> Any:
    """Round a value for display the way the tables hold it (None/NaN → None)."""
    if v is None or (isinstance(v, float) and math.isnan(v)) or v is pd.NA:
        return None
    if key in ROUND and isinstance(v, int | float) and not isinstance(v, bool):
        return round(float(v), ROUND[key])
    return v


def _f(key: str, v: Any) -> str:
    """Format a table value exactly as the sentence shows it."""
    return f"{_r(key, v):,.{ROUND[key]}f}"


def config_warnings(cfg: PlaybookConfig, profile: Any, tree_family: str, results: list[EngineResult]) -> list[str]:
    """Answers that contradict each other or the engine list, failed engines, and edge cases."""
    w: list[str] = []
    configured = {family_of(e.engine) for e in cfg.engines}
    hw = cfg.hardware.vendors
    if tree_family not in configured:
        name, listed = DISPLAY[tree_family], ", ".join(sorted(e.label for e in cfg.engines))
        w.append(
            f"The decision tree points to {name}, but no {name} engine is in the config's engine list "
            f"({listed}): add one and measure it."
        )
    if hw != "nvidia-only" and "trtllm" in configured:
        only = " only" if configured == {"trtllm"} else ""
        w.append(
            f"Contradiction: hardware.vendors is {hw!r} but the engine list{only} holds TensorRT-LLM, "
            "which runs on NVIDIA only; its configurations cannot be primary."
        )
    if cfg.team.chase_peak and cfg.team.mlops_maturity == "low":
        w.append("Contradiction: team.chase_peak is true but team.mlops_maturity is 'low'; peak-chasing needs MLOps.")
    facts = facts_of(profile)
    ratio = facts.prefix_reuse_ratio
    if ratio is not None and ratio >= cfg.decision.prefix_reuse_threshold and cfg.workload.shared_prefix_tokens == 0:
        w.append(
            "The profile shows heavy prefix reuse but the benchmark workload had no shared prefix "
            "(workload.shared_prefix_tokens = 0), so the measurements do not show prefix-cache gains."
        )
    frequent_updates = cfg.cadence.updates_per_month >= cfg.decision.frequent_updates_per_month
    if ratio is not None and ratio >= cfg.decision.prefix_reuse_threshold and frequent_updates:
        w.append(
            "Edge case the tree does not weigh (the playbook's flag; seed 003 §3.5 leaves such cases to judgement): "
            "heavy prefix reuse (SGLang's case) with frequent model updates (vLLM's case, where the tree stops "
            "first); weigh the measured prefix-cache gain against the update cost."
        )
    if cfg.sla.ttft_p95_ms < 100:
        w.append(
            f"Edge case the seed leaves to judgement (seed 003 §6.3): an SLA under 100 ms "
            f"(TTFT p95 ≤ {cfg.sla.ttft_p95_ms:g} ms) is a latency-first deployment; the tree does not cover it."
        )
    conc, _, conc_words = concurrency_evidence(profile, results)
    if conc is not None and conc >= cfg.decision.high_concurrency and frequent_updates:
        w.append(
            "Edge case the seed leaves to judgement (seed 003 §3.5: 超高并发但模型频繁更新, very high concurrency "
            f"with frequent model updates): concurrency {conc:,.0f} ({conc_words}) with "
            f"{cfg.cadence.updates_per_month:g} update(s)/month; TensorRT-LLM's speed against its rebuilds: weigh "
            "the break-even table."
        )
    for r in results:
        if r.status in ("failed", "skipped"):
            w.append(f"`{r.label}` {r.status}: {r.reason or 'no reason recorded'}; it cannot be primary.")
    return w


def _evidence(fleet: pd.DataFrame, scores: list[EngineScore], sla: float) -> list[dict[str, Any]]:
    """Collect the rounded measured numbers per configuration (what the sentences quote)."""
    total = {s.label: s.total for s in scores}
    keep = ["label", "representative", "source", "family", "status", "concurrency", "request_rate", "lower_bound",
            "output_tok_s",
            "ttft_ms_p95", "sla_share",
            "usd_per_mtok_output", "priced_as", "price_per_hour", "demand_output_tok_s", "demand_concurrency",
            "gpus", "gpu_monthly_usd", "ops_monthly_usd", "tco_monthly_usd", "build_s"]  # fmt: skip
    rows = []
    for rec in fleet.to_dict("records") if not fleet.empty else []:
        row = {k: _r(k, rec.get(k)) for k in keep}
        row.update(sla_ttft_p95_ms=_r("sla_ttft_p95_ms", sla), total_score=total.get(rec["label"]))
        rows.append(row)
    return rows


def _load(row: dict[str, Any]) -> str:
    """Where a configuration's figure was measured: at its SLA capacity (req/s) or at a concurrency."""
    if row.get("source") == "capacity" and row.get("request_rate") is not None:
        if row.get("lower_bound"):
            rate = _f("request_rate", row["request_rate"])
            return f"at the highest load it passed ({rate} req/s served; its capacity is at least that)"
        return f"at its SLA capacity ({_f('request_rate', row['request_rate'])} req/s served)"
    if row.get("source") == "fixed":
        return f"in its trials at a fixed concurrency of {_f('concurrency', row['concurrency'])}"
    return f"at concurrency {_f('concurrency', row['concurrency'])}"


def _boundary(primary: str, backup: str | None, be: list[dict[str, Any]]) -> str:
    """Write the break-even clause of the cost sentence, preferring the primary/backup pair."""
    rows = [b for b in be if primary in (b["harder"], b["easier"]) and b["break_even_output_tok_s"] is not None]
    rows.sort(key=lambda b: backup not in (b["harder"], b["easier"]))
    for b in rows:
        t = _f("break_even_output_tok_s", b["break_even_output_tok_s"])
        if b["harder"] == primary:
            return f"it pays for its extra operations over `{b['easier']}` only above {t} output tok/s sustained"
        return f"`{b['harder']}` would pay for its extra operations above {t} output tok/s sustained"
    unmeasured = any(primary in (b["harder"], b["easier"]) and ESTIMATES_ONLY in (b.get("verdict") or "") for b in be)
    at = " at the estimates (their difference is not measured)" if unmeasured else ""
    return f"no faster-but-harder configuration pays off{at}, so the choice rests on the tree and the SLA"


def _named(row: dict[str, Any]) -> str:
    """The label in backticks and its engine in brackets, unless the label already names the engine."""
    name = DISPLAY[row["family"]]
    return f"`{row['label']}`" if name.lower() in row["label"].lower() else f"`{row['label']}` ({name})"


def _overrule(label: str, scores: list[EngineScore], tree_fam: str, ev: dict[str, dict], conclusive: bool) -> str:
    """The sentence that says the measurements overrule the tree.

    On estimates when the verdict is not conclusive; the tree's engine's capacity said to be a lower bound
    where it is one.
    """
    tree_name = DISPLAY[tree_fam]
    best_f = next(s for s in rank_candidates(scores, tree_fam) if s.family == tree_fam)
    top = next(s for s in scores if s.label == label)
    hedge = "These" if conclusive else "At the estimates (not conclusive), these"
    bound = ", its capacity only a lower bound" if ev.get(best_f.label, {}).get("lower_bound") else ""
    return (
        f"{hedge} measurements overrule the tree's {tree_name} verdict: `{label}` scores {top.total:.3f} against "
        f"{best_f.total:.3f} for `{best_f.label}`, the best {tree_name} configuration{bound}."
    )


def _sentences(res: dict[str, Any], steps: list[TreeStep], scores: list[EngineScore]) -> list[str]:
    """Write the four-sentence answer: conclusion, 2-3 sentences of derivation, one of cost/boundary."""
    end = next(s for s in steps if s.step == res["tree_end_step"])
    tree_fam = res["tree_family"]
    tree_name = DISPLAY[tree_fam]
    tree_s = f"The seed's decision tree stops at step {end.step} ({end.dimension}) on {tree_name}: {end.reason}."
    if not res["measured"]:
        return [
            f"Choose {DISPLAY[res['primary_family']]}; no eligible configuration was measured "
            "(see the warnings), so this follows the decision tree only.",
            tree_s,
            "Nothing measured backs it yet: run the benchmark step before trusting this answer.",
            "Cost and boundaries are unknown until a configuration is measured within the SLA.",
        ]
    ev = {e["label"]: e for e in res["evidence"]}
    p, b = ev[res["primary"]], ev.get(res["backup"] or "")
    sla = _f("sla_ttft_p95_ms", p["sla_ttft_p95_ms"])
    verdict = res.get("verdict")
    head = "Not conclusive: " if verdict is not None and verdict.verdict == "not_conclusive" else ""
    use = "provisionally use" if head else "Use"
    out = [
        f"{head}{use} {_named(p)} as the primary engine"
        + (f" and {_named(b)} as the backup." if b else "; no backup was measured."),
        tree_s,
    ]
    meas = (
        f"Measured within the {sla} ms TTFT p95 SLA, `{p['label']}` served "
        f"{_f('output_tok_s', p['output_tok_s'])} "
        f"output tok/s {_load(p)} for "
        f"${_f('usd_per_mtok_output', p['usd_per_mtok_output'])}/M output tokens"
    )
    if b and b["output_tok_s"] is not None and b["usd_per_mtok_output"] is not None:
        least, most = ("at least ", "at most ") if b.get("lower_bound") else ("", "")
        meas += (
            f", against {least}{_f('output_tok_s', b['output_tok_s'])} tok/s and "
            f"{most}${_f('usd_per_mtok_output', b['usd_per_mtok_output'])}/M for `{b['label']}`"
        )
    out.append(meas + ".")
    if res["overruled"]:
        out.append(_overrule(p["label"], scores, tree_fam, ev, conclusive=not head))
    if p["gpus"] is not None and (p["demand_output_tok_s"] is not None or p["demand_concurrency"] is not None):
        demand = (
            f"{_f('demand_output_tok_s', p['demand_output_tok_s'])} output tok/s"
            if p["demand_output_tok_s"] is not None
            else f"concurrency {_f('demand_concurrency', p['demand_concurrency'])}"
        )
        money = {k: _f(k, p[k]) for k in ("price_per_hour", "tco_monthly_usd", "gpu_monthly_usd", "ops_monthly_usd")}
        boundary = _boundary(p["label"], res["backup"], res["break_even"])
        out.append(
            f"At the sized demand of {demand} this takes {_f('gpus', p['gpus'])} × `{p['priced_as']}` at "
            f"${money['price_per_hour']}/h, ${money['tco_monthly_usd']}/month TCO "
            f"(${money['gpu_monthly_usd']} hardware + ${money['ops_monthly_usd']} operations, "
            f"ops hours partly assumed); {boundary}."
        )
    else:
        conc = _f("concurrency", p["concurrency"]) if p.get("concurrency") is not None else None
        if p.get("request_rate") is not None and p.get("concurrency") is None:
            edge = f"that is its SLA capacity, {_f('request_rate', p['request_rate'])} req/s per replica"
        elif p.get("source") == "fixed":
            edge = f"that was measured at a fixed {conc} streams, not at a searched SLA capacity"
        elif p.get("source") == "capacity":
            edge = f"that is its SLA capacity, {conc} concurrent streams per replica"
        else:
            edge = (
                f"above concurrency {conc} its TTFT p95 broke the {sla} ms SLA"
                if (p["sla_share"] or 0) < 1
                else f"it met the SLA at every measured level up to concurrency {conc}"
            )
        out.append(
            f"No peak traffic is known, so no fleet was sized: at "
            f"${_f('price_per_hour', p['price_per_hour'])}/h per `{p['priced_as']}` it costs "
            f"${_f('usd_per_mtok_output', p['usd_per_mtok_output'])}/M output tokens, and {edge}."
        )
    return out


def _best_of(family: str, scores: list[EngineScore], evidence: dict[str, dict]) -> dict | None:
    fam = [s for s in scores if s.family == family and s.label in evidence]
    fam.sort(key=lambda s: -s.total)
    return evidence[fam[0].label] if fam else None


def phase_plan(cfg: PlaybookConfig, profile: Any, res: dict[str, Any], scores: list[EngineScore]) -> list[Phase]:
    """Lay out seed 000 §5.4's three phases (vLLM → SGLang → TensorRT-LLM) with this run's numbers."""
    ev = {e["label"]: e for e in res["evidence"]}
    v, s, t = (_best_of(f, scores, ev) for f in ("vllm", "sglang", "trtllm"))
    ratio = facts_of(profile).prefix_reuse_ratio
    thr = cfg.decision.prefix_reuse_threshold
    nvidia = cfg.hardware.vendors == "nvidia-only"
    p1 = {"output_tok_s": v["output_tok_s"], "usd_per_mtok_output": v["usd_per_mtok_output"]} if v else {}
    p2: dict[str, Any] = {"prefix_reuse_ratio": ratio, "prefix_reuse_threshold": thr}
    if v and s and v["output_tok_s"]:
        p2["sglang_vs_vllm_throughput"] = round(s["output_tok_s"] / v["output_tok_s"], 2)
    p3: dict[str, Any] = {}
    be = [b for b in res["break_even"] if b["harder_family"] == "trtllm" and b["easier_family"] == "vllm"]
    if be:
        p3 = {
            "break_even_output_tok_s": be[0]["break_even_output_tok_s"],
            "demand_output_tok_s": be[0]["demand_output_tok_s"],
        }
    frequent = cfg.cadence.updates_per_month >= cfg.decision.frequent_updates_per_month
    return [
        Phase(phase=1, months="1-2", family="vllm", configuration=v["label"] if v else None,
              action="Run a vLLM baseline with FP8 weights, FP8 KV cache, continuous batching, "
                     "PagedAttention and prefix caching on.", numbers=p1, applies=True,
              note="" if v else "no vLLM configuration was measured; measure one as the baseline"),
        Phase(phase=2, months="2-4", family="sglang", configuration=s["label"] if s else None,
              action="Evaluate SGLang as the primary engine where prompts share prefixes (RadixAttention).",
              numbers=p2, applies=ratio is None or ratio >= thr,
              note="no measured prefix-reuse ratio: measure it before committing" if ratio is None
              else ("reuse is heavy: expected to pay" if ratio >= thr else "reuse is light: little to gain")),
        Phase(phase=3, months="6+ (optional)", family="trtllm", configuration=t["label"] if t else None,
              action="Compile the highest-traffic model with TensorRT-LLM if the ROI holds.", numbers=p3,
              applies=nvidia and not frequent,
              note=("not applicable: TensorRT-LLM runs on NVIDIA only" if not nvidia else
                    "frequent model updates would mean a rebuild each time" if frequent else
                    "compare the profiled peak with the break-even traffic")),
    ]  # fmt: skip


def _reasons(steps: list[TreeStep], scores: list[EngineScore], choice: Choice, tree_family: str, overruled: bool):
    """The reasons list: the evidence, the tree's path, why some cannot be primary, and why the pair was chosen."""
    primary, backup, verdict = choice.primary, choice.backup, choice.verdict
    reasons = [f"Tree: step {s.step} ({s.dimension}): {s.reason}" for s in steps if s.reached]
    if verdict.text:
        reasons.insert(0, f"Evidence: {verdict.text}")
    reasons += [f"`{s.label}` cannot be primary: {s.why_not}." for s in scores if not s.eligible]
    if primary is not None:
        reasons.append(f"`{primary.label}` has the highest score ({primary.total:.3f}) among eligible configurations.")
        if overruled:
            reasons.append(
                f"Measurements overrule the tree: its {DISPLAY[tree_family]} verdict loses on the measured "
                f"{primary.cost_basis} and SLA share."
            )
        elif primary.family != tree_family:
            reasons.append(f"No eligible {DISPLAY[tree_family]} configuration was measured: the tree is untested.")
    if backup is not None:
        if primary is not None and backup.family == primary.family:
            reasons.append(
                f"`{backup.label}` is the backup: the next best eligible configuration (no other engine family "
                "was eligible, so the backup is another configuration of the same engine)."
            )
        else:
            reasons.append(f"`{backup.label}` is the backup: the best eligible configuration of another family.")
    return reasons


def _warnings(cfg: PlaybookConfig, scores: list[EngineScore], fleet: pd.DataFrame, choice: Choice, tree_family: str):
    """The warnings of the answer beyond the config's: nothing within the SLA, CPU prices, nothing eligible.

    "Nothing within the SLA" reads each measured configuration's representative (its SLA capacity, trials or
    best grid point), not the grid's share: a capacity is within the SLA by definition even when every grid
    point, e.g. the seeds' concurrency 100, lies past it.
    """
    warnings = list(choice.warnings)
    rows = fleet.to_dict("records") if not fleet.empty else []
    if rows and not any(bool(r["meets_sla"]) for r in rows):
        warnings.append(f"No measured configuration meets the {cfg.sla.ttft_p95_ms:g} ms TTFT p95 SLA.")
    if any(r.get("priced_as") == "cpu" for r in rows):
        warnings.append("CPU configurations are priced with the ASSUMED `cpu` price in gpu_prices.yaml.")
    if choice.primary is None:
        warnings.append(f"No eligible measured configuration: the answer is the tree's ({DISPLAY[tree_family]}).")
    return warnings


def build_answer(
    cfg: PlaybookConfig,
    profile: Any,
    steps: list[TreeStep],
    end: int,
    scores: list[EngineScore],
    fleet: pd.DataFrame,
    be: pd.DataFrame,
    choice: Choice,
) -> DecisionResult:
    """Word the decision made in ``decision.choice.choose`` (``choice``): reasons, warnings, sentences, phase plan.

    Nothing here changes the choice: the primary, the backup and the verdict are ``choice``'s.
    """
    primary, backup, verdict, tree_family = choice.primary, choice.backup, choice.verdict, choice.tree_family
    contradiction = None
    if verdict.decided_by == "measurement" and primary is not None and primary.family != tree_family:
        contradiction = (
            f"The measurements contradict the seed's decision tree: it points to {DISPLAY[tree_family]}, but "
            f"{verdict.text[0].lower() + verdict.text[1:]}"
        )
    fam_ok = [s for s in scores if s.eligible and s.family == tree_family]
    overruled = primary is not None and primary.family != tree_family and bool(fam_ok)
    be_rows = [{k: _r(k, v) for k, v in row.items()} for row in be.to_dict("records")] if not be.empty else []
    be_rows = qualify_break_even(be_rows, verdict)
    res: dict[str, Any] = {
        "steps": steps,
        "tree_family": tree_family,
        "tree_end_step": end,
        "scores": scores,
        "measured": primary is not None,
        "primary": primary.label if primary else tree_family,
        "primary_family": primary.family if primary else tree_family,
        "backup": backup.label if backup else None,
        "backup_family": backup.family if backup else None,
        "overruled": overruled,
        "reasons": _reasons(steps, scores, choice, tree_family, overruled),
        "warnings": _warnings(cfg, scores, fleet, choice, tree_family),
        "sla_ttft_p95_ms": cfg.sla.ttft_p95_ms,
        "evidence": _evidence(fleet, scores, cfg.sla.ttft_p95_ms),
        "break_even": be_rows,
        "verdict": verdict,
        "contradiction": contradiction,
        "rubric": rubric(),
        "departures": choice.departures,
    }
    res["sentences"] = _sentences(res, steps, scores)
    res["phase_plan"] = phase_plan(cfg, profile, res, scores)
    return DecisionResult(**res)
