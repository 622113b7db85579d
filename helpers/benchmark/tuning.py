"""Step 5's batch-size tuning: each ``tune_max_num_seqs`` value launched and measured at the target concurrency."""

from __future__ import annotations

from typing import TYPE_CHECKING

import httpx

from helpers.benchmark.plan import target_concurrency
from helpers.benchmark.sla import meets_sla
from helpers.core.errors import EngineError
from helpers.run.records import Point

if TYPE_CHECKING:
    from helpers.benchmark.run import EngineRun


async def tune(run: EngineRun) -> None:
    """Try each batch size at the target concurrency; keep the best throughput within the SLA.

    The sweep's point at the target concurrency (the configured batch size) is a candidate too,
    so a value already measured there is not launched again.
    """
    target = target_concurrency(run.cfg)
    base = next((p for p in run.result.points if p.phase == "sweep" and p.concurrency == target), None)
    tried: list[Point] = [base] if base is not None else []
    for seqs in run.spec.tune_max_num_seqs:
        if base is not None and seqs == run.spec.knobs.max_num_seqs:
            continue
        spec = run.spec.model_copy(deep=True)
        spec.knobs.max_num_seqs = seqs
        try:
            run.launch(spec, tag=f"tune-seqs{seqs}")
            p = await run.measure(spec, target, "tune")
        except (EngineError, httpx.HTTPError, ValueError, OSError) as err:
            run.say(f"{run.spec.label}: tuning max_num_seqs={seqs} failed: {err}")
            run.steps.drop(run.spec.label, "cold", "tune", idents=[f"seqs{seqs}"])
            p = None
        finally:
            run.stop()
        if p is not None:
            tried.append(p)
            run.result.points.append(p)
    within = [p for p in tried if meets_sla(p, run.cfg.sla)]
    if within:
        best = max(within, key=lambda p: p.output_tok_s)
        run.result.tuned_knobs = dict(best.knobs)
