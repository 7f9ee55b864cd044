"""What runs on the emulated devices: operator graphs and their cost model (`graph`),
distributed training jobs and their ranks (`jobs`, `job_ranks`, `training`), and the traces
a workload's run records (`tracing`)."""
