"""Real PyTorch processes captured through their hosts' agents (Kineto's daemon protocol,
fleet/agent/kineto.py).

Owns the asking (requests: which process, refusals, the trace row queued to the agent), the
capture on the agent (capture: the configuration handed over, the stages said, the file
stored) and a real job captured by its run id across hosts (jobs: its ranks started
together, then the job analysis of traces.jobs).

May import: fleet, fleet.agent, traces, traces.jobs, traces.store.
(a bare app name, e.g. ``fleet``, means its top-level modules; tests/test_layers.py checks this list)
"""
