"""Checklist step 9, the pilot (``pilot.md``): where to pilot, what to collect, what to retune.

Seed 003 §7.4 step 9: 选择 1-2 个非关键业务试点; 部署首选引擎，监控关键指标; 收集反馈，调优配置. The plan
is computed from this run: one replica of the chosen configuration serves what it served in the
benchmark, so the pilot services' combined peak must fit in that (their share of the profiled peak is
given); the metrics to collect are the engine's own series with this run's numbers to compare with;
the knobs to retune are the ones tuned here, with the values tried and the direction each signal asks.
"""

from __future__ import annotations

from helpers.core.config import PlaybookConfig
from helpers.rollout.canary import title_of
from helpers.rollout.choice import Chosen
from helpers.rollout.rollback import Baseline, measured_baseline
from helpers.rollout.series import Signals
from helpers.workload.profile import Profile

PILOT_WEEKS = "1-2 weeks"  # seed 003 §7.4 gives the whole landing phase 2-4 weeks


def _fmt(v: float | None, fmt: str = "{:,.0f}") -> str:
    return "–" if v is None else fmt.format(v)


def where(cfg: PlaybookConfig, b: Baseline, profile: Profile | None) -> list[str]:
    """Which services to pilot on: the configured ones, or how to choose them, with the capacity they must fit."""
    peak = (profile.peak_requests_per_s if profile is not None else None) or cfg.workload.peak_requests_per_s
    cap = b.request_rate
    lines = []
    if cfg.rollout.pilot_services:
        names = " and ".join(f"`{s}`" for s in cfg.rollout.pilot_services)
        lines.append(f"- Pilot on {names} (`rollout.pilot_services`).")
    else:
        lines.append(
            "- Pick one or two non-critical services (internal tools, batch or offline jobs, a beta feature) whose "
            "prompts look like this workload; name them in `rollout.pilot_services` to keep them on record."
        )
    if cap:
        served = f"- One pilot replica served {cap:,.2f} req/s ({_fmt(b.output_tok_s)} output tok/s) in this run" + (
            f" at concurrency {b.concurrency}" if b.concurrency else ""
        )
        if peak and cap >= peak:
            served += (f", more than the whole profiled peak ({peak:,.2f} req/s): one replica carries the pilot "
                       "services with room to spare.")  # fmt: skip
        elif peak:
            served += (f", {cap / peak:.0%} of the profiled peak ({peak:,.2f} req/s): the pilot services' combined "
                       "peak must stay below that, or add replicas.")  # fmt: skip
        else:
            served += ": the pilot services' combined peak must stay below that, or add replicas."
        lines.append(served)
    if profile is not None:
        inp, out = profile.input_tokens, profile.output_tokens
        lines.append(
            f"- Their prompts should resemble the profile: median {inp.p50:,.0f} input / {out.p50:,.0f} output "
            f"tokens (p95 {_fmt(inp.p95)} / {_fmt(out.p95)})."
        )
    else:
        w = cfg.workload
        lines.append(f"- Their prompts should resemble the benchmark's: {w.input_tokens:,} input / "
                     f"{w.output_tokens:,} output tokens.")  # fmt: skip
    return lines


