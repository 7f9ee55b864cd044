"""Atrace: the Django-free trace engine of Asicmon.

Read a trace (Chrome JSON, PyTorch profiler / Kineto JSON, Chakra JSON, plain or gzipped),
analyse it (operator breakdown, critical path, correlation, flame and timeline views,
comparison of two traces) and write it back out (Chrome JSON, Chakra JSON).
See docs/atrace.md.
"""

from .breakdown import Breakdown, operator_breakdown
from .builder import TraceBuilder
from .chakra import read_chakra, write_chakra
from .compare import Comparison, compare
from .correlate import Correlation, correlate
from .critical_path import CriticalPath, critical_path, step_window, steps
from .errors import (
    EmptyTraceError,
    TraceError,
    TraceFormatError,
    TraceGraphError,
    TraceTooLargeError,
)
from .flame import Flame, Timeline, flame, timeline
from .model import EdgeKind, Kind, Trace, Track
from .readers import read_trace
from .writers import chrome_trace_bytes, write_chrome_trace

__all__ = [
    "Breakdown",
    "Comparison",
    "Correlation",
    "CriticalPath",
    "EdgeKind",
    "EmptyTraceError",
    "Flame",
    "Kind",
    "Timeline",
    "Trace",
    "TraceBuilder",
    "TraceError",
    "TraceFormatError",
    "TraceGraphError",
    "TraceTooLargeError",
    "Track",
    "chrome_trace_bytes",
    "compare",
    "correlate",
    "critical_path",
    "flame",
    "operator_breakdown",
    "read_chakra",
    "read_trace",
    "step_window",
    "steps",
    "timeline",
    "write_chakra",
    "write_chrome_trace",
]
