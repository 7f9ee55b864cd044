"""Command line: ``python -m traces.atrace summary|critical-path|diff|job|advise|convert|whatif ...``."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import orjson

from .analysis.advice import Findings, advise, advise_job
from .analysis.advice.words import duration, duration_us, window
from .analysis.breakdown import operator_breakdown
from .analysis.communication import communication
from .analysis.comparison import OPERATOR_KINDS, compare_traces
from .analysis.correlation import correlate
from .analysis.kernel_model import detail_from_json, model_from_json, predict_trace
from .analysis.multirank import analyse_job, cross_rank_critical_path
from .analysis.paths.critical_path import critical_path
from .cli_requests import add_parser as add_requests_parser
from .errors import TraceError
from .io.chakra.et import write_chakra, write_chakra_et
from .io.chrome.writer import write_chrome_trace
from .io.host_et import link_host_et
from .io.jobs import read_job
from .io.reader import read_trace


def _table(rows: list[dict[str, Any]], columns: list[tuple[str, str]], width: int = 48) -> str:
    if not rows:
        return "  (none)"
    cells = [[_cell(r.get(key), width) for key, _ in columns] for r in rows]
    heads = [h for _, h in columns]
    widths = [max(len(h), *(len(c[i]) for c in cells)) for i, h in enumerate(heads)]
    numeric = [all(isinstance(r.get(k), int | float) or r.get(k) is None for r in rows) for k, _ in columns]

    def line(values: list[str]) -> str:
        return "  ".join(v.rjust(w) if num else v.ljust(w) for v, w, num in zip(values, widths, numeric))

    return "\n".join([line(heads), line(["-" * w for w in widths]), *(line(c) for c in cells)])


def _cell(value: Any, width: int) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        text = f"{value:.4f}" if abs(value) < 1 else f"{value:,.1f}"
    else:
        text = str(value)
    return text if len(text) <= width else text[: width - 1] + "…"


DEFAULT_TOP = 15

BREAKDOWN_COLUMNS = [
    ("op", "operator"), ("kind", "kind"), ("count", "count"), ("total_us", "total us"),
    ("self_us", "self us"), ("mean_us", "mean us"), ("p50_us", "p50 us"), ("p95_us", "p95 us"),
    ("max_us", "max us"), ("share", "share"),
]


def _limit(args: argparse.Namespace) -> int | None:
    """Rows per table: all in JSON unless --top was given; --top 0 means all."""
    top = args.top if args.top is not None else (None if args.json else DEFAULT_TOP)
    return top or None


def _cut(total: int, top: int | None) -> str:
    """' (top N of M; --top 0 for all)' when a table is cut, else ''."""
    return f" (top {top} of {total}; --top 0 lists all)" if top is not None and total > top else ""


def _summary(args: argparse.Namespace) -> dict[str, Any] | str:
    trace = read_trace(args.file)
    bd = operator_breakdown(trace)
    corr = correlate(trace)
    cp = critical_path(trace)
    top = _limit(args)
    result = {
        "trace": trace.summary(),
        "breakdown": bd.to_dict(top=top),
        "communication": communication(trace),
        "correlation": corr.to_dict(top=top or 1_000_000),
        "critical_path": {k: v for k, v in cp.to_dict(max_steps=0).items() if k != "steps"},
    }
    if top is None:
        result["critical_path"]["by_op"] = cp.by_op()
    if args.json:
        result["limits"] = {"top": top, "complete": top is None}
        return result
    n_host, n_dev = len(bd.rows("host")), len(bd.rows("device"))
    s = result["trace"]
    out = [
        f"{args.file}: {s['events']:,} events on {s['tracks']} tracks "
        f"({s['device_tracks']} accelerator), span {s['span_us']:,.1f} us, source {s['source']}",
        "",
        f"Host operators{_cut(n_host, top)}:",
        _table(result["breakdown"]["host"], BREAKDOWN_COLUMNS),
        "",
        f"Accelerator operators{_cut(n_dev, top)}:",
        _table(result["breakdown"]["device"], BREAKDOWN_COLUMNS),
        "",
        _communication_lines(result["communication"]),
        "",
        f"Critical path: {cp.length_ns / 1000:,.1f} us over a span of "
        f"{(cp.window[1] - cp.window[0]) / 1000:,.1f} us, {len(cp.events):,} steps; bound: "
        + ", ".join(f"{k.replace('_', ' ')} {v * 100:.1f}%" for k, v in
                    cp.to_dict(max_steps=0)["bound_shares"].items()),
        _table(cp.by_op()[:top], [("op", "operator"), ("side", "side"), ("count", "count"),
                                  ("time_us", "on path us"), ("share", "share")]),
    ]
    c = result["correlation"]
    if c["matched"]:
        lat = c["launch_latency"]
        out += ["", f"Launches: {c['matched']:,} device operators matched to their launch; "
                f"launch-to-start p50 {lat['p50_us']} us, p95 {lat['p95_us']} us, max {lat['max_us']} us"]
    if c["states"]:
        out += ["", "Time split: " + ", ".join(
            f"{k} {v['share'] * 100:.1f}%" for k, v in c["states"].items())]
    return "\n".join(out)


def _communication_lines(c: dict[str, Any]) -> str:
    split = ", ".join(f"{k} {v['share'] * 100:.1f}%" for k, v in c["split"].items())
    lines = [f"Device work {c['device_work_us']:,.1f} us: {split}"]
    if c["overlap"]["share"] is not None:
        lines.append(f"Communication overlapped by computation: {c['overlap']['share'] * 100:.1f}%")
    if c["collectives"]:
        lines.append(_table(c["collectives"], [("collective", "collective"), ("count", "count"),
                                               ("time_us", "time us"), ("bytes", "bytes"),
                                               ("algbw_gb_s", "algbw GB/s")]))
    return "\n".join(lines)


def _critical_path(args: argparse.Namespace) -> dict[str, Any] | str:
    trace = read_trace(args.file)
    step: int | str | None = args.step
    if isinstance(step, str) and step.isdigit():
        step = int(step)
    cp = critical_path(trace, step=step)
    result = cp.to_dict(max_steps=args.steps)
    top = _limit(args)
    if args.json:
        if top is not None:
            result["by_op"] = result["by_op"][:top]
        return result
    out = [
        f"Critical path: {result['length_us']:,.1f} us over a span of {result['span_us']:,.1f} us "
        f"({result['steps_total']:,} steps; host {result['by_side']['host_us']:,.1f} us, "
        f"device {result['by_side']['device_us']:,.1f} us)",
        "",
        "By operator" + _cut(len(result["by_op"]), top) + ":",
        _table(result["by_op"][:top], [("op", "operator"), ("side", "side"), ("count", "count"),
                                       ("time_us", "on path us"), ("share", "share")]),
        "",
        f"Path (first {min(args.steps, result['steps_total'])} steps):",
        _table(result["steps"], [("start_us", "start us"), ("name", "event"), ("side", "side"),
                                 ("dur_us", "dur us"), ("on_path_us", "on path us"), ("via", "via")]),
        "",
        "Least slack off the path:",
        _table(result["slack"]["least_slack_off_path"], [("name", "event"), ("dur_us", "dur us"),
                                                         ("slack_us", "slack us")]),
    ]
    return "\n".join(out)


def _diff(args: argparse.Namespace) -> dict[str, Any] | str:
    a, b = read_trace(args.a), read_trace(args.b)
    kinds = None if args.all_kinds else OPERATOR_KINDS
    top = _limit(args)
    comparison = compare_traces(a, b, labels=(args.a, args.b), kinds=kinds)
    result = comparison.to_dict(top=top)
    if args.json:
        return result
    cp = result["critical_path"]
    n_rows = len(comparison.rows)
    listed = [("op", "operator"), ("side", "side"), ("count", "count"), ("total_us", "total us")]
    out = [
        f"A = {args.a}\nB = {args.b}\n(totals {'per step' if result['normalized_by'] == 'step' else 'over each trace'}; "
        f"{'all kinds' if kinds is None else 'operators, runtime calls and device work; --all-kinds adds frames and annotations'})",
        "",
        f"Largest changes (B - A){_cut(n_rows, top)}:",
        _table(result["rows"], [("op", "operator"), ("side", "side"), ("count_a", "count A"),
                                ("count_b", "count B"), ("total_a_us", "total A us"),
                                ("total_b_us", "total B us"), ("delta_us", "delta us"),
                                ("delta_pct", "delta %"), ("impact", "impact")]),
        "",
        f"New in B ({len(result['new'])}):",
        _table(result["new"][:top], listed) + _cut(len(result["new"]), top),
        "",
        f"Gone in B ({len(result['vanished'])}):",
        _table(result["vanished"][:top], listed) + _cut(len(result["vanished"]), top),
    ]
    if cp:
        out += [
            "",
            f"Critical path ({cp['scope']}): A {cp['length_a_us']:,.1f} us, B {cp['length_b_us']:,.1f} us, "
            f"delta {cp['delta_us']:+,.1f} us",
            _table(cp["by_op"][:top], [("op", "operator"), ("side", "side"), ("path_a_us", "A us"),
                                       ("path_b_us", "B us"), ("delta_us", "delta us")]),
        ]
    return "\n".join(out)


def _job(args: argparse.Namespace) -> dict[str, Any] | str:
    job = analyse_job(read_job(args.files if len(args.files) > 1 else args.files[0]))
    top = _limit(args)
    result = job.to_dict(top=top)
    cp = cross_rank_critical_path(job) if job.collectives else None
    result["critical_path"] = {k: v for k, v in cp.to_dict(max_steps=0).items() if k != "steps"} if cp else None
    if args.json:
        return result
    out = [f"{len(job.ranks)} ranks; collectives matched: {len(job.collectives)} "
           f"(rule: {job.rule or 'no communication found'})", "",
           "Per rank:", _table([{k: v for k, v in r.items() if k in ("rank", "events", "span_us")} |
                                {"comm": r["communication"]["communication"]} for r in result["per_rank"]],
                               [("rank", "rank"), ("events", "events"), ("span_us", "span us"),
                                ("comm", "comm share")]),
           "", "Stragglers:", _table(result["stragglers"], [("rank", "rank"), ("last_at", "last at"),
                                                         ("lateness_us", "lateness us"), ("straggler", "straggler")])]
    if cp:
        d = result["critical_path"]
        out += ["", f"Critical path across ranks: {d['length_us']:,.1f} us, bound: {d['bound']}; "
                f"time per rank: {d['ranks_on_path']}"]
    return "\n".join(out)


def _advise(args: argparse.Namespace) -> dict[str, Any] | str:
    if _is_job(args.files):
        findings = advise_job(analyse_job(read_job(args.files if len(args.files) > 1 else args.files[0])))
    else:
        findings = advise(read_trace(args.files[0]))
    top = _limit(args)
    if args.json:
        result = findings.to_dict()
        if top is not None:
            result["findings"] = result["findings"][:top]
        return result
    return advice_text(findings, top)


def _is_job(files: list[str]) -> bool:
    """Several files, a folder or an archive: a distributed job's ranks."""
    path = Path(files[0])
    return len(files) > 1 or path.is_dir() or path.name.lower().endswith((".zip", ".tar", ".tar.gz", ".tgz"))


