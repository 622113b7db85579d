"""Where the capacity search starts, the prediction or the grid: probes and engine-minutes to a conclusive capacity.

The search (``helpers.benchmark.edge_search.EdgeSearch``, the config's default budget: growth 2, a 5% bracket,
at most 8 coarse probes, 2-4 edge rounds, a ±5% interval asked for) runs against fake engines of known
capacity (``tests/fakes/sim_engine.CurveEngine``: a queue's TTFT curve with stream and measurement noise),
started either

* **from the prediction**: the true capacity times a prediction error drawn log-uniformly within ±25% (the
  issue's goal for step 4's prediction; `docs/measurements/prediction-vs-measured.md` has the measured
  errors), or
* **from the grid**: the rate the busiest grid point within the SLA served, which on the archived H200 runs
  was 0.3-0.6 of the searched capacity (a closed-loop level of 32 streams against capacities of 25-30 req/s):
  drawn log-uniformly in that range.

For each start it prints, over ``--searches`` seeded searches, the median and 90th percentile of probes
until the search stopped, the share that ended conclusive (interval within ±5%), and the engine-minutes at
``--probe-seconds`` a probe (the H200 chat-8b probes took about 28 s each). ``--config`` takes the budget
from a workload config's ``evidence.search`` instead (with ``--set`` overrides, as ``playbook run`` takes
them), so that the fake engine runs the same budget rules as a GPU run of that config; ``--grid-share LO HI``
sets where the grid start falls (on the H100 chat-8b runs the grid's busiest point was 0.70 of the
capacity). No assertions: run it with ``python benchmarks/bench_search_start.py``.
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "fakes"))
from sim_engine import CurveEngine, run_search  # noqa: E402  (the fakes live beside the tests)

BUDGET = {"tolerance": 0.05, "max_probes": 8, "edge_rounds_min": 2, "edge_rounds_max": 4, "growth": 2.0}


def budget_of(config: str, overrides: list[str]) -> dict:
    """The search budget of a workload config's ``evidence.search`` (the options ``EdgeSearch`` takes)."""
    from helpers.core.config import load_config

    s = load_config(config, overrides).evidence.search
    return {
        "growth": s.growth,
        "tolerance": s.tolerance,
        "max_probes": s.max_probes,
        "edge_rounds_min": s.edge_rounds_min,
        "edge_rounds_max": s.edge_rounds_max,
        "edge_step": s.edge_step,
        "target_rel": s.target_rel_ci,
    }


def one(start_share: float, seed: int, budget: dict) -> tuple[int, bool]:
    """Probes and whether the interval ended within ±5%, for one search started at ``start_share`` × capacity."""
    search = run_search(CurveEngine(10.0, seed=seed, traffic_seed=seed), 10.0 * start_share, **budget)
    est = search.estimate()
    return len(search.probes), bool(est.conclusive)


def main() -> None:
    """Print the two starts side by side."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--searches", type=int, default=200)
    ap.add_argument("--probe-seconds", type=float, default=28.0)
    ap.add_argument("--config", help="take the budget from this workload config's evidence.search")
    ap.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    ap.add_argument("--grid-share", type=float, nargs=2, default=(0.3, 0.6), metavar=("LO", "HI"))
    args = ap.parse_args()
    budget = budget_of(args.config, args.overrides) if args.config else BUDGET
    lo, hi = args.grid_share
    rng = np.random.default_rng(0)
    starts = {
        "prediction (±25%)": [math.exp(rng.uniform(math.log(0.75), math.log(1.25))) for _ in range(args.searches)],
        f"grid ({lo:g}-{hi:g})": [math.exp(rng.uniform(math.log(lo), math.log(hi))) for _ in range(args.searches)],
    }
    print(f"{args.searches} searches per start, budget {budget}")
    print(f"{'start':<20} {'probes p50':>10} {'p90':>5} {'conclusive':>11} {'engine-min p50':>15}")
    for name, shares in starts.items():
        got = [one(share, seed, budget) for seed, share in enumerate(shares)]
        probes = sorted(n for n, _ in got)
        p50, p90 = statistics.median(probes), probes[int(0.9 * len(probes)) - 1]
        done = sum(ok for _, ok in got) / len(got)
        minutes = p50 * args.probe_seconds / 60
        print(f"{name:<20} {p50:>10g} {p90:>5d} {done:>10.0%} {minutes:>15.1f}")


if __name__ == "__main__":
    main()
