"""SLA capacity search: the highest load an engine serves within the SLA, and sustains.

What makes one load pass (within the SLA, sustained, delivered) is ``helpers.benchmark.probe``. A trial
whose client sent requests late (its p95 lag behind the arrival schedule over ``max_client_lag_ms``) did
not deliver the load it was asked for: it is measured again (``retries``) and, still late, counts as
failed: the capacity is not claimed beyond what the client could drive.

The search (after the method of vLLM's ``bench sweep`` SLA search and Vidur's capacity search, our
own code): a geometric sweep from ``start`` (× ``growth``) up to the first failing load, or down from
``start`` when it already fails; then bisection between the highest passing and the lowest failing
load until (high − low) / low ≤ ``tolerance``. The capacity is the highest passing load. Without a
failing load above it, the result says the capacity is *at least* the highest load tried; without a
passing one, that it is *below* the lowest.

``CapacitySearch`` is the pure state machine (``next_load`` / ``record``), so a search can be driven
by anything; ``search_capacity`` drives it with a ``measure(load)`` that may be sync or async, and
``search_capacity_sync`` with a sync one. ``measurement_from_load`` and ``measurement_from_numbers``
turn a guidellm result, or plain numbers, into the ``Measurement`` the search judges.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from helpers.benchmark.probe import Axis, CapacityResult, Measurement, Probe, SlaLimits, judge
from helpers.benchmark.stats import inflight_samples, queue_trend
from helpers.core.config import SLA
from helpers.measure.loadgen import LoadResult
from helpers.measure.timing import sending_and_latency

__all__ = ["CapacitySearch", "Measurement", "Probe", "SlaLimits", "judge", "search_capacity", "search_capacity_sync"]


def measurement_from_numbers(
    load: float,
    ttft_ms: Sequence[float],
    *,
    axis: Axis = "rate",
    offered_rate: float | None = None,
    achieved_rate: float | None = None,
    itl_p95_ms: float | None = None,
    errors: int = 0,
    queue_samples: Sequence[tuple[float, float]] | None = None,
    ttft_p95_ms: float | None = None,
    client_lag_p95_ms: float | None = None,
) -> Measurement:
    """A ``Measurement`` from plain numbers: per-request TTFTs, rates, errors, queue samples (t, waiting).

    TTFT p95 is ``ttft_p95_ms`` when given (e.g. guidellm's own), else ``numpy.percentile(ttft_ms, 95)``.
    Queue samples (from ``/metrics`` waiting requests, or ``inflight_samples``) give the queue trend.
    """
    requests = len(ttft_ms)
    p95 = ttft_p95_ms if ttft_p95_ms is not None else (float(np.percentile(ttft_ms, 95)) if requests else None)
    trend = queue_trend(queue_samples) if queue_samples else None
    got = {"ttft_p95_ms": p95, "itl_p95_ms": itl_p95_ms, "requests": requests, "offered_rate": offered_rate}
    got |= {"achieved_rate": achieved_rate, "client_lag_p95_ms": client_lag_p95_ms}
    got |= {"queue_growth": trend.slope_per_s, "queue_growing": trend.growing} if trend else {}
    return Measurement(load=load, axis=axis, error_share=errors / (requests + errors) if errors else 0.0, **got)


def measurement_from_load(
    result: LoadResult,
    load: float | None = None,
    axis: Axis = "rate",
    queue_samples: Sequence[tuple[float, float]] | None = None,
) -> Measurement:
    """A ``Measurement`` from a guidellm ``LoadResult`` (``run_rate`` fills every field this reads).

    Offered is the rate really sent; achieved the rate of completions over the steady window (first
    finish to last send). The queue is the server's waiting requests (``queue_samples`` from
    ``/metrics``), else the client's requests in flight from the send/finish times. (The client's
    in-flight series is not used beside the server's: over a probe of tens of requests its Poisson
    swings read as growth, H200 2026-12-01; an engine that admits the whole overload into its batch
    is caught by the steady-window served rate and ``benchmark.evidence``'s drain test instead.)
    """
    if load is None:
        load = result.offered_rate
    if load is None:
        raise ValueError("load is needed: this result has no offered_rate (not from run_rate)")
    if not queue_samples and result.request_starts_s:  # the client's in-flight series only as the fallback
        queue_samples = inflight_samples(result.request_starts_s, result.request_ends_s)
    rates = {"offered_rate": result.sent_rate, "achieved_rate": result.completed_rate}
    p95s = {"ttft_p95_ms": result.ttft_ms.get("p95"), "itl_p95_ms": result.itl_ms.get("p95")}
    m = measurement_from_numbers(
        load,
        result.ttft_values_ms,
        axis=axis,
        errors=result.errors,
        queue_samples=queue_samples or None,
        **rates,
        **p95s,
        client_lag_p95_ms=result.dispatch_delay_p95_ms,
    )
    kept = {"served_ratio": result.served_ratio, "served_ratio_low": result.served_ratio_low}
    kept["served_ratio_high"] = result.served_ratio_high
    if result.request_starts_s:
        kept["send_span_s"], kept["latency_p50_s"] = sending_and_latency(result.request_starts_s, result.request_ends_s)
    return m.model_copy(update={"steady_window_s": result.steady_window_s, **kept})


def _as_measurement(m: Measurement | Mapping[str, Any], load: float, axis: Axis) -> Measurement:
    """Accept a Measurement, a Probe (re-judged) or a mapping of Measurement fields; stamp load and axis."""
    fields = Measurement.model_fields
    data = {k: getattr(m, k) for k in fields} if isinstance(m, Measurement) else {k: m[k] for k in fields if k in m}
    return Measurement.model_validate({**data, "load": load, "axis": axis})


def _fmt(load: float, axis: Axis) -> str:
    if axis == "concurrency":
        return f"{load:,.0f} streams"
    return f"{load:,.0f} req/s" if load >= 100 else f"{load:.3g} req/s"


class CapacitySearch:
    """The search as a pure state machine: ask ``next_load()``, measure it, ``record()`` it; then ``result()``.

    ``reuse`` holds probes of an earlier, interrupted search: a load already measured is taken from it
    instead of being measured again (a re-run resumes).
    """

    def __init__(
        self,
        start: float,
        limits: SlaLimits | SLA,
        *,
        axis: Axis = "rate",
        growth: float = 2.0,
        tolerance: float = 0.05,
        max_probes: int = 12,
        max_load: float | None = None,
        min_load: float | None = None,
        min_sustained_ratio: float = 0.95,
        max_client_lag_ms: float | None = 100.0,
        retries: int = 1,
        reuse: Sequence[Probe] = (),
    ):
        if start <= 0 or growth <= 1 or tolerance <= 0 or max_probes < 1:
            raise ValueError("need start > 0, growth > 1, tolerance > 0 and max_probes >= 1")
        if max_load is not None and max_load < start:
            raise ValueError(f"max_load {max_load} is below start {start}")
        self.axis, self.growth, self.tolerance, self.max_probes, self.retries = (
            axis,
            growth,
            tolerance,
            max_probes,
            retries,
        )
        self.limits, self.ratio, self.max_lag = limits, min_sustained_ratio, max_client_lag_ms
        self.max_load, self.min_load = max_load, (min_load if min_load is not None else start / growth**2)
        self.reuse = [p for p in reuse if p.axis == axis]
        self.probes: list[Probe] = []
        self.low: float | None = None  # highest passing load
        self.high: float | None = None  # lowest failing load
        self._next: float | None = self._snap(start)
        self._why_stop = ""

    def _snap(self, load: float) -> float:
        """Concurrency is a whole number of streams (at least 1); a rate stays as it is."""
        return float(max(1, round(load))) if self.axis == "concurrency" else float(load)

    def _narrow_enough(self) -> bool:
        assert self.low is not None and self.high is not None
        if self.axis == "concurrency" and self.high - self.low <= 1:
            return True
        return (self.high - self.low) / self.low <= self.tolerance

    def next_load(self) -> float | None:
        """The load to measure next, or None when the search is over."""
        if self._next is not None and len(self.probes) >= self.max_probes:
            self._why_stop = f"probe budget ({self.max_probes}) spent"
            self._next = None
        return self._next

    def take_reused(self, load: float) -> Probe | None:
        """The next probe of ``reuse`` made at ``load`` (it is used up), or None: measure it."""
        for i, p in enumerate(self.reuse):
            if math.isclose(p.load, load, rel_tol=1e-9):
                return self.reuse.pop(i)
        return None

    def record(self, m: Measurement | Mapping[str, Any]) -> Probe:
        """Judge the measurement of the load ``next_load()`` gave and choose the one after it."""
        if self._next is None:
            raise RuntimeError("the search is over; nothing was asked to be measured")
        load = self._next
        probe = judge(_as_measurement(m, load, self.axis), self.limits, self.ratio, self.max_lag)
        self.probes.append(probe)
        if not probe.delivered and sum(p.load == load for p in self.probes) <= self.retries:
            return probe  # the client fell behind: measure this load again
        if probe.passed:
            self.low = load if self.low is None else max(self.low, load)
        else:
            self.high = load if self.high is None else min(self.high, load)
        self._next = self._choose(load, probe.passed)
        return probe

    def _choose(self, load: float, passed: bool) -> float | None:
        if self.low is not None and self.high is not None:  # bracketed: bisect
            mid = self._snap((self.low + self.high) / 2)
            if self._narrow_enough() or not self.low < mid < self.high:
                self._why_stop = "bracket within tolerance"
                return None
            return mid
        if passed:  # sweeping up
            nxt = max(load + 1, load * self.growth) if self.axis == "concurrency" else load * self.growth
            if self.max_load is not None and load >= self.max_load:
                self._why_stop = f"max_load {_fmt(self.max_load, self.axis)} reached"
                return None
            return self._snap(nxt if self.max_load is None else min(nxt, self.max_load))
        nxt = self._snap(load / self.growth)  # sweeping down: the start already failed
        nxt = min(nxt, load - 1) if self.axis == "concurrency" else nxt
        if nxt < max(self.min_load, 1 if self.axis == "concurrency" else 0) or nxt >= load:
            self._why_stop = f"min_load {_fmt(self.min_load, self.axis)} reached"
            return None
        return nxt

    def result(self) -> CapacityResult:
        """The capacity found so far, its bracket, and a note that says what is and is not known."""
        low, high, ax = self.low, self.high, self.axis
        bounded = low is not None and high is not None
        converged = bounded and self._narrow_enough()
        failing = next((p for p in reversed(self.probes) if p.load == high), None)
        because = f" (at {_fmt(failing.load, ax)}: {failing.why})" if failing is not None else ""
        if not self.probes:
            note = "no load was measured"
        elif low is not None and high is not None:
            note = f"capacity {_fmt(low, ax)}: passed there, failed at {_fmt(high, ax)}{because}"
            note += "" if converged else f"; bracket wider than ±{self.tolerance:.0%} ({self._why_stop})"
        elif low is not None:
            note = f"SLA met at the highest load tried ({_fmt(low, ax)}): capacity is at least {_fmt(low, ax)}"
            note += f" ({self._why_stop})" if self._why_stop else ""
        else:
            lowest = _fmt(high or 0.0, ax)
            note = f"SLA missed at the lowest load tried ({lowest}): capacity is below {lowest}{because}"
        found = {"capacity": low, "bracket_low": low, "bracket_high": high, "bounded": bounded, "note": note}
        return CapacityResult(axis=ax, converged=converged, probes=self.probes, tolerance=self.tolerance, **found)


MeasureFn = Callable[[float], Any]  # load -> Measurement | mapping of its fields, or an awaitable of one


async def search_capacity(
    measure: MeasureFn,
    start: float,
    limits: SlaLimits | SLA,
    *,
    axis: Axis = "rate",
    growth: float = 2.0,
    tolerance: float = 0.05,
    max_probes: int = 12,
    max_load: float | None = None,
    min_load: float | None = None,
    min_sustained_ratio: float = 0.95,
    max_client_lag_ms: float | None = 100.0,
    retries: int = 1,
    reuse: Sequence[Probe] = (),
    on_probe: Callable[[Probe], None] | None = None,
) -> CapacityResult:
    """Search the SLA capacity, calling ``measure(load)`` (sync or async) once per probe; await in Jupyter.

    ``on_probe`` sees every judged probe as soon as it is made (to save it, or to show progress);
    probes found in ``reuse`` are not measured again. An exception from ``measure`` propagates.
    """
    options = {"axis": axis, "growth": growth, "tolerance": tolerance, "max_probes": max_probes, "retries": retries}
    options |= {"max_load": max_load, "min_load": min_load, "min_sustained_ratio": min_sustained_ratio}
    search = CapacitySearch(start, limits, max_client_lag_ms=max_client_lag_ms, reuse=reuse, **options)
    while (load := search.next_load()) is not None:
        got = search.take_reused(load)
        if got is None:
            got = measure(load)
            got = (await got) if inspect.isawaitable(got) else got
        probe = search.record(got)
        if on_probe is not None:
            on_probe(probe)
    return search.result()


def search_capacity_sync(measure: MeasureFn, start: float, limits: SlaLimits | SLA, **options: Any) -> CapacityResult:
    """``search_capacity`` (same keywords) for a synchronous ``measure``, such as a model or saved results."""
    on_probe = options.pop("on_probe", None)
    search = CapacitySearch(start, limits, **options)
    while (load := search.next_load()) is not None:
        got = search.take_reused(load)
        if got is None:
            got = measure(load)
            if inspect.isawaitable(got):
                getattr(got, "close", lambda: None)()  # not awaited: close it rather than leak a warning
                raise TypeError("measure returned an awaitable: use `await search_capacity(...)`")
        probe = search.record(got)
        if on_probe is not None:
            on_probe(probe)
    return search.result()