def advice_text(findings: Findings, top: int | None = DEFAULT_TOP) -> str:
    """The findings as text: the verdict line, where the time goes, then each finding with its
    evidence and action (times as the trace page writes them: µs, ms or s by size, windows
    from the trace's start)."""
    out = [findings.summary, ""]
    account = findings.account.get("lines", [])
    if account and ("Top finding:" in findings.summary or len(account) > 1):
        out += [*(line for line in account if line not in findings.summary), ""]
    origin = int(findings.scope.get("origin_us", 0) * 1000)
    shown = findings.findings[:top] if top else findings.findings
    for k, f in enumerate(shown, 1):
        d = f.to_dict()
        ev = d["evidence"]
        per_step = f", {duration(f.saving_per_step_ns)} per step" if f.saving_per_step_ns is not None else ""
        rank = f" (rank {f.rank})" if f.rank is not None else ""
        out += [
            f"{k}. [{f.severity}] {f.rule}{rank}: saves up to {duration(f.saving_ns)} "
            f"({d['saving_share'] * 100:.1f}% of the critical path{per_step})",
            f"   {f.title}",
        ]
        where = []
        if ev["steps"]:
            where.append("steps " + ", ".join(ev["steps"][:6]) + (" ..." if len(ev["steps"]) > 6 else ""))
        if ev["events"]:
            where.append("events " + ", ".join(map(str, ev["events"][:8])) + (" ..." if len(ev["events"]) > 8 else ""))
        if f.evidence.focus_ns:
            where.append("from " + window(*f.evidence.focus_ns, origin) + " after the trace's start")
        if where:
            out.append("   Evidence: " + "; ".join(where))
        if ev["operators"]:
            out.append("   Operators: " + ", ".join(f"{o['op'][:60]} ({duration_us(o['time_us'])})"
                                                    for o in ev["operators"][:3]))
        out += [f"   Next: {f.action}", ""]
    if top and len(findings.findings) > top:
        out.append(f"(top {top} of {len(findings.findings)} findings; --top 0 lists all)")
    return "\n".join(out).rstrip()


