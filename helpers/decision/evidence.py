"""Whether the measurements decide: the two best configurations compared with their noise, in three verdicts.

With a capacity search, the compared quantity is each configuration's SLA capacity per accelerator, as a
request rate (``helpers.benchmark.capacity_compare``: the difference's 95% interval, paired over the probes
both ran on the same streams). With the search disabled, it is output tok/s per accelerator of the trials
at a fixed load (Welch's interval). Either way the outcome is one of:

* **measured**: the interval excludes 0 and reaches past the equivalence margin: the larger one serves
  measurably more per accelerator, and decides unless its extra operations cost outweighs the saving at
  the sized demand (the break-even);
* **equivalent** within ±``evidence.equivalence_margin``: the seed's tree and the operations cost decide;
  when they do not tell the two apart (same engine family, same operations cost), the better estimate
  wins, and the text says so;
* **not conclusive**: neither; the better estimate is kept provisionally, the first page says "not
  conclusive" first, with what it would take to resolve it (paired edge probes more, and the engine-
  minutes they cost at this run's probe length).

A configuration without a measured capacity is "not measured", never a tie; one the run never measured (cut
short before it started) makes the comparison "not conclusive" until a resume measures it.
"""

from __future__ import annotations

import math
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from helpers.benchmark.capacity_compare import CapacityDifference, compare_capacities
from helpers.benchmark.sla import capacity_side, standing_points
from helpers.benchmark.stats import compare
from helpers.core.config import PlaybookConfig
from helpers.cost.records import per_gpu
from helpers.run.records import EngineResult

Verdict = Literal["measured", "equivalent", "not_conclusive", "not_measured"]
DecidedBy = Literal[
    "measurement",
    "tree and operations cost",
    "better estimate",
    "not conclusive",
    "nothing measured",
]


class EvidenceVerdict(BaseModel):
    """The comparison of the two best measured configurations, and what it means for the decision."""

    model_config = ConfigDict(extra="forbid")

    verdict: Verdict = "not_measured"
    faster: str | None = Field(default=None, description="The configuration with the better estimate.")
    slower: str | None = None
    metric: str = "requests per second per accelerator at the SLA capacity"
    faster_mean: float | None = None
    slower_mean: float | None = None
    difference_pct: float | None = Field(default=None, description="(faster − slower) / slower, %.")
    low_pct: float | None = None
    high_pct: float | None = None
    paired: bool = Field(default=False, description="The interval comes from probes on the same streams.")
    pairs: int = Field(default=0, description="Paired readings behind the interval.")
    margin_pct: float = Field(default=5.0, description="The equivalence margin, %.")
    trials: dict[str, int] = Field(default_factory=dict, description="Probes (or trials) behind each figure.")
    significant: bool = Field(default=False, description="The measurement decides (verdict measured).")
    decided_by: DecidedBy = "nothing measured"
    to_resolve: str | None = Field(default=None, description="Not conclusive: what would settle it.")
    minutes_to_resolve: float | None = Field(
        default=None, description="Not conclusive: engine-minutes (GPU-minutes on a GPU) the extra probes take."
    )
    text: str = ""


def _probe_minutes(result: EngineResult) -> float | None:
    """Engine-minutes one probe of ``result`` took on average (search time over probes)."""
    n = sum(1 for p in result.points if p.phase == "search")
    secs = result.gpu_seconds.get("search")
    return secs / n / 60.0 if n and secs else None


def _from_difference(v: EvidenceVerdict, d: CapacityDifference, a: dict, b: dict) -> None:
    """Fill ``v`` from a capacity comparison of ``a`` (the better estimate) with ``b``."""
    v.verdict, v.paired, v.pairs = d.verdict, d.paired, d.pairs
    if d.ratio is not None:
        v.difference_pct = 100 * (d.ratio - 1)
    v.low_pct = None if d.low is None else 100 * (d.low - 1)
    v.high_pct = None if d.high is None else 100 * (d.high - 1)
    v.to_resolve = d.to_resolve
    v.text = d.text


