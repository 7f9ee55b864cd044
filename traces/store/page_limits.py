"""The trace page's presentation limits: how much of each view is stored and drawn.

The Atrace engine holds no limits of its own; the worker passes :data:`STORED` when it
computes a trace's page data, and a timeline request is windowed within the limits below.
Django-free, so the benchmarks measure with the same limits.
"""

from traces.atrace.render.page_data import PageLimits

#: What the worker stores of each view, once per trace.
STORED = PageLimits(
    flame_nodes=5000,
    path_rows=200,
    least_slack=20,
    steps=64,
    step_events=250_000,
    correlation_bins=200,
    launched_by=20,
)

#: A timeline window: the widest view drawn, and at most this many bars and path edges.
MAX_WIDTH_PX = 20_000
MAX_BARS = 5000
MAX_EDGES = 2000