def _convert(args: argparse.Namespace) -> dict[str, Any] | str:
    trace = link_host_et(args.host_et, args.input) if args.host_et else read_trace(args.input)
    to = args.to or _format_of(args.output)
    if to == "chakra-et":
        write_chakra_et(trace, args.output)
    elif to == "chakra":
        write_chakra(trace, args.output)
    else:
        cp = critical_path(trace) if args.mark_critical_path else None
        write_chrome_trace(trace, args.output, critical_path=cp)
    result = {"input": args.input, "output": args.output, "format": to, "events": len(trace)}
    return result if args.json else f"wrote {len(trace):,} events to {args.output} ({to})"


def _format_of(output: str) -> str:
    """The output format a file name implies: ``.et`` Chakra protobuf, ``chakra`` in the
    name Chakra JSON, else Chrome JSON."""
    if output.endswith((".et", ".et.gz")):
        return "chakra-et"
    return "chakra" if "chakra" in output else "chrome"


def _whatif(args: argparse.Namespace) -> dict[str, Any] | str:
    """A trace's kernels under a fitted model (``python -m emulator fit --json`` writes one;
    ``python -m emulator whatif --on TYPE`` reads a type's from its spec)."""
    try:
        data = orjson.loads(Path(args.model).read_bytes())
        model, detail = model_from_json(data), detail_from_json(data)
    except (OSError, ValueError) as exc:
        raise SystemExit(f"error: {args.model}: {exc}") from None
    rows = [{"class": c, **r} for c, r in predict_trace(read_trace(args.file), model, detail).items()]
    if args.json:
        return {"trace": args.file, "model": args.model, "classes": rows}
    columns = [("class", "class"), ("kernels", "kernels"), ("recorded_us", "recorded us"),
               ("predicted_us", "predicted us"), ("error", "model error"), ("fell_back", "fell back")]
    return f"What if {args.file} ran on the device of {args.model}:\n" + _table(rows, columns)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m traces.atrace", description="Atrace: analyse accelerator traces.")
    sub = p.add_subparsers(dest="command", required=True)

    def common(sp: argparse.ArgumentParser) -> None:
        sp.add_argument("--json", action="store_true", help="machine-readable output")
        sp.add_argument("--top", type=int, default=None,
                        help=f"rows per table (default {DEFAULT_TOP} in tables, all in --json; 0: all)")

    s = sub.add_parser("summary", help="breakdown, correlation and critical path of a trace")
    s.add_argument("file")
    common(s)
    s.set_defaults(run=_summary)
    c = sub.add_parser("critical-path", help="the critical path of a trace or of one step")
    c.add_argument("file")
    c.add_argument("--step", help="step number (ProfilerStep#N) or annotation name")
    c.add_argument("--steps", type=int, default=40, help="path steps to list")
    common(c)
    c.set_defaults(run=_critical_path)
    d = sub.add_parser("diff", help="compare two traces (B against A)")
    d.add_argument("a")
    d.add_argument("b")
    d.add_argument("--all-kinds", action="store_true", help="also compare Python frames and annotations")
    common(d)
    d.set_defaults(run=_diff)
    j = sub.add_parser("job", help="a distributed job: rank files, a folder or an archive")
    j.add_argument("files", nargs="+")
    common(j)
    j.set_defaults(run=_job)
    a = sub.add_parser("advise", help="what to fix, with evidence and the time each fix could save "
                                      "(a trace, or a job's rank files, folder or archive)")
    a.add_argument("files", nargs="+")
    common(a)
    a.set_defaults(run=_advise)
    v = sub.add_parser("convert", help="convert a trace (to Chrome JSON, Chakra JSON or Chakra .et)")
    v.add_argument("input")
    v.add_argument("output", help="output path; .gz compresses; .et (or .et.gz) writes Chakra protobuf")
    v.add_argument("--to", choices=["chrome", "chakra", "chakra-et"])
    v.add_argument("--mark-critical-path", action="store_true")
    v.add_argument("--host-et", metavar="HOST_ET",
                   help="a PyTorch host execution trace of the same run, linked to the Kineto INPUT")
    common(v)
    v.set_defaults(run=_convert)
    w = sub.add_parser("whatif", help="a trace's kernels, per operator class, on a device with a fitted model")
    w.add_argument("file")
    w.add_argument("--model", required=True, help="JSON of `python -m emulator fit --json` (or class -> parameters)")
    common(w)
    w.set_defaults(run=_whatif)
    add_requests_parser(sub, _table)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        result = args.run(args)
    except TraceError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if isinstance(result, dict):
        sys.stdout.write(orjson.dumps(result, option=orjson.OPT_INDENT_2).decode() + "\n")
    else:
        print(result)
    return 0
