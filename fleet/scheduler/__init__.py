"""The fleet's schedulers: what Asicmon tells the workload manager when it takes devices out
of service, and what it reads back (which job runs on which GPUs). Slurm is built
(fleet/scheduler/slurm.py); Kubernetes is designed (docs/schedulers.md)."""
