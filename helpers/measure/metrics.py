"""Server-side metrics: scrape an engine's Prometheus page during a point and normalise it.

Pages are parsed with ``prometheus_client``'s parser. Each adapter names its series
(``MetricNames``); the prefix-cache hit rate is the ratio of counter deltas over the point
(hits ÷ queries), which works for vLLM's and SGLang's counters alike, and falls back to a
hit-rate gauge only where an engine has no counters.

TensorRT-LLM 1.2.1 puts its KV-cache and scheduler figures not on its Prometheus page but in the
JSON iteration statistics that ``trtllm-serve`` returns at ``/metrics`` (``parse_trtllm_iterations``;
the adapter's ``sample_*`` attributes select it). Page formats are registered in ``PAGE_FORMATS``.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import httpx
from prometheus_client.parser import text_string_to_metric_families

from helpers.core.registry import Registry
from helpers.engines.base import MetricNames
from helpers.run.records import ServerStats


class MetricsParseError(ValueError):
    """A ``/metrics`` page that is not valid Prometheus text."""


def parse_page(text: str) -> dict[str, float]:
    """Sum every sample of a page by series name (labels summed over), e.g. per cache source."""
    out: dict[str, float] = {}
    try:
        for family in text_string_to_metric_families(text):
            for s in family.samples:
                out[s.name] = out.get(s.name, 0.0) + float(s.value)
    except (ValueError, TypeError, IndexError) as err:
        raise MetricsParseError(f"malformed metrics page: {err}") from None
    return out


def parse_trtllm_iterations(text: str) -> dict[str, float]:
    """TensorRT-LLM's JSON iteration statistics (``trtllm-serve`` ``/metrics``), flattened.

    The page is a list of per-iteration records gathered since the previous request (empty while
    the engine is idle); the latest record counts. Nested records become dotted names
    (``kvCacheStats.usedNumBlocks``). Two names are derived: ``kvCacheStats.usedFraction`` (used ÷
    max blocks) and ``kvCacheStats.lookedUpBlocks`` (reused + missed blocks, the hit rate's
    denominator; both are totals since start, so their deltas over a point give its hit rate).
    """
    try:
        data = json.loads(text)
    except ValueError as err:
        raise MetricsParseError(f"malformed metrics page: not JSON ({err})") from None
    records = [data] if isinstance(data, dict) else data
    if not isinstance(records, list) or not all(isinstance(r, dict) for r in records):
        raise MetricsParseError("malformed metrics page: expected a JSON list of iteration records")
    if not records:
        return {}
    out: dict[str, float] = {}
    for key, value in records[-1].items():
        items = value.items() if isinstance(value, dict) else [(None, value)]
        for sub, v in items:
            if isinstance(v, int | float) and not isinstance(v, bool):
                out[f"{key}.{sub}" if sub else key] = float(v)
    used, total = out.get("kvCacheStats.usedNumBlocks"), out.get("kvCacheStats.maxNumBlocks")
    if used is not None and total:
        out["kvCacheStats.usedFraction"] = used / total
    reused, missed = out.get("kvCacheStats.reusedBlocks"), out.get("kvCacheStats.missedBlocks")
    if reused is not None and missed is not None:
        out["kvCacheStats.lookedUpBlocks"] = reused + missed
    return out


PageParser = Callable[[str], dict[str, float]]
PAGE_FORMATS: Registry[PageParser] = Registry("metrics page format")
PAGE_FORMATS.add("prometheus", parse_page)
PAGE_FORMATS.add("trtllm-iterations", parse_trtllm_iterations)


@dataclass
class Snapshot:
    """One scrape, reduced to the normalised quantities."""

    t: float
    hits: float | None
    queries: float | None
    hit_rate_gauge: float | None
    kv_usage: float | None
    waiting: float | None
    running: float | None
    spec: dict[str, float] = field(default_factory=dict)  # speculative-decoding series found on the page


def snapshot(values: dict[str, float], names: MetricNames, t: float | None = None) -> Snapshot:
    """Pick the adapter's series out of a parsed page.

    A labelled counter is only exported once it has been incremented: SGLang 0.5.16's
    ``sglang:cached_tokens_total`` is absent from a fresh engine's page until the first cached
    token (seen on the H200). Where the page has the queries counter but not the hits counter, the
    hits are therefore 0, not unknown; otherwise a point that starts on a fresh engine would lose
    its first snapshot and its hit rate.
    """

    def get(name: str | None) -> float | None:
        return values.get(name) if name else None

    queries = get(names.prefix_queries)
    hits = get(names.prefix_hits)
    if hits is None and queries is not None and names.prefix_hits:
        hits = 0.0
    return Snapshot(
        t=time.monotonic() if t is None else t,
        hits=hits,
        queries=queries,
        hit_rate_gauge=get(names.hit_rate_gauge),
        kv_usage=get(names.kv_usage),
        waiting=get(names.waiting),
        running=get(names.running),
        spec={n: values[n] for n in _spec_names(names) if n in values},
    )


def _spec_names(names: MetricNames) -> list[str]:
    """The adapter's speculative-decoding series (counters and gauges) that it names."""
    found = (names.spec_accepted, names.spec_drafted, names.spec_drafts, names.spec_accept_rate_gauge,
             names.spec_accept_length_gauge)  # fmt: skip
    return [n for n in found if n]


