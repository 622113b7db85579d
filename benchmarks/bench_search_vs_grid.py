"""The SLA capacity search against the old concurrency grid, on one engine configuration.

Step 5 used to stand an engine configuration for its best grid point: a closed-loop concurrency sweep,
of which the highest-throughput point that meets the SLA was taken (``helpers.benchmark.sla.representative``
without a capacity). It now searches the SLA capacity instead (``helpers.benchmark.evidence.search``:
open-loop Poisson probes, a geometric sweep then bisection to ``tolerance``). This script runs both on
the same engine configuration, each through the real code path in its own temporary run folder, and
prints what each cost and where it ended:

1. **grid**: ``run_benchmarks`` on a copy of the config with the search off and the grid's levels
   (the config's, or ``--grid``); it ends at the chosen point's achieved req/s (closed loop).
2. **search**: ``run_benchmarks`` on a copy with the search on, as the config sets it (its ``probe_seconds``,
   ``max_probes``, ``tolerance``, ``growth``; ``--probe-seconds``, ``--max-probes`` and ``--tolerance``
   override them), after a one-level sweep at the grid's lowest level from which the search takes its
   start load as in step 5; trials are cut to one (``min_trials`` = ``max_trials`` = 1), and the
   ``search`` engine-seconds are the search's own cost. It ends at the capacity.
3. **reference**: a fine search run once at the end, which stands for the true capacity: ``EngineSession``
   launches the engine and ``evidence.search`` runs with tolerance ``--ref-tolerance`` (0.02), growth
   ``--ref-growth`` (1.15), ``--ref-probe-seconds`` (8) and ``--ref-max-probes`` (8), starting at the
   search's capacity (no sweep, no trials).

Each method's closeness is printed as % under the reference capacity (negative: above it). A grid point's
req/s is what a closed loop achieved, not an arrival rate shown to be sustained: a figure above the
reference means the grid claims more than open-loop arrivals get within the SLA.

Sizes: the search uses the config's own settings; ``playbook/workloads/default.yaml`` sizes them for
2 CPU cores (4 s probes of at least 12 requests, at most 5 probes, a 25% bracket). The reference's 8 s
probes (8 at most) are what makes it a reference: 4 s probes pass loads that 8 s ones fail. Measured on
2 shared cores (2026-12-01, grid [1, 8] x 24 requests): 441 s in all, of which the three engine launches
took 50-54 s each and the reference 140 s; ``--ref-probe-seconds 6 --ref-max-probes 6`` should save about a
minute (not measured) at the price of a coarser reference. The tuning step (``tune_max_num_seqs``) is left out
of every method. Wrap it in the engine lock::

    flock /tmp/pb-engine.lock .venv/bin/python benchmarks/bench_search_vs_grid.py

On a GPU host (longer probes and a wider grid; the engine label is one of that config's)::

    .venv/bin/python benchmarks/bench_search_vs_grid.py --config playbook/workloads/h200-offline/chat-8b.yaml
        --engine "vLLM 0.26.0" --grid 1 8 32 128 --probe-seconds 30 --max-probes 10

Progress goes to stderr, the figures to stdout. No assertions: it prints figures.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import os
import platform
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from helpers.benchmark import evidence
from helpers.benchmark.run import run_benchmarks
from helpers.benchmark.session import EngineSession
from helpers.benchmark.sla import grid_points, meets_sla, representative, sla_text
from helpers.core.config import PlaybookConfig
from helpers.launchers.config_check import load_config, parse_config
from helpers.run.records import CapacitySummary, EngineResult

DEFAULT_CONFIG = "playbook/workloads/default.yaml"


def say(msg: str) -> None:
    """Progress on stderr, with the time."""
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def variant(base: PlaybookConfig, label: str, workload: dict[str, Any], search: dict[str, Any]) -> PlaybookConfig:
    """A copy of ``base`` with only the engine ``label`` (no tuning) and the workload/evidence sections changed."""
    data = base.model_dump(mode="json")
    spec = next(e for e in data["engines"] if e["label"] == label)
    data["engines"] = [{**spec, "tune_max_num_seqs": []}]
    data["workload"] = {**data["workload"], **workload}
    trials = {**data["evidence"]["trials"], "min_trials": 1, "max_trials": 1}
    data["evidence"] = {"search": {**data["evidence"]["search"], **search}, "trials": trials}
    if data["quality"].get("reference") not in (None, label):
        data["quality"]["reference"] = None
    return parse_config(data, f"{base.name} ({label}, bench variant)")


def phases(result: EngineResult) -> str:
    """Engine-seconds by phase, e.g. 'cold start 44, sweep 21'."""
    return ", ".join(f"{k} {v:,.0f}" for k, v in result.gpu_seconds.items()) or "none"


def probe_lines(cap: CapacitySummary | None) -> list[str]:
    """One line per probe of a search: load, verdict, requests, sent and served rates."""
    if cap is None:
        return ["  (no search result)"]
    out = []
    for p in cap.probes:
        ok = p["sustained"] and p["meets_sla"] and p.get("delivered", True)
        sent = f"sent {p['offered_rate']:.3g}" if p.get("offered_rate") else "sent n/a"
        served = f"served {p['achieved_rate']:.3g}" if p.get("achieved_rate") else "served n/a"
        out.append(
            f"  {p['load']:8.4g} req/s  {'pass' if ok else 'FAIL'}  {p['requests']:4d} req  {sent} {served}  {p['why']}"
        )
    return out


def under(value: float | None, ref: float | None) -> str:
    """How far ``value`` is under ``ref``, in % of ``ref`` (negative: above it)."""
    if value is None or not ref:
        return "n/a"
    return f"{100 * (ref - value) / ref:+.1f}%"


async def reference_search(cfg: PlaybookConfig, run_dir: Path) -> tuple[EngineResult, CapacitySummary | None, float]:
    """Launch the engine, run ``evidence.search`` on it (fine tolerance, given start), stop it."""
    run = EngineSession(cfg.engines[0], cfg, run_dir, say)
    t0 = time.monotonic()
    cap = None
    try:
        run.launch(run.spec)
        cap = await evidence.search(run)
    except Exception as err:  # the table says why rather than losing the other figures
        run.fail(f"{type(err).__name__}: {err}")
    finally:
        run.stop()
    run.result.capacity = cap
    return run.result, cap, time.monotonic() - t0


def reference_start(cap: CapacitySummary | None, fallback: float) -> float:
    """Where the reference search starts: the search's capacity, else under its lowest failing load."""
    if cap is not None and cap.capacity:
        return cap.capacity
    if cap is not None and cap.bracket_high:
        return cap.bracket_high / 2
    return max(0.05, fallback)


