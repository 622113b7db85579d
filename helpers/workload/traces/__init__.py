"""Request traces (checklist step 1): the loaded ``Trace``, the reader base classes and the format registry.

``base`` holds the data class and reader interface, one module per file format holds a reader, and
``formats`` lists them (``TRACE_FORMATS``) with ``detect_format`` and ``load_trace``.
"""

from __future__ import annotations

from helpers.workload.traces.base import (
    MAX_REPORTED_LINES,
    REQUEST_COLUMNS,
    SNIFF_LINES,
    JsonLinesReader,
    Trace,
    TraceReader,
    check_readable,
    finish_trace,
    head_lines,
    reorder_blocks,
)
from helpers.workload.traces.formats import TRACE_FORMATS, detect_format, foreign_format, load_trace, trace_formats

__all__ = [
    "MAX_REPORTED_LINES", "REQUEST_COLUMNS", "SNIFF_LINES", "TRACE_FORMATS", "JsonLinesReader", "Trace",
    "TraceReader", "check_readable", "detect_format", "finish_trace", "foreign_format", "head_lines",
    "load_trace", "reorder_blocks", "trace_formats",
]  # fmt: skip
