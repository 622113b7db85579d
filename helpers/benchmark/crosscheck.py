"""Step 5's cross-check: the engine's own benchmark client at Poisson rates around the playbook's capacity.

Optional (``evidence.crosscheck``). After a configuration's capacity search has an estimate, while its engine
is still up, vLLM's own client (``vllm bench serve``, ``helpers.measure.vllm_bench``) drives it at each of
``rates`` × the capacity (req/s at the capacity: ``sla.from_capacity``) with Poisson arrivals for about
``seconds``, on prompts of the evidence workload's lengths (plain prompts, ``ignore_eos``). Each rate is
judged with the playbook's own rules (``probe.judge``, the search's limits: TTFT p95, ITL p95, errors, and the
share of the offered rate served, read from the client's per-request send and finish times with
``measure.timing.keep_up``; the queue is the server's waiting requests from ``/metrics``), and the client's
capacity is estimated from those readings with the playbook's estimator (``boundary.estimate_capacity``):
where the binding criterion crosses its limit between two rates, or a bound ("≥ x" when every rate passed,
"≤ x" when none did). The ratio own-client capacity ÷ playbook capacity says whether the playbook's load
generator and judgement agree with the engine's own client.

One record per configuration, ``crosscheck/<label>.json`` (``CrossCheckRecord``), written when the cross-check
ends; the client's raw results go beside it (``crosscheck/<label>/vllm-bench-x<rate>.json.gz``, its output in
``.log``). A re-run keeps a finished record, and a rate whose raw result was saved before an interruption.
A client that is missing or crashes becomes a record that says why; it never fails the configuration.
The client runs in ``helpers.benchmark.crosscheck_phase``; this module holds the records, the judgement and
the tables.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Literal

import pandas as pd
from pydantic import BaseModel, ConfigDict, Field

from helpers.benchmark.boundary import estimate_capacity, readings_of
from helpers.benchmark.capacity import measurement_from_numbers
from helpers.benchmark.probe import Probe, judge
from helpers.benchmark.sla import sla_text
from helpers.core.config import PlaybookConfig
from helpers.core.text import label_slug
from helpers.measure.timing import keep_up
from helpers.report.notebook import show_table
from helpers.run.records import CapacityEstimate, fmt_load

CROSSCHECK_DIR = "crosscheck"
CLIENT = "vllm bench serve"
MIN_PROMPTS = 10
"""Fewest requests of one rate (a percentile and a served share need a few)."""
CLIENT_START_S = 20.0
"""Prior seconds of the client's start (importing vllm, its tokenizer, its ready check) per rate."""


class _Record(BaseModel):
    model_config = ConfigDict(extra="forbid")


class RateRun(_Record):
    """The client at one rate: what it was sent, what it measured, and the playbook's judgement of it."""

    multiple: float = Field(description="The rate as a multiple of the playbook's capacity.")
    rate: float = Field(description="Poisson arrivals asked for (req/s).")
    prompts: int = Field(description="Requests sent (num-prompts).")
    raw_file: str | None = Field(default=None, description="The client's saved result, relative to the run folder.")
    log_file: str | None = Field(default=None, description="The client's output, relative to the run folder.")
    completed: int = 0
    failed: int = 0
    duration_s: float | None = Field(default=None, description="The client's benchmark duration (s).")
    request_throughput: float | None = Field(default=None, description="Completed ÷ duration (req/s), as it says.")
    output_tok_s: float | None = None
    ttft_p95_ms: float | None = None
    itl_p95_ms: float | None = None
    served_ratio: float | None = Field(default=None, description="Served ÷ offered from send and finish times.")
    served_from: str = Field(default="", description="How the served share was read.")
    passed: bool | None = Field(default=None, description="Within the SLA and sustained (None: not judged).")
    why: str = ""
    probe: dict | None = Field(default=None, description="The judged reading (``probe.Probe``).")


