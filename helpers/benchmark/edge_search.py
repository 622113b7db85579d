"""The capacity search as a pure state machine: bracket the SLA edge, re-probe what contradicts it, then probe the edge.

Every probe runs on a named *stream*: an arrival schedule (unit-rate Poisson gaps, scaled to the load)
and a prompt set, both seeded by the stream's name alone. Every configuration of a run gets the same
stream for its k-th coarse probe (``p<k>``) and for each probe of its r-th edge round (``e<r>-lo`` and
``e<r>-hi``), so two configurations compared see the same traffic (common random numbers) and their
edge readings pair up (``helpers.benchmark.boundary.compare_capacities``).

1. **Coarse.** From ``start``, loads grow by ``growth`` until one fails, or shrink until one passes; then
   the bracket (highest load the monotone fit passes, lowest it fails) is halved geometrically until it is
   within ``tolerance``. A probe whose verdict contradicts the monotone trend of the others (it fails below
   a pass, or passes above a failure) is measured once more on a fresh stream, not believed alone.
2. **Edge rounds.** Each round probes two loads straddling the current estimate (``× (1 ± edge_step)``;
   the two whole numbers around it on the concurrency axis; without a fitted estimate, in a bracket so narrow
   that ± edge_step would land on its ends, the bracket's thirds), at least ``edge_rounds_min`` rounds and at
   most ``edge_rounds_max``, stopping once the estimate's 95% interval is within ``target_rel``.

The capacity and its interval come from every valid probe (``boundary.estimate_capacity``); the grid's
closed-loop points are readings too on the concurrency axis (``extra``). A search that cannot bracket the
edge says so and reports the bound it has.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, NamedTuple

from helpers.benchmark.boundary import Reading, estimate_capacity, readings_of
from helpers.benchmark.probe import Axis, Measurement, Probe, SlaLimits, judge
from helpers.core.config import SLA
from helpers.run.records import CapacityEstimate

# The names of a search's streams, written by the two functions below and read back by the two patterns.
_COARSE_STREAM = re.compile(r"p\d+")
_EDGE_STREAM = re.compile(r"e(\d+)-(lo|hi)")


def coarse_stream(n: int) -> str:
    """The stream of the search's ``n``-th non-edge ask (coarse, re-probe or retry): ``p<n>``."""
    return f"p{n}"


def edge_stream(round_: int, side: str) -> str:
    """The stream of edge round ``round_``'s probe below (``lo``) or above (``hi``) the estimate: ``e<r>-<side>``."""
    return f"e{round_}-{side}"


def is_coarse_stream(stream: object) -> bool:
    """Whether a probe's stream is one of the search's non-edge asks (``coarse_stream``): ``max_probes`` counts them."""
    return isinstance(stream, str) and _COARSE_STREAM.fullmatch(stream) is not None


def edge_rounds_done(streams: Iterable[object]) -> int:
    """How many edge rounds (``edge_stream(r, "lo")`` and ``edge_stream(r, "hi")``, both measured) the streams hold."""
    sides: dict[str, set[str]] = {}
    for stream in streams:
        m = _EDGE_STREAM.fullmatch(stream) if isinstance(stream, str) else None
        if m:
            sides.setdefault(m.group(1), set()).add(m.group(2))
    return sum(1 for found in sides.values() if found == {"lo", "hi"})


class Ask(NamedTuple):
    """The next load to measure, on which stream, and why."""

    load: float
    stream: str
    purpose: str  # "coarse", "re-probe", "retry" (the client sent late) or "edge"


def _fmt(load: float, axis: Axis) -> str:
    if axis == "concurrency":
        return f"{load:,.0f} streams"
    return f"{load:,.0f} req/s" if load >= 100 else f"{load:.3g} req/s"