def machine_facts(version: str | None) -> list[str]:
    """Date, host and engine facts printed above the table."""
    try:
        load = " / ".join(f"{x:.1f}" for x in os.getloadavg())
    except OSError:
        load = "n/a"
    return [
        f"date: {dt.datetime.now().astimezone().isoformat(timespec='seconds')}",
        f"host: {platform.node()} {platform.machine()}, nproc {os.cpu_count()}, "
        f"usable cores {len(os.sched_getaffinity(0))}, load average (1/5/15 min) {load}",
        f"python {platform.python_version()}; engine version {version or 'unknown'}",
    ]


async def compare(a: argparse.Namespace) -> None:
    """Run the three methods and print the table."""
    base = load_config(a.config)
    label = a.engine or base.engines[0].label
    if label not in [e.label for e in base.engines]:
        raise SystemExit(f"--engine {label!r} is not in {a.config}: {[e.label for e in base.engines]}")
    grid = sorted(set(a.grid or base.workload.concurrency))
    s = base.evidence.search
    search_opts: dict[str, Any] = {"enabled": True, "start": None}
    search_opts["probe_seconds"] = a.probe_seconds if a.probe_seconds is not None else s.probe_seconds
    search_opts["max_probes"] = a.max_probes if a.max_probes is not None else s.max_probes
    search_opts["tolerance"] = a.tolerance if a.tolerance is not None else s.tolerance
    wl_grid: dict[str, Any] = {"concurrency": grid}
    if a.grid_requests:
        wl_grid["requests_per_point"] = a.grid_requests
    cfg_grid = variant(base, label, wl_grid, {"enabled": False})
    cfg_search = variant(base, label, {**wl_grid, "concurrency": [grid[0]]}, search_opts)

    with tempfile.TemporaryDirectory(prefix="bench-search-vs-grid-") as tmp:
        root = Path(a.keep) if a.keep else Path(tmp)
        root.mkdir(parents=True, exist_ok=True)
        say(f"run folders under {root}")

        say(f"(a) grid {grid} on {label!r}")
        t0 = time.monotonic()
        (res_grid,) = await run_benchmarks(cfg_grid, root / "grid", say)
        wall_grid = time.monotonic() - t0
        rep = representative(res_grid, cfg_grid)

        say(f"(b) capacity search on {label!r}")
        t0 = time.monotonic()
        (res_search,) = await run_benchmarks(cfg_search, root / "search", say)
        wall_search = time.monotonic() - t0
        cap = res_search.capacity

        grid_rate = rep.request_rate.mean if rep.request_rate else 0.0
        start = reference_start(cap, grid_rate)
        ref_opts = {"enabled": True, "probe_seconds": a.ref_probe_seconds, "start": start}
        ref_opts |= {"max_probes": a.ref_max_probes, "tolerance": a.ref_tolerance, "growth": a.ref_growth}
        cfg_ref = variant(base, label, {"concurrency": [grid[0]]}, ref_opts)
        say(f"(c) reference search (tolerance {a.ref_tolerance}) from {start:.4g} req/s")
        res_ref, ref_cap, wall_ref = await reference_search(cfg_ref, root / "reference")

    ref = ref_cap.capacity if ref_cap is not None else None
    print("\n".join(machine_facts(res_grid.version or res_search.version)))
    print(f"config: {a.config}, engine {label!r}; SLA {sla_text(base.sla)}")
    wl = base.workload
    print(
        f"workload: {wl.input_tokens} in / {wl.output_tokens} out tokens, shared prefix {wl.shared_prefix_tokens}; "
        f"grid {grid} x {cfg_grid.workload.requests_per_point} requests; "
        f"search: probe_seconds {cfg_search.evidence.search.probe_seconds:g}, "
        f"max_probes {cfg_search.evidence.search.max_probes}, "
        f"tolerance {cfg_search.evidence.search.tolerance:g}, growth {cfg_search.evidence.search.growth:g}, "
        f"min_requests {cfg_search.evidence.search.min_requests}, 1 trial; "
        f"reference: tolerance {a.ref_tolerance:g}, growth {a.ref_growth:g}, "
        f"probe_seconds {cfg_ref.evidence.search.probe_seconds:g}, max_probes {a.ref_max_probes}"
    )
    for name, r in (("grid", res_grid), ("search", res_search), ("reference", res_ref)):
        if r.status != "ok":
            print(f"{name}: {r.status}: {r.reason}")

    print("\ngrid points (closed loop):")
    for p in grid_points(res_grid):
        print(
            f"  c={p.concurrency:<4d} {p.req_s:7.3g} req/s  {p.output_tok_s:8,.0f} out tok/s  "
            f"TTFT p95 {p.ttft_ms_p95 or 0:8,.0f} ms  {p.requests} req  "
            + ("meets" if meets_sla(p, base.sla) else "MISSES")
        )
    print(f"  chosen: {rep.basis}" + (f" -> c={rep.concurrency}" if rep.concurrency else ""))
    print(f"\nsearch probes (start {evidence.start_load(res_search, _Shim(cfg_search)):.4g} req/s from its sweep):")
    print("\n".join(probe_lines(cap)))
    print(f"  note: {cap.note if cap else '-'}; trials: {cap.trials_note if cap else '-'}")
    print(f"\nreference probes (start {start:.4g} req/s):")
    print("\n".join(probe_lines(ref_cap)))
    print(f"  note: {ref_cap.note if ref_cap else '-'}")

    rows = [
        ("grid", len(grid_points(res_grid)), wall_grid, res_grid, grid_rate if rep.meets_sla else None, rep.basis),
        ("search", len(cap.probes) if cap else 0, wall_search, res_search, cap.capacity if cap else None, ""),
        ("reference", len(ref_cap.probes) if ref_cap else 0, wall_ref, res_ref, ref, ""),
    ]
    head = f"{'method':<10} {'loads':>5} {'wall s':>7}  {'ends at req/s':>13}  {'under ref':>9}"
    print(f"\n{head}  engine-seconds by phase")
    for name, n, wall, r, end, _basis in rows:
        where = f"{end:.4g}" if end is not None else "none"
        if name == "grid" and rep.concurrency:
            where += f" (c={rep.concurrency})"
        if name != "grid" and r.capacity is not None and r.capacity.bracket_high:
            where += f" (<{r.capacity.bracket_high:.4g})"
        print(f"{name:<10} {n:>5d} {wall:>7.0f}  {where:>13}  {under(end, ref):>9}  {phases(r)}")
    if not rep.meets_sla:
        print("grid: no point met the SLA, so it ends at no load")
    search_s, probes = res_search.gpu_seconds.get("search", 0.0), len(cap.probes) if cap else 0
    print(
        f"cost of the load decision itself: grid sweep {res_grid.gpu_seconds.get('sweep', 0):,.0f} engine-s for "
        f"{len(grid_points(res_grid))} loads; search {search_s:,.0f} engine-s for {probes} probes "
        "(plus its one-level start sweep and its trial); 'loads' counts probes, retries of a late client included"
    )