class CrossCheckRecord(_Record):
    """One configuration's cross-check against the engine's own client (``crosscheck/<label>.json``)."""

    label: str
    engine: str
    status: Literal["done", "failed", "skipped"]
    reason: str | None = Field(default=None, description="Why it failed or was skipped.")
    client: str = CLIENT
    client_version: str | None = Field(default=None, description="The client's vllm version.")
    python: str | None = Field(default=None, description="The client's interpreter.")
    seconds: float = Field(default=0.0, description="Arrivals per rate span about this long (s).")
    playbook_capacity: float | None = Field(default=None, description="The playbook's capacity (req/s).")
    playbook_text: str = Field(default="", description="The playbook's capacity as the search states it.")
    rates: list[RateRun] = Field(default_factory=list)
    estimate: CapacityEstimate | None = Field(default=None, description="The own client's capacity estimate.")
    own_capacity: float | None = Field(default=None, description="The own client's capacity or bound (req/s).")
    own_text: str = ""
    ratio: float | None = Field(default=None, description="Own-client capacity ÷ the playbook's (or the bound's).")
    ratio_text: str = ""
    note: str = ""


def record_path(run_dir: Path, label: str) -> Path:
    """Where a configuration's cross-check record lives."""
    return Path(run_dir) / CROSSCHECK_DIR / f"{label_slug(label)}.json"