class EdgeSearch:
    """Ask ``next()``, measure it on its stream, ``record()`` the measurement; ``estimate()`` at any time.

    ``reuse`` maps a stream to a probe measured earlier on it (an interrupted run): an ask whose stream and
    load match is answered from it (``take_reused``). ``extra``: readings that are not this search's probes
    (the grid's closed-loop points on the concurrency axis).
    """

    def __init__(
        self,
        start: float,
        limits: SlaLimits | SLA,
        *,
        axis: Axis = "rate",
        growth: float = 2.0,
        tolerance: float = 0.05,
        max_probes: int = 10,
        max_load: float | None = None,
        min_load: float | None = None,
        min_sustained_ratio: float = 0.95,
        max_client_lag_ms: float | None = 100.0,
        retries: int = 1,
        edge_rounds_min: int = 2,
        edge_rounds_max: int = 4,
        edge_step: float | None = None,
        target_rel: float = 0.05,
        reuse: Mapping[str, Probe] | None = None,
        extra: Sequence[Reading] = (),
    ):
        if start <= 0 or growth <= 1 or tolerance <= 0 or max_probes < 1:
            raise ValueError("need start > 0, growth > 1, tolerance > 0 and max_probes >= 1")
        if edge_rounds_max < edge_rounds_min or edge_rounds_min < 0:
            raise ValueError(f"need 0 <= edge_rounds_min <= edge_rounds_max (got {edge_rounds_min}, {edge_rounds_max})")
        self.axis, self.growth, self.tolerance = axis, growth, tolerance
        self.max_probes, self.retries = max_probes, retries
        self.limits, self.ratio, self.max_lag = limits, min_sustained_ratio, max_client_lag_ms
        self.max_load = max_load
        self.min_load = min_load if min_load is not None else start / growth**2
        self.rounds_min, self.rounds_max, self.target_rel = edge_rounds_min, edge_rounds_max, target_rel
        self.step = edge_step if edge_step is not None else tolerance
        self.reuse = dict(reuse or {})
        self.extra = list(extra)
        self.probes: list[Probe] = []
        self.coarse_asked = 0
        self.rounds_done = 0
        self.reprobed: set[float] = set()
        self.client_limit: float | None = None  # the lowest load the client sent late even when tried again
        self._pending: list[Ask] = [Ask(self._snap(start), "p0", "coarse")]
        self._why_stop = ""
        self._done = False

    # ----------------------------------------------------------------- helpers
    def _snap(self, load: float) -> float:
        """Concurrency is a whole number of streams (at least 1); a rate stays as it is."""
        return float(max(1, round(load))) if self.axis == "concurrency" else float(load)

    def readings(self) -> list[Reading]:
        """Every valid reading: this search's probes (superseded ones left out) and the extra ones."""
        return readings_of(self.probes) + self.extra

    def estimate(self) -> CapacityEstimate:
        """The capacity from every valid reading so far, with its 95% interval."""
        return estimate_capacity(self.readings(), axis=self.axis, target_rel=self.target_rel)

    def _bracket(self) -> tuple[float | None, float | None]:
        """(highest load the monotone fit passes, lowest it fails) over the valid readings."""
        est = self.estimate()
        return est.bracket_low, est.bracket_high

    def _narrow(self, lo: float, hi: float) -> bool:
        if self.axis == "concurrency":
            return hi - lo <= 1
        return (hi - lo) / lo <= self.tolerance

    def _contradicts(self, p: Probe) -> bool:
        """Whether ``p``'s verdict goes against another valid reading (passed above a failure, failed below a pass)."""
        others = [r for r in self.readings() if not (r.stream == p.stream and r.load == p.load)]
        if p.passed:
            return any(not r.passed and r.load <= p.load for r in others)
        return any(r.passed and r.load >= p.load for r in others)

    # ----------------------------------------------------------------- the machine
    def next(self) -> Ask | None:
        """The next load and stream to measure, or None when the search is over."""
        if self._done:
            return None
        if not self._pending:
            self._plan()
        if not self._pending:
            self._done = True
            return None
        return self._pending[0]

    def take_reused(self, ask: Ask) -> Probe | None:
        """A probe measured earlier on ``ask``'s stream at its load (resume), or None: measure it."""
        got = self.reuse.get(ask.stream)
        if got is not None and math.isclose(got.load, ask.load, rel_tol=1e-6):
            del self.reuse[ask.stream]
            return got
        return None

    def record(self, m: Measurement | Probe | Mapping[str, Any]) -> Probe:
        """Judge the measurement of the ask ``next()`` gave and plan what follows."""
        if not self._pending:
            raise RuntimeError("nothing was asked to be measured")
        ask = self._pending.pop(0)
        data = m.model_dump() if isinstance(m, Measurement) else dict(m)
        fields = Measurement.model_fields
        known = {k: v for k, v in data.items() if k in fields}
        meas = Measurement.model_validate({**known, "load": ask.load, "axis": self.axis, "stream": ask.stream})
        probe = judge(meas, self.limits, self.ratio, self.max_lag)
        self.probes.append(probe)
        if ask.purpose != "edge":
            self.coarse_asked += 1
        if not probe.delivered and sum(p.load == ask.load for p in self.probes) <= self.retries:
            self._pending.insert(0, Ask(ask.load, self._coarse_stream(), "retry"))
        elif not probe.delivered:  # the client cannot drive this load: nothing is claimed at or above it
            self.client_limit = min(self.client_limit or ask.load, ask.load)
            self._pending = [a for a in self._pending if a.load < self.client_limit]
        elif ask.purpose == "coarse" and ask.load not in self.reprobed and self._contradicts(probe):
            self.reprobed.add(ask.load)
            self._pending.insert(0, Ask(ask.load, self._coarse_stream(), "re-probe"))
        if ask.purpose == "edge" and not [a for a in self._pending if a.purpose == "edge"]:
            self.rounds_done += 1
        return probe

    def _coarse_stream(self) -> str:
        return coarse_stream(self.coarse_asked)

    def _plan(self) -> None:
        """Decide the next asks: a coarse load while the bracket is wide, else an edge round, else stop."""
        lo, hi = self._bracket()
        tried = [p.load for p in self.probes if p.delivered]
        if not tried:  # every probe so far was sent late by the client: nothing to go on
            self._why_stop = "the client could not deliver the load"
            return
        coarse_left = self.coarse_asked < self.max_probes
        if hi is None:  # every load passed: grow
            top = max(tried)
            if self.client_limit is not None and top * (1 + self.tolerance) >= self.client_limit:
                self._why_stop = f"the client could not send {_fmt(self.client_limit, self.axis)} on schedule"
            elif self.max_load is not None and top >= self.max_load:
                self._why_stop = f"max_load {_fmt(self.max_load, self.axis)} reached"
            elif coarse_left:
                nxt = max(top + 1, top * self.growth) if self.axis == "concurrency" else top * self.growth
                nxt = nxt if self.max_load is None else min(nxt, self.max_load)
                if self.client_limit is not None:
                    nxt = min(nxt, math.sqrt(top * self.client_limit))
                self._pending.append(Ask(self._snap(nxt), self._coarse_stream(), "coarse"))
            else:
                self._why_stop = f"probe budget ({self.max_probes}) spent before a load failed"
            return
        if lo is None:  # every load failed: shrink
            bottom = min(tried)
            nxt = self._snap(bottom / self.growth)
            nxt = min(nxt, bottom - 1) if self.axis == "concurrency" else nxt
            if nxt < max(self.min_load, 1 if self.axis == "concurrency" else 0) or nxt >= bottom:
                self._why_stop = f"min_load {_fmt(self.min_load, self.axis)} reached"
            elif coarse_left:
                self._pending.append(Ask(nxt, self._coarse_stream(), "coarse"))
            else:
                self._why_stop = f"probe budget ({self.max_probes}) spent before a load passed"
            return
        if not self._narrow(lo, hi) and coarse_left:
            mid = self._snap(math.sqrt(lo * hi)) if self.axis == "rate" else self._snap((lo + hi) / 2)
            if lo < mid < hi:
                self._pending.append(Ask(mid, self._coarse_stream(), "coarse"))
                return
        self._edge_round(lo, hi)

    def _edge_round(self, lo: float, hi: float) -> None:
        """Two probes straddling the estimate, or stop: enough rounds and a tight interval, or no rounds left."""
        est = self.estimate()
        if self.rounds_done >= self.rounds_max:
            self._why_stop = f"edge rounds ({self.rounds_max}) done"
            return
        if self.rounds_done >= self.rounds_min and est.conclusive:
            self._why_stop = f"interval within ±{self.target_rel:.0%}"
            return
        v = est.value if est.value is not None else math.sqrt(lo * hi)
        r = self.rounds_done
        if self.axis == "concurrency":
            below = float(max(1, math.floor(v)))
            above = below + 1
        elif est.value is None and hi / lo <= ((1 + self.step) / (1 - self.step)) ** 1.5:
            # no fitted edge (the failures above lo had no size): ± step around the bracket's middle would land
            # on its two ends, which were measured already; its thirds are the loads not yet read
            below, above = lo * (hi / lo) ** (1 / 3), lo * (hi / lo) ** (2 / 3)
        else:
            below, above = v * (1 - self.step), v * (1 + self.step)
            for cap in (self.max_load, self.client_limit):
                above = min(above, cap) if cap is not None else above
        self._pending += [Ask(below, edge_stream(r, "lo"), "edge"), Ask(above, edge_stream(r, "hi"), "edge")]

    def why_stopped(self) -> str:
        """Why the search ended (empty while it runs)."""
        return self._why_stop

    def note(self) -> str:
        """What is and is not known, in words."""
        est = self.estimate()
        if not self.probes:
            return "no load was measured"
        unit = "streams" if self.axis == "concurrency" else "req/s"
        head = est.text(unit)
        tail = f" ({self._why_stop})" if self._why_stop else ""
        return f"capacity {head}{tail}"
