"""The fleet's schedulers: what Asicmon tells the workload manager when it takes devices out
of service, and what it reads back (which job runs on which GPUs).

Owns the Slurm adapter (slurm: Django-free, through scontrol and squeue) and keeping the
scheduler in step with the fleet (sync). Kubernetes is designed in docs/schedulers.md.

May import: fleet.
(a bare app name, e.g. ``fleet``, means its top-level modules; tests/test_layers.py checks this list)
"""