class _Shim:
    """Just enough of an ``EngineSession`` for ``evidence.start_load``: the config."""

    def __init__(self, cfg: PlaybookConfig):
        self.cfg = cfg


def main() -> None:
    """Parse the options and compare."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", default=DEFAULT_CONFIG, help=f"workload config (default {DEFAULT_CONFIG})")
    ap.add_argument("--engine", help="engine label in --config (default: its first engine)")
    ap.add_argument("--grid", type=int, nargs="+", help="concurrency levels of the grid (default: the config's)")
    ap.add_argument("--grid-requests", type=int, help="requests per grid point (default: the config's)")
    ap.add_argument("--probe-seconds", type=float, help="arrivals per search probe, s (default: the config's)")
    ap.add_argument("--max-probes", type=int, help="probe budget of the search (default: the config's)")
    ap.add_argument("--tolerance", type=float, help="search tolerance (default: the config's)")
    ap.add_argument("--ref-tolerance", type=float, default=0.02, help="tolerance of the reference search")
    ap.add_argument("--ref-growth", type=float, default=1.15, help="growth of the reference search")
    ap.add_argument("--ref-max-probes", type=int, default=8, help="probe budget of the reference search")
    ap.add_argument("--ref-probe-seconds", type=float, default=8.0, help="arrivals per reference probe (s)")
    ap.add_argument("--keep", help="keep the three run folders under this folder (default: a temp folder)")
    asyncio.run(compare(ap.parse_args()))


if __name__ == "__main__":
    main()
