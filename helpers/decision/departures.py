"""Where this report's decision departs from the seed's tree (seed 003 §3.3-3.5), said in step 7.

The tree (``helpers.decision.tree``) reads the seed's rules with a few choices of the playbook's own: the
concurrency it reads, the bands it sorts it into, a numeric threshold for "heavy prefix reuse", a weight
for measured cost and SLA. ``departures`` lists each as a ``Departure`` (what the seed says, what this
report does, why), and flags an input that decides the tree while sitting on (or within
``BORDERLINE_SHARE`` of) its threshold: a small change of that answer would change the outcome.

``concurrency_evidence`` is the one reading of "the workload's concurrency" the tree and its warnings use:
the requests the engines held in flight at their SLA capacity when step 5 measured it
(``helpers.benchmark.in_flight``), else step 1's p99, which is modelled when the trace has no end times.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from helpers.benchmark.in_flight import in_flight
from helpers.core.config import PlaybookConfig
from helpers.run.records import EngineResult

SEED_LOW_MID_BELOW = 20
"""Seed 003 §3.3: "低中并发（< 20 并发）" is the low-mid band; 20-50 is left between the rules."""
BORDERLINE_SHARE = 0.1
"""An input within this share of its threshold (or on it) is borderline."""


class Departure(BaseModel):
    """One place where the report reads the seed its own way, or an answer that decides on its threshold."""

    model_config = ConfigDict(extra="forbid")

    topic: str
    seed: str = Field(description="What the seed says, with its section.")
    report: str = Field(description="What this report does instead.")
    why: str = Field(default="", description="Why, or what it changes in this run.")
    borderline: bool = Field(default=False, description="An input that decides sits on its threshold.")


def concurrency_evidence(profile: Any, results: list[EngineResult] | None) -> tuple[float | None, str, str]:
    """(concurrency, input key, words): measured in flight at the SLA capacity, else step 1's p99."""
    held = [h for h in (in_flight(r) for r in results or []) if h is not None and h.source == "engine metrics"]
    if held:
        top = max(held, key=lambda h: h.total)
        return top.total, "step5.in_flight_at_capacity", f"requests in flight at the SLA capacity: {top.text()}"
    get = profile.get if isinstance(profile, dict) else lambda k, d=None: getattr(profile, k, d)
    p99 = get("concurrency_p99") if profile is not None else None
    if p99 is None:
        return None, "profile.concurrency_p99", "no concurrency known"
    if get("concurrency_method") == "estimated":
        how = f"modelled: end times from {get('concurrency_model') or 'a latency model'}"
    else:
        how = "from the trace's start and end times" if get("concurrency_method") == "measured" else "step 1"
    return float(p99), "profile.concurrency_p99", f"step 1's p99 of requests in flight ({how})"


def _near(value: float, threshold: float) -> bool:
    return threshold > 0 and abs(value - threshold) <= BORDERLINE_SHARE * threshold


