"""dcgm-exporter import figure: the worker time of one poll cycle over many exporter
endpoints (issue 39: 1,000 GPUs behind 125 endpoints in ≤ 2 s of worker time).

    python benchmarks/bench_exporters.py [--endpoints 125] [--gpus 8] [--cycles 10]

A child process serves each endpoint's /metrics page (dcgm-exporter's default counter list,
in its exposition format, 8 GPUs a page) over real HTTP; this process joins every endpoint
by URL (`exporter_host`) and polls them all each cycle side by side, as the shard poll does
(POLL_HOST_THREADS threads), a fresh GET per endpoint per cycle. Prints the median wall and
CPU time (this process, all its threads: the worker's share; the served pages are not
counted) of a cycle, and the per-GPU cost.
"""

import argparse
import multiprocessing
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from harness import Report, Stopwatch, Timing


def page(endpoint: int, gpus: int) -> bytes:
    from tests.fleet.hosts.test_exporters import SERIES

    lines = []
    for name, kind, text, per_gpu in SERIES:
        lines += [f"# HELP {name} {text}", f"# TYPE {name} {kind}"]
        for i in range(gpus):
            labels = (f'gpu="{i}",UUID="GPU-{endpoint:08x}-0000-4000-8000-{i:012x}",'
                      f'pci_bus_id="00000000:{0x18 + i:02X}:00.0",device="nvidia{i}",'
                      f'modelName="NVIDIA H100 80GB HBM3",Hostname="node-{endpoint}",'
                      f'DCGM_FI_DRIVER_VERSION="550.54.15"')
            lines.append(f"{name}{{{labels}}} {per_gpu[i % 2]}")
    return ("\n".join(lines) + "\n").encode()


def serve(endpoints: int, gpus: int, ready) -> None:
    pages = {f"/{n}/metrics": page(n, gpus) for n in range(endpoints)}

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.0"

        def do_GET(self):  # noqa: N802 - http.server's name
            body = pages[self.path]
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.request_queue_size = 256
    ready.send(server.server_address[1])
    server.serve_forever()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--endpoints", type=int, default=125)
    parser.add_argument("--gpus", type=int, default=8)
    parser.add_argument("--cycles", type=int, default=10)
    parser.add_argument("--threads", type=int, default=32, help="POLL_HOST_THREADS")
    args = parser.parse_args()

    from fleet.hosts.exporters import exporter_host

    ours, theirs = multiprocessing.Pipe()
    server = multiprocessing.Process(target=serve, args=(args.endpoints, args.gpus, theirs), daemon=True)
    server.start()
    port = ours.recv()
    try:
        urls = [f"http://127.0.0.1:{port}/{n}/metrics" for n in range(args.endpoints)]
        with Stopwatch() as joined, ThreadPoolExecutor(args.threads) as pool:
            hosts = list(pool.map(lambda url: exporter_host(url, probe_timeout=2.0), urls))
        gpus = sum(len(h.serials) for h in hosts)
        cycles = Timing()
        with ThreadPoolExecutor(args.threads) as pool:
            for cycle in range(args.cycles):
                for host in hosts:
                    host.lib._at = -1e18  # a fresh page each cycle, as at a 5 s interval
                now = 1_700_000_000.0 + 5 * cycle
                with Stopwatch() as watch:
                    snaps = list(pool.map(lambda h: h.poll(now), hosts))  # noqa: B023 - used at once
                cycles.cpu.append(watch.cpu)
                cycles.wall.append(watch.wall)
                ok = sum(s["driver_status"] == "ok" for per_host in snaps for s in per_host.values())
                if ok != gpus:
                    raise SystemExit(f"cycle {cycle}: {ok} of {gpus} GPUs read")
        fetches = sum(h.lib.fetches for h in hosts)
    finally:
        server.terminate()
    wall, cpu = cycles.median, cycles.cpu_median
    report = Report(f"{gpus} GPUs behind {args.endpoints} endpoints, {args.cycles} cycles "
                    f"({fetches} GETs in all, one per endpoint per cycle plus the join); joined in {joined.wall:.2f} s")
    report.line(f"cycle: median wall {wall:.3f} s, median worker CPU {cpu:.3f} s "
          f"({cpu / gpus * 1e6:.0f} us per GPU); target <= 2 s: {'met' if max(wall, cpu) <= 2 else 'MISSED'}")


if __name__ == "__main__":
    main()
