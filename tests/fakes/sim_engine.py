"""Fake engines with a known SLA capacity, for the statistics of the capacity search (no process, no HTTP).

``CurveEngine``: TTFT p95 rises with load as a queue's does (``base + k ρ / (1 - ρ)``, ρ = load / μ), so it
meets the TTFT limit exactly at ``capacity``; each measurement's TTFT p95 is multiplied by noise with two
parts: one that belongs to the *stream* (the arrival schedule and prompts it ran on, shared by every engine
that runs that stream: bursty traffic is bursty for everyone) and one of its own (the engine's and the
machine's). Two engines built with the same ``traffic_seed`` see the same stream effects: common random
numbers, as two configurations of one run do.

``QueueEngine``: a discrete-event simulation of a server with ``slots`` requests in service at once and
a FIFO queue, each request holding its slot for its own service time (``service_s`` × a lognormal spread).
It returns the per-request send and finish times of one open-loop Poisson probe, for the sustained test
(``helpers.measure.timing.keep_up``) at short and long request latencies; its capacity is
``slots / mean service time`` requests per second.

``BatchEngine``: continuous batching, as vLLM and SGLang serve: every running request gains one token per
step, and a step takes longer the more requests run (``step_s + per_seq_s × running``). A request's latency
therefore depends on the batch it shares: it grows while the batch fills and shrinks once arrivals stop
(the drain), the behaviour that made a probe's finish-against-send slope read 109-458% served on an H100
(2026-12-05, ``docs/measurements/2026-12-05-h100-sustained-test.md``). Its capacity is the rate past which
the batch grows without bound, ``1 / (output_tokens × per_seq_s)``.

``searched_result``: an engine result as a live run stores it (search points with their judged probes and
the estimate), from a search against a ``CurveEngine``: the decision's tests compare such results.
"""

from __future__ import annotations

import hashlib
import heapq
import math

import numpy as np

from helpers.benchmark.edge_search import EdgeSearch
from helpers.benchmark.probe import SlaLimits
from helpers.run.records import CapacitySummary, EngineResult, Point


def _unit_normal(*key: object) -> float:
    """A standard normal draw fixed by ``key`` (the same key gives the same draw, whoever asks)."""
    digest = hashlib.sha256("|".join(map(str, key)).encode()).digest()
    return float(np.random.default_rng(int.from_bytes(digest[:8], "little")).standard_normal())


class CurveEngine:
    """A fake engine whose TTFT p95 meets ``limit_ms`` at exactly ``capacity`` (module docstring)."""

    def __init__(
        self,
        capacity: float,
        *,
        limit_ms: float = 2000.0,
        rho_at_capacity: float = 0.8,
        base_share: float = 0.2,
        sigma_stream: float = 0.08,
        sigma_own: float = 0.08,
        seed: int = 0,
        traffic_seed: int = 0,
        requests: int = 200,
    ):
        self.capacity, self.limit = capacity, limit_ms
        self.mu = capacity / rho_at_capacity
        self.base = base_share * limit_ms
        self.k = (limit_ms - self.base) * (1 - rho_at_capacity) / rho_at_capacity
        self.sigma_stream, self.sigma_own = sigma_stream, sigma_own
        self.rng = np.random.default_rng(seed)
        self.traffic_seed, self.requests, self.calls = traffic_seed, requests, 0

    def ttft_p95(self, load: float) -> float:
        """The noiseless TTFT p95 at ``load`` (ms); twenty times the limit at or past saturation."""
        rho = load / self.mu
        return self.base + self.k * rho / (1 - rho) if rho < 0.995 else 20 * self.limit

    def measure(self, load: float, stream: str) -> dict:
        """One probe's measurement at ``load`` on ``stream`` (the fields ``EdgeSearch.record`` reads)."""
        self.calls += 1
        noise = (
            self.sigma_stream * _unit_normal(self.traffic_seed, stream) + self.sigma_own * self.rng.standard_normal()
        )
        ttft = min(self.ttft_p95(load), 20 * self.limit) * math.exp(noise)
        return {"ttft_p95_ms": ttft, "requests": self.requests, "served_ratio": 1.0, "served_ratio_low": 0.99}


def run_search(engine: CurveEngine, start: float, limit_ms: float = 2000.0, **options) -> EdgeSearch:
    """Drive an ``EdgeSearch`` to its end against ``engine``."""
    search = EdgeSearch(start, SlaLimits(ttft_p95_ms=limit_ms), **options)
    while (ask := search.next()) is not None:
        search.record(engine.measure(ask.load, ask.stream))
    return search