def compare_best(
    candidates: list[dict[str, Any]],
    results: list[EngineResult],
    break_even: list[dict[str, Any]],
    cfg: PlaybookConfig,
) -> EvidenceVerdict:
    """Compare the two eligible configurations with the most per accelerator (``candidates``: fleet rows).

    ``break_even`` rows say whether a faster-but-harder configuration pays for its operations at the
    sized demand (``pays_off_now``); a measured winner that does not pay off there does not decide.
    """
    by_label = {r.label: r for r in results}
    margin = cfg.evidence.equivalence_margin
    rows = [
        c
        for c in candidates
        if c.get("meets_sla") and c.get("output_tok_s") and c.get("gpus_per_replica") and c["label"] in by_label
    ]
    verdict = EvidenceVerdict(margin_pct=100 * margin)
    unmeasured = [r for r in results if r.status == "skipped"]
    if len(rows) < 2 and unmeasured:
        _not_measured_yet(verdict, rows[0]["label"] if rows else None, unmeasured)
        return verdict
    if len(rows) < 2:
        verdict.faster = rows[0]["label"] if rows else None
        verdict.decided_by = "tree and operations cost" if rows else "nothing measured"
        verdict.text = "Fewer than two configurations meet the SLA: there is nothing to compare."
        return verdict
    fixed = "fixed" in {r.get("source") for r in rows}
    key = "output_tok_s" if fixed else "request_rate"
    per = f"{key}_per_gpu"  # step 6's one definition of per accelerator (``cost.records.per_gpu``), as saved
    rows = [r for r in rows if r.get(key) and r.get(per)]
    rows.sort(key=lambda c: (-c[per], c["label"]))
    if len(rows) < 2:
        verdict.text = "Fewer than two configurations have a measured capacity: there is nothing to compare."
        verdict.decided_by = "tree and operations cost" if rows else "nothing measured"
        return verdict
    a, b = rows[0], rows[1]
    ra, rb = by_label[a["label"]], by_label[b["label"]]
    verdict.faster, verdict.slower = a["label"], b["label"]
    verdict.faster_mean, verdict.slower_mean = a[per], b[per]
    if fixed:
        verdict.metric = "output tok/s per accelerator at a fixed load (no capacity search)"
        _fixed(verdict, ra, rb, a["gpus_per_replica"], b["gpus_per_replica"], margin)
    else:
        sa = capacity_side(ra, cfg, a["gpus_per_replica"])
        sb = capacity_side(rb, cfg, b["gpus_per_replica"])
        if sa is None or sb is None:
            verdict.text = "A configuration has no searched capacity: nothing to compare."
            return verdict
        _from_difference(verdict, compare_capacities(sa, sb, margin=margin), a, b)
        verdict.trials = {a["label"]: sa.estimate.probes, b["label"]: sb.estimate.probes}
        if verdict.verdict == "not_conclusive":
            more = compare_capacities(sa, sb, margin=margin).more_pairs
            per = [m for m in (_probe_minutes(ra), _probe_minutes(rb)) if m]
            if more and per:
                gpus = a["gpus_per_replica"] + b["gpus_per_replica"]
                verdict.minutes_to_resolve = round(more * sum(per) / len(per) * gpus, 1)
                verdict.to_resolve = f"{verdict.to_resolve}: about {verdict.minutes_to_resolve:g} engine-minutes"
    _decide(verdict, a, b, break_even)
    return verdict


def _not_measured_yet(v: EvidenceVerdict, measured: str | None, unmeasured: list[EngineResult]) -> None:
    """Not conclusive: configurations of this run were never measured (a run cut short), so nothing is compared.

    A configuration that failed is a result (it cannot serve here); one that was not measured is a gap.
    """
    names = ", ".join(f"`{r.label}`" for r in unmeasured)
    v.verdict, v.decided_by, v.faster = "not_conclusive", "not conclusive", measured
    one = len(unmeasured) == 1
    v.to_resolve = f"measure {names}: resume this run with `--engines` naming {'it' if one else 'them'}"
    what = f"`{measured}` is the only configuration measured" if measured else "no configuration meets the SLA"
    v.text = f"{what[0].upper()}{what[1:]}; {names} {'was' if one else 'were'} not measured in this run"
    v.text += f" ({unmeasured[0].reason}): {v.to_resolve}."