def _borderline(cfg: PlaybookConfig, steps: list[Any], conc: float | None, reuse: float | None) -> list[Departure]:
    """The inputs that decide on (or close to) their thresholds."""
    d, cad, out = cfg.decision, cfg.cadence, []
    end = next((s for s in steps if s.reached and s.outcome != "continue"), None)
    if (
        end is not None
        and end.step == 2
        and cad.concurrent_models <= 1
        and _near(cad.updates_per_month, d.frequent_updates_per_month)
    ):
        side = "frequent" if cad.updates_per_month >= d.frequent_updates_per_month else "stable"
        out.append(Departure(
            topic="borderline: model updates decide tree step 2",
            seed="seed 003 §3.2: monthly or more frequent updates → vLLM",
            report=f"cadence.updates_per_month is {cad.updates_per_month:g}, on the threshold "
            f"(≥ {d.frequent_updates_per_month:g} is frequent): the tree calls it {side} and "
            + ("stops at step 2 on vLLM" if side == "frequent" else "goes on to step 3"),
            why="a slightly rarer (or more frequent) update cadence changes where the tree stops; state the real "
            "cadence, e.g. 0.5 for an update every two months",
            borderline=True,
        ))  # fmt: skip
    reached3 = any(s.step == 3 and s.reached for s in steps)
    if reached3 and reuse is not None and abs(reuse - d.prefix_reuse_threshold) <= 0.05:
        out.append(Departure(
            topic="borderline: prefix reuse decides tree step 3",
            seed="seed 003 §3.5 step 3: heavy prefix reuse → SGLang (no number given)",
            report=f"the reuse read is {reuse:.2f}, within 0.05 of the {d.prefix_reuse_threshold:g} threshold",
            why="a little more or less reuse in real traffic changes the outcome of step 3",
            borderline=True,
        ))  # fmt: skip
    if reached3 and conc is not None and _near(conc, d.high_concurrency):
        out.append(Departure(
            topic="borderline: concurrency on the high-concurrency line",
            seed="seed 003 §3.3: high concurrency is 50+ concurrent requests",
            report=f"the concurrency read is {conc:,.0f}, within {BORDERLINE_SHARE:.0%} of {d.high_concurrency}",
            why="it sets the workload fit of every engine (the scores), not where the tree stops",
            borderline=True,
        ))  # fmt: skip
    return out


def departures(
    cfg: PlaybookConfig,
    steps: list[Any],
    weights: dict[str, float],
    conc: tuple[float | None, str, str],
    reuse: float | None,
) -> list[Departure]:
    """Every departure from the seed in this decision, the borderline inputs last.

    ``steps`` are the tree's ``TreeStep`` records, ``weights`` the scoring weights, ``conc`` the
    ``concurrency_evidence`` the tree read and ``reuse`` the prefix-reuse share it judged.
    """
    d = cfg.decision
    value, key, words = conc
    measured = key.startswith("step5.")
    band = ""
    if value is not None and SEED_LOW_MID_BELOW <= value < d.high_concurrency:
        band = f"; this run's {value:,.0f} lies in the band the seed leaves to judgement and is counted as low"
    out = [
        Departure(
            topic="concurrency bands",
            seed=f"seed 003 §3.3: high is 50+ concurrent requests, low-mid is < {SEED_LOW_MID_BELOW}; 20-50 is "
            "left to judgement",
            report=f"everything below decision.high_concurrency ({d.high_concurrency}) counts as low concurrency"
            + band,
            why="the fit table has two bands; the tree's step 3 falls through on either",
        ),
        Departure(
            topic="the concurrency the tree reads",
            seed="seed 003 §7.1 step 1: the typical concurrency (p50, p95, p99) of the workload",
            report=f"{key} = {'–' if value is None else f'{value:,.0f}'}: {words}",
            why="what one replica really held at its SLA capacity in step 5"
            if measured
            else "no capacity probes or trials with the engine's running/queue gauges here, so step 1's figure stands",
        ),
        Departure(
            topic="measured cost and SLA in the score",
            seed="seed 003 §7.3 step 7: score the four dimensions (hardware, model stability, workload, team)",
            report=f"the score adds measured cost ({weights.get('cost', 0):.0%}) and SLA share "
            f"({weights.get('sla', 0):.0%}): {weights.get('cost', 0) + weights.get('sla', 0):.0%} of the weight "
            "is measured, the four dimensions share the rest",
            why="the playbook's choice, so that measurements can overrule the tree (the seed: 量化权衡，不要凭感觉)",
        ),
        Departure(
            topic="heavy prefix reuse",
            seed="seed 003 §3.3/§3.5 step 3: 大量前缀复用 → SGLang, with no number",
            report=f"reuse counts as heavy at ≥ {d.prefix_reuse_threshold:g} of prompt tokens "
            "(decision.prefix_reuse_threshold)",
            why="the playbook's threshold, not the seed's",
        ),
    ]
    return out + _borderline(cfg, steps, value, reuse)