def collect(chosen: Chosen, sig: Signals, b: Baseline) -> list[tuple[str, str, str]]:
    """(what, where from, this run's number to compare with) rows for the pilot."""
    r = chosen.result
    rows = [
        ("TTFT p95", f"`{sig.ttft_p95_s} * 1000`", f"{_fmt(b.ttft_ms_p95)} ms measured"),
        ("Output throughput per replica", f"`{sig.output_tok_s}`", f"{_fmt(b.output_tok_s)} tok/s measured"),
        ("Queued requests", f"`{sig.queue}`", "stays near 0 below the measured load"),
    ]
    if sig.kv_usage:
        rows.append(("KV-cache usage", f"`{sig.kv_usage}`", "share of the KV cache in use"))
    hits = [p.server.prefix_cache_hit_rate for p in (r.points if r else []) if p.server.prefix_cache_hit_rate]
    if sig.prefix_hit_rate and hits:
        rows.append(("Prefix-cache hit rate", f"`{sig.prefix_hit_rate}`", f"up to {max(hits):.0%} in this run"))
    if sig.gpu_util_pct:
        rows.append(("GPU utilisation", f"`{sig.gpu_util_pct}`", "seed 003 §5.3: 70-90% is healthy"))
    rows += [
        ("Cold start", "pod start → Ready (`kubectl get pod -w`)",
         f"{_fmt(r.ready_s if r else None)} s to healthy, {_fmt(r.cold_start_s if r else None)} s to first answer"),
        ("Error share", "5xx ÷ all responses at the gateway", "0 in the benchmark's points that met the SLA"),
        ("Answer quality", "the pilot teams' feedback; spot checks against the current service",
         "not measured: the benchmark served random weights"),
    ]  # fmt: skip
    return rows


def retune(chosen: Chosen) -> list[str]:
    """What to retune after the pilot, starting from this run's tuned knobs."""
    k, spec = chosen.spec.knobs, chosen.spec
    lines = []
    if chosen.tuned_applied:
        tuned = ", ".join(f"`{key}={v}`" for key, v in sorted(chosen.tuned_applied.items()))
        tried = f" (tried: {', '.join(str(x) for x in spec.tune_max_num_seqs)})" if spec.tune_max_num_seqs else ""
        lines.append(f"- Start from the tuned {tuned}{tried}.")
    else:
        lines.append("- This run tuned no knob: start from the configured flags and set `tune_max_num_seqs` next time.")
    seqs = k.max_num_seqs or "the engine default"
    lines += [
        f"- `max_num_seqs` ({seqs}): TTFT p95 near the SLA while the queue is empty → lower it; queue growing "
        "with TTFT well inside the SLA → raise it.",
        f"- `max_batched_tokens` ({k.max_batched_tokens or 'engine default'}): long prompts stalling decode "
        "(inter-token latency spikes) → lower it; prefill-bound TTFT with spare GPU → raise it.",
        f"- `memory_fraction` ({k.memory_fraction if k.memory_fraction is not None else 'engine default'}): "
        "KV-cache usage pinned near 100% with preemptions → raise it if GPU memory allows, else fewer sequences.",
    ]
    if k.prefix_caching is not False:
        lines.append("- Prefix caching: a hit rate far below the benchmark's means the pilot's prompts share less; "
                     "re-measure with the pilot's own trace (step 1 accepts request logs).")  # fmt: skip
    lines.append("- Re-run the playbook with the pilot's request log as the workload before the full rollout.")
    return lines


def pilot_markdown(cfg: PlaybookConfig, chosen: Chosen, sig: Signals, profile: Profile | None,
                   launch_files: dict[str, str]) -> str:  # fmt: skip
    """The pilot plan for ``chosen`` as markdown."""
    b = measured_baseline(chosen)
    out = [f"# Pilot plan: {title_of(chosen)}", "", f"Workload `{chosen.workload}`; pilot for {PILOT_WEEKS}.", ""]
    out += ["## Launch", ""]
    out += [f"- `{name}`: {what}" for name, what in launch_files.items()]
    out += ["", "## Where to pilot", "", *where(cfg, b, profile), ""]
    out += ["## What to collect", "", "| what | where from | compare with |", "|---|---|---|"]
    out += [f"| {w} | {q} | {c} |" for w, q, c in collect(chosen, sig, b)]
    out += ["", "## What to retune", "", *retune(chosen), ""]
    out += ["## Done when", "", f"- {PILOT_WEEKS} of pilot traffic held every gate of `canary.md`, the pilot teams "
            "accept the answers, and the retuned flags are measured: then start the canary (step 10)."]  # fmt: skip
    return "\n".join(out) + "\n"