class QueueEngine:
    """A k-slot FIFO server, simulated request by request (module docstring)."""

    def __init__(self, slots: int, service_s: float, spread: float = 0.3, seed: int = 0):
        self.slots, self.service_s, self.spread = slots, service_s, spread
        self.rng = np.random.default_rng(seed)

    @property
    def capacity(self) -> float:
        """Requests per second it serves when always busy."""
        return self.slots / (self.service_s * math.exp(self.spread**2 / 2))

    def probe(self, rate: float, requests: int) -> tuple[list[float], list[float], list[float]]:
        """Send ``requests`` Poisson arrivals at ``rate``: (send times, first-token times, finish times), s."""
        sends = np.concatenate([[0.0], np.cumsum(self.rng.exponential(1 / rate, size=requests - 1))])
        services = self.service_s * np.exp(self.spread * self.rng.standard_normal(requests))
        free = [0.0] * self.slots  # when each slot frees up
        heapq.heapify(free)
        firsts, ends = [], []
        for t, s in zip(sends, services, strict=True):
            start = max(t, heapq.heappop(free))
            firsts.append(start + 0.01)
            ends.append(start + s)
            heapq.heappush(free, start + s)
        return sends.tolist(), firsts, ends


class BatchEngine:
    """Continuous batching with a step time that grows with the batch, simulated step by step (module docstring)."""

    def __init__(
        self, output_tokens: int = 256, step_s: float = 0.007, per_seq_s: float = 0.00007, max_seqs: int = 1024,
        seed: int = 0,
    ):  # fmt: skip
        self.output_tokens, self.step_s, self.per_seq_s, self.max_seqs = output_tokens, step_s, per_seq_s, max_seqs
        self.rng = np.random.default_rng(seed)

    @classmethod
    def with_latency(cls, latency_s: float, share: float = 0.8, **options) -> BatchEngine:
        """An engine whose requests take ``latency_s`` in steady state at ``share`` of its capacity."""
        base = cls(**options)
        scale = latency_s / base.steady_latency(share * base.capacity)
        return cls(**{**options, "step_s": base.step_s * scale, "per_seq_s": base.per_seq_s * scale})

    @property
    def capacity(self) -> float:
        """Requests per second past which the batch grows without bound."""
        return 1.0 / (self.output_tokens * self.per_seq_s)

    def steady_latency(self, rate: float) -> float:
        """A request's latency (s) once the batch has settled at ``rate`` (below capacity)."""
        n, a, c = self.output_tokens, self.step_s, self.per_seq_s
        batch = n * rate * a / (1 - n * rate * c)
        return n * (a + c * batch)

    def probe(self, rate: float, requests: int) -> tuple[list[float], list[float], list[float]]:
        """Send ``requests`` Poisson arrivals at ``rate``: (send times, first-token times, finish times), s."""
        sends = np.concatenate([[0.0], np.cumsum(self.rng.exponential(1 / rate, size=requests - 1))])
        firsts, ends = [0.0] * requests, [0.0] * requests
        left: dict[int, int] = {}  # running request -> tokens still to make
        waiting: list[int] = []
        t, i = 0.0, 0
        while i < requests or left or waiting:
            while i < requests and sends[i] <= t:
                waiting.append(i)
                i += 1
            while waiting and len(left) < self.max_seqs:
                left[waiting.pop(0)] = self.output_tokens
            if not left:
                t = float(sends[i])
                continue
            t += self.step_s + self.per_seq_s * len(left)
            for j in list(left):
                if left[j] == self.output_tokens:
                    firsts[j] = t
                left[j] -= 1
                if left[j] == 0:
                    ends[j] = t
                    del left[j]
        return sends.tolist(), firsts, ends


def searched_result(
    label: str,
    engine: str,
    capacity: float,
    *,
    seed: int = 0,
    traffic_seed: int = 0,
    input_tokens: int = 512,
    output_tokens: int = 256,
    gpus: int = 1,
    **options,
) -> EngineResult:
    """An ``EngineResult`` whose capacity search ran against a ``CurveEngine`` of ``capacity`` req/s.

    Every probe is a stored search point (its judged probe kept, as a live run keeps it), with the request
    rate, tokens and throughput of a load served within the SLA; the summary carries the estimate.
    """
    fake = CurveEngine(capacity, seed=seed, traffic_seed=traffic_seed)
    opts = {"tolerance": 0.05, "max_probes": 8, "edge_rounds_min": 2, "edge_rounds_max": 4} | options
    search = run_search(fake, capacity / 2.5, **opts)
    points = []
    for p in search.probes:
        served = p.load * min(1.0, fake.mu / p.load)
        points.append(
            Point(
                label=label, engine=engine, concurrency=0, phase="search", offered_rate=p.load, requests=fake.requests,
                duration_s=fake.requests / p.load, input_tokens_mean=input_tokens, output_tokens_mean=output_tokens,
                output_tok_s=served * output_tokens, total_tok_s=served * (input_tokens + output_tokens), req_s=served,
                ttft_ms_p95=p.ttft_p95_ms, probe=p.model_dump(mode="json"), verdict=p.why,
                knobs={"tensor_parallel": gpus} if gpus > 1 else {},
            )
        )  # fmt: skip
    est = search.estimate()
    cap = CapacitySummary(
        axis="rate", capacity=est.value, bracket_low=est.bracket_low, bracket_high=est.bracket_high,
        bounded=est.status == "estimated", converged=est.conclusive, note="fake engine search", estimate=est,
        probes=[p.model_dump(mode="json") for p in search.probes],
    )  # fmt: skip
    return EngineResult(label=label, engine=engine, capacity=cap, points=points, cold_start_s=100.0,
                        gpu_seconds={"search": 20.0 * len(points)})  # fmt: skip
