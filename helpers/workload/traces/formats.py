"""The trace-format registry: every reader, listed explicitly, and the functions that pick and run one."""

from __future__ import annotations

from pathlib import Path

from helpers.core.errors import TraceError
from helpers.core.registry import Registry
from helpers.workload.traces.base import Trace, TraceReader, check_readable, head_lines
from helpers.workload.traces.csv_trace import CsvTraceReader
from helpers.workload.traces.mooncake import MooncakeReader
from helpers.workload.traces.openai_log import OpenAILogReader


def _build() -> Registry[TraceReader]:
    formats: Registry[TraceReader] = Registry("trace format")
    for reader in (CsvTraceReader(), MooncakeReader(), OpenAILogReader()):
        formats.add(reader.name, reader)
        reader.claimed_by = lambda line, own=reader.name: foreign_format(line, own)
    return formats


def foreign_format(line: str, own: str) -> str | None:
    """Return the name of another registered format that claims ``line``, if any."""
    for name, reader in TRACE_FORMATS.items():
        if name != own and reader.claims_line(line):
            return name
    return None


def detect_format(path: str | Path) -> str:
    """Name of the registered format whose ``sniff`` accepts the start of ``path``."""
    p = Path(path)
    check_readable(p)
    lines = head_lines(p)
    if not lines:  # bytes.strip() kept what str.strip() drops (e.g. \x1c), or only part of a BOM
        raise TraceError(f"{p}: trace file has no text lines")
    for name, reader in TRACE_FORMATS.items():
        if reader.sniff(lines):
            return name
    raise TraceError(
        f"{p}: unknown trace format (first line: {lines[0][:80]!r}); name one of: {', '.join(TRACE_FORMATS.names())}"
    )


def load_trace(
    path: str | Path, fmt: str | None = None, *, model_dir: str | Path | None = None, block_size: int = 16
) -> Trace:
    """Read a trace file in format ``fmt`` (detected when None).

    ``model_dir`` is a model folder whose ``tokenizer.json`` counts tokens of text-only requests;
    ``block_size`` is the KV-cache block size used where the reader hashes prompt tokens itself.
    """
    p = Path(path)
    check_readable(p)
    readers = TRACE_FORMATS
    name = fmt or detect_format(p)
    if name not in readers:
        raise TraceError(f"{p}: unknown trace format {name!r}; allowed: {', '.join(sorted(readers))}")
    return readers[name].read(p, model_dir=Path(model_dir) if model_dir else None, block_size=block_size)


def trace_formats() -> Registry[TraceReader]:
    """All trace readers by name."""
    return TRACE_FORMATS


TRACE_FORMATS: Registry[TraceReader] = _build()
