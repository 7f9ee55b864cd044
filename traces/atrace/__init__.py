"""Atrace: the Django-free trace engine of Asicmon.

Read a trace (Chrome JSON, PyTorch profiler / Kineto JSON, Chakra JSON or protobuf, plain
or gzipped), analyse it (operator breakdown, communication, critical path, correlation,
comparison of two traces, distributed jobs, advice: what to fix and what it would save),
lay it out for display (flame, timeline) and write it back out (Chrome JSON, Chakra JSON or .et). Its subpackages: ``io`` (readers and
writers), ``model`` (the trace model), ``analysis`` and ``render``. See docs/atrace.md.
"""

from .analysis.advice import AdviceLimits, Finding, Findings, advise, advise_job
from .analysis.breakdown import Breakdown, operator_breakdown
from .analysis.communication import communication
from .analysis.comparison import Comparison, compare_traces
from .analysis.correlation import Correlation, correlate
from .analysis.multirank import Job, analyse_job, cross_rank_critical_path
from .analysis.paths.critical_path import CriticalPath, critical_path, step_window, steps
from .errors import (
    EmptyTraceError,
    TraceError,
    TraceFormatError,
    TraceGraphError,
    TraceTooLargeError,
)
from .io.chakra.et import chakra_et_bytes, read_chakra_et, write_chakra, write_chakra_et
from .io.chakra.json_reader import read_chakra
from .io.chrome.writer import chrome_trace_bytes, write_chrome_trace
from .io.host_et import link_host_et
from .io.jobs import read_job
from .io.reader import read_trace
from .model.builder import TraceBuilder
from .model.kinds import WORK_CLASSES, collective, runtime_name, work_class
from .model.trace import EdgeKind, Kind, Trace, Track
from .render.flame import Flame, flame
from .render.timeline import Timeline, timeline

__all__ = [
    "AdviceLimits",
    "Breakdown",
    "Comparison",
    "Correlation",
    "CriticalPath",
    "EdgeKind",
    "EmptyTraceError",
    "Finding",
    "Findings",
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
    "WORK_CLASSES",
    "advise",
    "advise_job",
    "analyse_job",
    "chakra_et_bytes",
    "chrome_trace_bytes",
    "collective",
    "communication",
    "compare_traces",
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