def _max_mean(xs: list[float]) -> tuple[float | None, float | None]:
    return (max(xs), sum(xs) / len(xs)) if xs else (None, None)


def summarize(snaps: list[Snapshot], error: str | None = None) -> ServerStats:
    """Normalised server statistics over a point from its first and last scrapes that had the series."""
    if not snaps:
        return ServerStats(error=error or "no metrics scraped")
    counted = [s for s in snaps if s.hits is not None and s.queries is not None]
    gauges = [s.hit_rate_gauge for s in snaps if s.hit_rate_gauge is not None]
    rate = None
    if len(counted) >= 2:
        first, last = counted[0], counted[-1]
        dq = last.queries - first.queries
        rate = (last.hits - first.hits) / dq if dq > 0 else None
    elif not counted and gauges:
        rate = gauges[-1]
    kv = [s.kv_usage for s in snaps if s.kv_usage is not None]
    wq = [s.waiting for s in snaps if s.waiting is not None]
    rn = [s.running for s in snaps if s.running is not None]
    kv_max, kv_mean = _max_mean(kv)
    q_max, q_mean = _max_mean(wq)
    r_max, r_mean = _max_mean(rn)
    return ServerStats(
        prefix_cache_hit_rate=rate,
        kv_cache_usage_max=kv_max,
        kv_cache_usage_mean=kv_mean,
        queue_max=q_max,
        queue_mean=q_mean,
        running_max=r_max,
        running_mean=r_mean,
        samples=len(snaps),
        error=error,
    )


@dataclass
class MetricsSampler:
    """Scrapes ``url`` every ``interval_s`` in a background thread between ``start`` and ``stop``."""

    url: str
    names: MetricNames
    interval_s: float = 1.0
    parse: PageParser = parse_page
    headers: dict[str, str] = field(default_factory=dict, repr=False)
    snaps: list[Snapshot] = field(default_factory=list)
    error: str | None = None
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def scrape_once(self) -> None:
        """One scrape; failures are remembered (the first one) and do not stop sampling."""
        try:
            r = httpx.get(self.url, headers=self.headers, timeout=5.0)
            r.raise_for_status()
            self.snaps.append(snapshot(self.parse(r.text), self.names))
        except (httpx.HTTPError, MetricsParseError) as err:
            if self.error is None:
                self.error = f"{self.url}: {err}"

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            self.scrape_once()

    def start(self) -> MetricsSampler:
        """Take a first scrape and keep sampling in the background."""
        self.scrape_once()
        self._thread = threading.Thread(target=self._loop, name="metrics-sampler", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> ServerStats:
        """Take a last scrape, stop the thread and summarise."""
        self._stop.set()
        if self._thread:
            self._thread.join(timeout=10)
        self.scrape_once()
        return summarize(self.snaps, self.error)
