"""The benchmarks' harness (benchmarks/harness/): its statistics, timers, report and worker
runner, and the rule it stands for: every benchmark imports it, none imports another."""

import ast
import io
import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path

from benchmarks import harness

ROOT = Path(__file__).resolve().parents[2]
BENCHMARKS = sorted((ROOT / "benchmarks").glob("bench_*.py"))


def _imported(path: Path) -> set[str]:
    """The top-level names of the modules a file imports (anywhere in it)."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module)
    return names


def test_the_nearest_rank_percentile_is_a_value_of_the_list():
    values = [50, 15, 40, 35, 20]  # sorted: 15 20 35 40 50
    assert harness.percentile(values, 5) == 15
    assert harness.percentile(values, 30) == 20
    assert harness.percentile(values, 40) == 20
    assert harness.percentile(values, 50) == 35
    assert harness.percentile(values, 100) == 50
    assert harness.percentile(values, 0) == 15


def test_the_95th_percentile_of_a_hundred_values_is_the_95th_smallest():
    values = list(range(100, 0, -1))  # 1..100, reversed
    assert harness.percentile(values, 95) == 95
    assert harness.percentiles(values, (50, 99)) == {50: 50, 99: 99}


def test_no_values_give_no_percentile_and_no_median():
    assert math.isnan(harness.percentile([], 50))
    assert math.isnan(harness.median([]))


def test_the_median_of_an_even_count_is_the_mean_of_the_middle_two():
    assert harness.median([4, 1, 3, 2]) == 2.5


def test_a_summary_reads_median_and_percentiles_in_milliseconds():
    seconds = [i / 1000 for i in range(1, 21)]  # 1..20 ms
    assert harness.summary(seconds, (95,), spec=".1f") == "median 10.5 ms, p95 19.0 ms"


def test_timed_runs_the_work_once_a_repeat_and_keeps_each_run():
    calls = []
    timing = harness.timed(lambda: calls.append(len(calls)) or len(calls), 4, warmup=2, cold=True)
    assert len(calls) == 1 + 2 + 4
    assert timing.runs == 4 and len(timing.cpu) == 4
    assert timing.cold is not None and timing.cold >= 0
    assert timing.value == 7  # what the last run returned
    assert timing.best <= timing.median <= max(timing.wall)


def test_a_stopwatch_counts_waiting_as_wall_time_but_not_as_cpu_time():
    with harness.Stopwatch() as watch:
        time.sleep(0.05)
    assert watch.wall >= 0.05
    assert watch.cpu < 0.04


def test_the_machine_line_names_the_cpus_and_the_load_average():
    line = harness.machine_line()
    assert line.startswith(f"{os.cpu_count()} CPUs, load average ")
    assert len(harness.load_average().split()) == 3


def test_this_process_has_used_cpu_time_and_memory():
    assert harness.cpu_seconds() > 0
    assert harness.cpu_seconds(os.getpid()) > 0
    assert harness.peak_rss_mb(os.getpid()) > 1
    assert harness.peak_rss_mb() > 1


def test_a_report_prints_its_title_machine_and_figures_and_keeps_them():
    out = io.StringIO()
    report = harness.Report("Probe cost", stream=out)
    assert report.figure("refresh median", 41.25, "us", note="target <= 50 us") == 41.25
    report.line("a line as it is")
    printed = out.getvalue().splitlines()
    assert printed[0] == "Probe cost"
    assert "CPUs, load average" in printed[1]
    assert printed[2] == "  refresh median: 41.250 us  (target <= 50 us)"
    assert printed[3] == "a line as it is"
    assert report.as_dict()["figures"]["refresh median"] == {
        "value": 41.25,
        "unit": "us",
        "note": "target <= 50 us",
    }


def test_a_report_table_aligns_text_left_and_numbers_right():
    out = io.StringIO()
    report = harness.Report("", machine=False, stream=out)
    report.table(["type", "devices"], [["gpu", 8], ["inference", 12000]])
    assert out.getvalue().splitlines() == [
        "  type       devices",
        "  ------------------",
        "  gpu              8",
        "  inference   12,000",
    ]


def test_a_report_written_as_json_reads_back(tmp_path):
    report = harness.Report("Chakra export", machine=False, stream=io.StringIO())
    report.figure("nodes", 10_000)
    path = report.write_json(tmp_path / "chakra.json", extra=[{"size": 1}])
    body = json.loads(path.read_text())
    assert body["title"] == "Chakra export"
    assert body["figures"]["nodes"]["value"] == 10_000
    assert body["data"] == [{"size": 1}]


def test_a_worker_s_last_json_line_is_its_answer_and_a_failure_an_error():
    said = harness.run_json(
        [sys.executable, "-c", "print('warming'); print('{\"a\": 1}'); print('{\"a\": 2}')"]
    )
    assert said == {"a": 2}
    failed = harness.run_json([sys.executable, "-c", "import sys; sys.exit('broken input')"])
    assert failed == {"error": "broken input"}


def test_importing_the_harness_loads_no_django():
    code = "import sys; from benchmarks import harness; print('django' in sys.modules, str(harness.ROOT) in sys.path)"
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert done.stdout.split() == ["False", "True"]


def test_every_benchmark_imports_the_harness():
    assert len(BENCHMARKS) > 30
    missing = [p.name for p in BENCHMARKS if "harness" not in _imported(p)]
    assert not missing, f"benchmarks that do not use benchmarks/harness: {missing}"


def test_no_benchmark_imports_another_one():
    names = {p.stem for p in BENCHMARKS}
    crossing = {
        p.name: sorted(n for n in _imported(p) if n.removeprefix("benchmarks.") in names)
        for p in BENCHMARKS
    }
    assert not {k: v for k, v in crossing.items() if v}, (
        "what two benchmarks share goes in the harness"
    )