def load_record(path: Path) -> CrossCheckRecord | None:
    """The stored record at ``path``, or None (none, or unreadable: measured again)."""
    try:
        return CrossCheckRecord.model_validate_json(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def load_records(run_dir: Path) -> list[CrossCheckRecord]:
    """Every configuration's stored cross-check, in file-name order."""
    found = (load_record(p) for p in sorted((Path(run_dir) / CROSSCHECK_DIR).glob("*.json")))
    return [r for r in found if r is not None]


def wanted(cfg: PlaybookConfig) -> bool:
    """Whether the config asks for the cross-check (it needs a capacity search)."""
    return cfg.evidence.crosscheck.enabled and cfg.evidence.search.enabled


def rate_ident(multiple: float) -> str:
    """The progress unit's ident and the raw file's tag of one rate: ``x0.9``."""
    return f"x{multiple:g}"


def prompts_of(rate: float, seconds: float) -> int:
    """Requests at ``rate`` for about ``seconds`` of arrivals, at least ``MIN_PROMPTS``."""
    return max(MIN_PROMPTS, math.ceil(rate * seconds))


def served_share(raw: dict) -> tuple[float | None, float | None, float | None, str]:
    """Served ÷ offered (with its 95% interval) from the client's per-request send and finish times.

    A finish is the send time plus the request's latency (else its TTFT plus its inter-token gaps); a
    failed request never finished. Without send times (a client that does not save them) the share is
    completed ÷ duration over the rate asked for, which counts the last requests' drain against it.
    """
    starts, errors = raw.get("start_times"), raw.get("errors") or []
    if starts:
        lats = raw.get("latencies") or [
            (t + sum(i or [])) if t else None
            for t, i in zip(raw.get("ttfts") or [], raw.get("itls") or [], strict=False)
        ]
        ends = [
            s + lat if lat and not (k < len(errors) and errors[k]) else None
            for k, (s, lat) in enumerate(zip(starts, lats, strict=False))
        ]
        got = keep_up(list(starts[: len(ends)]), ends)
        if got is not None:
            return got.ratio, got.low, got.high, "finish against send times (the client's own)"
    return None, None, None, "completed ÷ duration (the client saved no send times)"


def judge_rate(raw: dict, run: RateRun, cfg: PlaybookConfig, queue: list[tuple[float, float]] | None) -> RateRun:
    """The playbook's verdict on one client run (``probe.judge`` with the search's limits), figures filled in."""
    s = cfg.evidence.search
    completed, failed = int(raw.get("completed") or 0), int(raw.get("failed") or 0)
    duration = raw.get("duration")
    achieved = completed / duration if duration else None
    ratio, low, high, how = served_share(raw)
    m = measurement_from_numbers(
        run.rate,
        [0.0] * completed,  # the count only: the client's own p95 is given
        ttft_p95_ms=raw.get("p95_ttft_ms"),
        itl_p95_ms=raw.get("p95_itl_ms"),
        errors=failed,
        offered_rate=run.rate,
        achieved_rate=achieved,
        queue_samples=queue or None,
    )
    m = m.model_copy(update={"served_ratio": ratio, "served_ratio_low": low, "served_ratio_high": high})
    probe = judge(m, cfg.sla, s.min_sustained_ratio, None).model_copy(update={"stream": rate_ident(run.multiple)})
    return run.model_copy(
        update={
            "completed": completed,
            "failed": failed,
            "duration_s": duration,
            "request_throughput": raw.get("request_throughput"),
            "output_tok_s": raw.get("output_throughput"),
            "ttft_p95_ms": raw.get("p95_ttft_ms"),
            "itl_p95_ms": raw.get("p95_itl_ms"),
            "served_ratio": ratio if ratio is not None else (achieved / run.rate if achieved else None),
            "served_from": how,
            "passed": probe.passed,
            "why": probe.why,
            "probe": probe.model_dump(mode="json"),
        }
    )


def conclude(record: CrossCheckRecord, cfg: PlaybookConfig) -> CrossCheckRecord:
    """The own client's capacity from the judged rates (the playbook's estimator) and its ratio to the playbook's."""
    probes = [Probe.model_validate(r.probe) for r in record.rates if r.probe is not None]
    est = estimate_capacity(readings_of(probes), axis="rate", target_rel=cfg.evidence.search.target_rel_ci)
    record.estimate = est
    value, sign, how = {
        "estimated": (est.value, "", f"{est.criterion} binds" if est.criterion else est.note),
        "at_least": (est.low, "≥ ", "every rate met the SLA"),
        "below": (est.high, "≤ ", "no rate met the SLA"),
    }.get(est.status, (None, "", est.note))
    record.own_capacity = value
    if value is None:
        record.own_text, record.ratio_text = f"not measured ({how})", "–"
        return record
    record.own_text = f"{sign}{fmt_load(value)} req/s" + (f" ({how})" if how else "")
    if record.playbook_capacity:
        record.ratio = value / record.playbook_capacity
        record.ratio_text = f"{sign}{record.ratio:.2f}"
    return record


def _num(x: float | None, fmt: str = "{:,.0f}") -> str:
    return "–" if x is None else fmt.format(x)


def crosscheck_table(records: list[CrossCheckRecord]) -> pd.DataFrame:
    """One row per configuration and rate: what the engine's own client measured and the playbook's verdict."""
    rows = []
    for r in records:
        head = {"engine config": r.label, "client": f"{r.client} {r.client_version or ''}".strip()}
        if not r.rates:
            rows.append({**head, "verdict": r.status, "why": r.reason or ""})
        for x in r.rates:
            rows.append(
                {
                    **head,
                    "× capacity": f"{x.multiple:g}",
                    "rate req/s": _num(x.rate, "{:,.3g}"),
                    "completed / sent": f"{x.completed} / {x.prompts}" + (f" ({x.failed} failed)" if x.failed else ""),
                    "served share": _num(x.served_ratio, "{:.1%}"),
                    "TTFT p95 ms": _num(x.ttft_p95_ms),
                    "ITL p95 ms": _num(x.itl_p95_ms, "{:,.1f}"),
                    "output tok/s": _num(x.output_tok_s),
                    "verdict": "–" if x.passed is None else ("pass" if x.passed else "fail"),
                    "why": x.why,
                    "raw result": x.raw_file or x.log_file or "–",
                }
            )
    return pd.DataFrame(rows)


def summary_table(records: list[CrossCheckRecord]) -> pd.DataFrame:
    """One row per configuration: the playbook's capacity, the own client's, and their ratio."""
    return pd.DataFrame(
        [
            {
                "engine config": r.label,
                "playbook capacity req/s": _num(r.playbook_capacity, "{:,.3g}"),
                f"{CLIENT} capacity": r.own_text or "–",
                "ratio (own ÷ playbook)": r.ratio_text or "–",
                "status": r.status if not r.reason else f"{r.status}: {r.reason}",
            }
            for r in records
        ]
    )


def show_crosscheck(run_dir: Path, cfg: PlaybookConfig) -> None:
    """The cross-check tables where the run made any (nothing shown otherwise)."""
    records = load_records(run_dir)
    if not records:
        return
    rates = ", ".join(f"{m:g}" for m in cfg.evidence.crosscheck.rates)
    show_table(
        summary_table(records),
        f"Cross-check: {CLIENT} (the engine's own client) at Poisson rates of {rates} × the playbook's capacity, "
        f"about {cfg.evidence.crosscheck.seconds:g} s each, judged with the playbook's SLA ({sla_text(cfg.sla)}) and "
        "its capacity estimator",
    )
    show_table(crosscheck_table(records), f"Cross-check: each rate of {CLIENT}")
