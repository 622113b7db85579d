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
``--probe-seconds`` a probe (the H200 chat-8b probes took about 28 s each). No assertions: run it with
``python benchmarks/bench_search_start.py``.
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


def one(start_share: float, seed: int) -> tuple[int, bool]:
    """Probes and whether the interval ended within ±5%, for one search started at ``start_share`` × capacity."""
    search = run_search(CurveEngine(10.0, seed=seed, traffic_seed=seed), 10.0 * start_share, **BUDGET)
    est = search.estimate()
    return len(search.probes), bool(est.conclusive)


def main() -> None:
    """Print the two starts side by side."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--searches", type=int, default=200)
    ap.add_argument("--probe-seconds", type=float, default=28.0)
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    starts = {
        "prediction (±25%)": [math.exp(rng.uniform(math.log(0.75), math.log(1.25))) for _ in range(args.searches)],
        "grid (0.3-0.6)": [math.exp(rng.uniform(math.log(0.3), math.log(0.6))) for _ in range(args.searches)],
    }
    print(f"{args.searches} searches per start, budget {BUDGET}")
    print(f"{'start':<20} {'probes p50':>10} {'p90':>5} {'conclusive':>11} {'engine-min p50':>15}")
    for name, shares in starts.items():
        got = [one(share, seed) for seed, share in enumerate(shares)]
        probes = sorted(n for n, _ in got)
        p50, p90 = statistics.median(probes), probes[int(0.9 * len(probes)) - 1]
        done = sum(ok for _, ok in got) / len(got)
        minutes = p50 * args.probe_seconds / 60
        print(f"{name:<20} {p50:>10g} {p90:>5d} {done:>10.0%} {minutes:>15.1f}")


if __name__ == "__main__":
    main()
