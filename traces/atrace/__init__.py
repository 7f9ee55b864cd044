"""Atrace: the Django-free trace engine of Asicmon.

Read a trace (Chrome JSON, PyTorch profiler / Kineto JSON, Chakra JSON or protobuf, plain
or gzipped), analyse it (operator breakdown, critical path, correlation, flame and timeline
views, comparison of two traces) and write it back out (Chrome JSON, Chakra JSON or .et).
Read a trace (Chrome JSON, PyTorch profiler / Kineto JSON, Chakra JSON, plain or gzipped),
analyse it (operator breakdown, communication, critical path, correlation, flame and
timeline views, comparison of two traces) and write it back out (Chrome JSON, Chakra JSON).
See docs/atrace.md.
"""

from .breakdown import Breakdown, operator_breakdown
from .builder import TraceBuilder
from .chakra import read_chakra
from .chakra_et import chakra_et_bytes, read_chakra_et, write_chakra, write_chakra_et
from .communication import communication
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
from .host_et import link_host_et
from .jobs import read_job
from .kinds import WORK_CLASSES, collective, runtime_name, work_class
from .model import EdgeKind, Kind, Trace, Track
from .multirank import Job, analyse_job, cross_rank_critical_path
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
    "Job",
    "Kind",
    "Timeline",
    "Trace",
    "TraceBuilder",
    "TraceError",
    "TraceFormatError",
    "TraceGraphError",
    "TraceTooLargeError",
    "Track",
    "analyse_job",
    "chakra_et_bytes",
    "WORK_CLASSES",
    "chrome_trace_bytes",
    "collective",
    "communication",
    "compare",
    "correlate",
    "critical_path",
    "cross_rank_critical_path",
    "flame",
    "link_host_et",
    "operator_breakdown",
    "read_chakra",
    "read_chakra_et",
    "read_job",
    "read_trace",
    "runtime_name",
    "step_window",
    "steps",
    "timeline",
    "work_class",
    "write_chakra",
    "write_chakra_et",
    "write_chrome_trace",
]