def _fixed(v: EvidenceVerdict, ra: EngineResult, rb: EngineResult, ga: int, gb: int, margin: float) -> None:
    """Three verdicts from the fixed-load trials that kept up (Welch's interval of the difference)."""
    va = [per_gpu(p.output_tok_s, ga) or 0.0 for p in standing_points(ra)]
    vb = [per_gpu(p.output_tok_s, gb) or 0.0 for p in standing_points(rb)]
    v.trials = {ra.label: len(va), rb.label: len(vb)}
    n = f"{len(va)} and {len(vb)} trials"
    if len(va) < 2 or len(vb) < 2:
        v.verdict = "not_conclusive"
        v.difference_pct = 100 * (v.faster_mean / v.slower_mean - 1) if v.slower_mean else None
        v.to_resolve = "at least two trials that kept up on each side (raise evidence.trials.min_trials)"
        v.text = f"`{ra.label}` against `{rb.label}` is not conclusive ({n}: no interval): {v.to_resolve}"
        return
    c = compare(va, vb)
    v.difference_pct, v.low_pct, v.high_pct = c.rel_diff_pct, c.rel_low_pct, c.rel_high_pct
    said = f"{c.rel_diff_pct:+.1f}% [{c.rel_low_pct:+.1f}%, {c.rel_high_pct:+.1f}%], {n}, at a fixed load"
    band = 100 * margin
    if c.rel_low_pct is not None and c.rel_low_pct >= -band and (c.rel_high_pct or 0) <= band:
        v.verdict = "equivalent"
        v.text = f"`{ra.label}` and `{rb.label}` are equivalent within ±{band:g}% in output per accelerator ({said})"
    elif c.significant and (c.rel_low_pct or 0) > 0:
        v.verdict = "measured"
        v.text = f"`{ra.label}` serves {c.rel_diff_pct:+.1f}% more output per accelerator than `{rb.label}` ({said})"
    else:
        v.verdict = "not_conclusive"
        v.to_resolve = "more trials on both sides (raise evidence.trials.max_trials)"
        v.text = f"`{ra.label}` against `{rb.label}` is not conclusive ({said}): {v.to_resolve}"


def _decide(v: EvidenceVerdict, a: dict, b: dict, break_even: list[dict[str, Any]]) -> None:
    """Who decides, from the verdict (module docstring); the break-even can take a measured win away."""
    v.significant = v.verdict == "measured"
    if v.verdict == "measured":
        pair = [x for x in break_even if x.get("harder") == a["label"] and x.get("easier") == b["label"]]
        pays = pair[0].get("pays_off_now") if pair else None
        if pays is False:
            v.decided_by = "tree and operations cost"
            v.text += (
                ": a measured difference, but at the sized demand its extra operations cost outweighs the saving "
                "(break-even): the tree and operations cost decided"
            )
        else:
            v.decided_by = "measurement"
            v.text += ": the measurement decides"
    elif v.verdict == "equivalent":
        v.decided_by = "tree and operations cost"
        v.text += ": the seed's tree and the operations cost decide"
    elif v.verdict == "not_conclusive":
        v.decided_by = "not conclusive"
    else:
        v.decided_by = "nothing measured"
    if not v.text.endswith("."):
        v.text += "."


def same_standing(a: dict[str, Any], b: dict[str, Any], rel: float = 0.02) -> bool:
    """Whether two fleet rows are alike for the tree and operations cost: one engine family, ops cost within ``rel``."""
    if a.get("family") != b.get("family"):
        return False
    oa, ob = a.get("ops_monthly_usd"), b.get("ops_monthly_usd")
    if any(x is None or (isinstance(x, float) and math.isnan(x)) for x in (oa, ob)):
        return True
    return abs(oa - ob) <= rel * max(abs(oa), abs(ob), 1e-9)


ESTIMATES_ONLY = ", at the estimates only"
"""What ``qualify_break_even`` adds to a break-even verdict whose order per token was not measured."""


def qualify_break_even(rows: list[dict[str, Any]], v: EvidenceVerdict) -> list[dict[str, Any]]:
    """The break-even rows with the verdict of the two compared configurations added where it limits them.

    A break-even orders two configurations by their cost per token, which comes from their capacities'
    estimates. When the comparison of those capacities measured no difference (not conclusive, or
    equivalent within the margin), "never: X is not cheaper per token" holds for the estimates only, and
    the row says so instead of reading as measured.
    """
    if v.verdict not in ("not_conclusive", "equivalent") or not v.faster or not v.slower:
        return rows
    if v.difference_pct is None:
        said = "no interval"
    else:
        high = "unbounded" if v.high_pct is None else f"{v.high_pct:+.1f}%"
        low = "unbounded" if v.low_pct is None else f"{v.low_pct:+.1f}%"
        said = f"{v.difference_pct:+.1f}% [{low}, {high}]"
    if v.verdict == "equivalent":
        band = f"within ±{v.margin_pct:g}% ({said})"
        why = f"the two are equivalent {band}: their costs per token differ by less than that"
    else:
        why = f"their comparison is not conclusive ({said}): which is cheaper per token is not measured"
    out = []
    for r in rows:
        if {r.get("harder"), r.get("easier")} == {v.faster, v.slower} and r.get("verdict"):
            r = {**r, "verdict": f"{r['verdict']}{ESTIMATES_ONLY}; {why}"}
        out.append(r)
    return out
