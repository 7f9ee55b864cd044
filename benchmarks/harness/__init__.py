"""The benchmarks' harness: what every benchmark shares, so that each keeps only what it
measures. A benchmark runs as a script (``python benchmarks/bench_x.py``) and starts with::

    from harness import Report, timed, percentile, ...

which also puts the repository on ``sys.path`` (the project's packages and tests.support
import after it). The parts:

* numbers: `percentile`, `percentiles`, `median`, `summary`, `timed` (a `Timing` of repeated
  runs), `Stopwatch`, `rate`;
* machine: `ROOT`, `OUT` (benchmarks/out), `BIN`, `machine_line`, `load_average`,
  `cpu_seconds`, `peak_rss_mb`, `reset_peak`;
* report: `Report` (title, machine line, lines, figures, tables; JSON out), `render_table`;
* processes (no Django): `run_json`, `free_port`, `start_redis`, `start_celery`, `stop_all`,
  `start_moto`, `CREDENTIALS`, `hta_python`, `VictoriaMetrics`;
* stack (Django, imported lazily): `django_env`, `throwaway_database`, `database_url`,
  `wipe_redis`, `trace_worker`, `start_web`, `signed_in_cookie`, `wait_for`,
  `real_snapshots`, `source_snapshots`, `fleet_keys`;
* clients: `FleetSocket` (a fleet page's websocket), `send_plain`, `send_chunked` (trace
  uploads), `BUSY`, `PHASES`.

No benchmark imports another: what two share lives here.
"""

import sys

from .machine import (
    BIN,
    HERE,
    OUT,
    ROOT,
    cpu_seconds,
    load_average,
    machine_line,
    peak_rss_mb,
    reset_peak,
)

if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from . import clients  # noqa: E402
from .clients import BUSY, PHASES, FleetSocket, send_chunked, send_plain  # noqa: E402
from .numbers import Stopwatch, Timing, median, percentile, percentiles, rate, summary, timed  # noqa: E402
from .processes import (  # noqa: E402
    CREDENTIALS,
    VictoriaMetrics,
    free_port,
    hta_python,
    run_json,
    start_celery,
    start_moto,
    start_redis,
    stop_all,
)
from .report import Report, render_table  # noqa: E402
from .stack import (  # noqa: E402
    INTERVAL,
    database_url,
    django_env,
    fleet_keys,
    real_snapshots,
    seeded_superuser,
    signed_in_cookie,
    source_snapshots,
    start_web,
    throwaway_database,
    trace_env,
    trace_worker,
    wait_for,
    wipe_redis,
)

__all__ = [
    "BIN",
    "BUSY",
    "CREDENTIALS",
    "HERE",
    "INTERVAL",
    "OUT",
    "PHASES",
    "ROOT",
    "FleetSocket",
    "Report",
    "Stopwatch",
    "Timing",
    "VictoriaMetrics",
    "clients",
    "cpu_seconds",
    "database_url",
    "django_env",
    "fleet_keys",
    "free_port",
    "hta_python",
    "load_average",
    "machine_line",
    "median",
    "peak_rss_mb",
    "percentile",
    "percentiles",
    "real_snapshots",
    "seeded_superuser",
    "render_table",
    "rate",
    "reset_peak",
    "run_json",
    "send_chunked",
    "send_plain",
    "signed_in_cookie",
    "source_snapshots",
    "start_celery",
    "start_moto",
    "start_redis",
    "start_web",
    "stop_all",
    "summary",
    "throwaway_database",
    "timed",
    "trace_env",
    "trace_worker",
    "wait_for",
    "wipe_redis",
]
