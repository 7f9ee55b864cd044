"""Analyses of a trace: operator breakdown, communication, correlation of host and device,
critical path and its tables, comparison of two traces, distributed jobs, software versions."""
