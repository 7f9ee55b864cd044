"""The advisor against Holistic Trace Analysis (HTA) on every shared real trace.

    python benchmarks/bench_advise_hta.py [--json OUT]

For each Kineto trace of ASICMON_REAL_TRACES (by default ../shared/data/real-traces), side by
side: HTA's temporal breakdown (the device's idle, compute and non-compute shares, from its
first to its last kernel) and its idle-time breakdown (host wait, kernel wait, other), run in
their own virtualenv (benchmarks/.venv-hta, made as bench_atrace.py makes it); and the
advisor's verdict, its top finding and its account of the analysed steps (the device's busy
share, the share where it idles while the host waits for it, the share with nothing recorded
on the host). HTA's bound is "device" when its compute share is at least half of its window,
"host" when idle time (mostly "host wait") is; the last column says whether the two agree.
docs/atrace.md ("The advisor against HTA") says, where they differ, which one the raw
events side with and why.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import tempfile
from pathlib import Path

from harness import HERE, hta_python

from tests.support.traces import REAL_TRACES  # (ASICMON_REAL_TRACES)
from traces.atrace import advise, read_trace


def kineto_files() -> list[Path]:
    return sorted(p for p in REAL_TRACES.glob("*.json.gz") if "host_et" not in p.name)


def run_hta(python: Path, path: Path) -> dict:
    with tempfile.TemporaryDirectory() as folder:
        (Path(folder) / "rank0.json.gz").symlink_to(path)
        proc = subprocess.run([str(python), str(HERE / "advise_hta_worker.py"), folder], capture_output=True,
                              text=True, timeout=900)
    lines = [x for x in proc.stdout.splitlines() if x.startswith("{")]
    return json.loads(lines[-1]) if lines else {"error": (proc.stderr.strip().splitlines() or ["failed"])[-1][:160]}


def hta_bound(h: dict) -> str:
    t = h.get("temporal")
    if not t:
        return "no device"
    if t["compute_time_pctg"] >= 50:
        return "device"
    return "host" if t["idle_time_pctg"] >= 50 else "mixed"


def ours(path: Path) -> dict:
    found = advise(read_trace(path))
    parts = {p["part"]: p["share"] for p in found.account.get("parts", [])}
    return {"verdict": found.verdict, "top": found.findings[0].rule if found.findings else "none",
            "busy": sum(parts.get(k, 0.0) for k in ("kernels", "copies", "communication")),
            "host_wait": parts.get("host_wait", 0.0), "unrecorded": parts.get("nothing", 0.0)}


def agree(h: str, verdict: str) -> str:
    mine = {"device-bound": "device", "communication-bound": "device", "host-bound": "host",
            "input-bound": "host", "cpu-only": "no device"}.get(verdict, verdict)
    return "yes" if mine == h else "no"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", type=Path, help="also write the rows to this file")
    args = parser.parse_args()
    python = hta_python()
    head = (f"{'trace':26} {'HTA idle':>8} {'compute':>8} {'host wait':>9} {'HTA bound':>9} | {'advisor':14} "
            f"{'top finding':16} {'busy':>5} {'waits':>5} {'unrec.':>6} | agree")
    print(head)
    print("-" * len(head))
    rows = []
    for path in kineto_files():
        h, a = run_hta(python, path), ours(path)
        t = h.get("temporal", {})
        wait = h.get("idle", {}).get("host_wait", {}).get("share")
        bound = hta_bound(h)
        row = {"trace": path.name.split(".")[0], "hta": h, "hta_bound": bound, "advisor": a,
               "agree": agree(bound, a["verdict"])}
        rows.append(row)
        print(f"{row['trace']:26} {_pct(t.get('idle_time_pctg'), 100):>8} {_pct(t.get('compute_time_pctg'), 100):>8} "
              f"{_pct(wait):>9} {bound:>9} | {a['verdict']:14} {a['top']:16} {_pct(a['busy']):>5} "
              f"{_pct(a['host_wait']):>5} {_pct(a['unrecorded']):>6} | {row['agree']}", flush=True)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))


def _pct(x, scale: float = 1.0) -> str:
    return "-" if x is None else f"{x / scale:.0%}"


if __name__ == "__main__":
    main()
