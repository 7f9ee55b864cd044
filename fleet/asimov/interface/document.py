"""The published interface, docs/spec/interface.md ("Asicmon accelerator monitoring interface"),
written from the code's single sources: the counter catalogue and its names elsewhere
(`fleet.asicmon.catalogue`, `fleet.asicmon.mappings`), the error-event form
(`fleet.asicmon.errors.events`), the catalogues' vocabulary and the repair ladder's rungs
(`fleet.asicmon.errors.catalogue`), the control actions (`fleet.asicmon.monitor`) and the
Asimov grammar (``language/grammar.lark``, shown as EBNF). Never edit the document by hand:

    python -m fleet.asimov.interface.document           # writes docs/spec/
    python -m fleet.asimov.interface.document --check   # exit status 1 when docs/spec/ is stale

A counter without a row in the mapping table, an event field or a rung without its text here
stops the generator (`SpecDocError`), so the document cannot fall behind the code.
"""

from __future__ import annotations

import dataclasses
import json
import re
import sys
from pathlib import Path

from fleet.asicmon.catalogue import ALWAYS_PRESENT, CATALOGUE, KINDS, RUNTIME_COUNTERS
from fleet.asicmon.errors.catalogue import ACTIONS, SEVERITIES, catalogue, catalogue_names
from fleet.asicmon.errors.events import ErrorEvent
from fleet.asicmon.mappings import MAPPINGS, missing_mappings, ucum
from fleet.asicmon.monitor import CONTROL_ACTIONS
from fleet.asimov.interface.conform import CHECKS, DEVICES, RANGES
from fleet.asimov.interface.schemas import counters_document, schemas

__all__ = ["VERSION", "SpecDocError", "documents", "ebnf", "interface_md", "stale", "write"]

VERSION = "0.1"
TITLE = f"Asicmon accelerator monitoring interface {VERSION}"
SPEC_DIR = Path(__file__).resolve().parents[3] / "docs" / "spec"
GRAMMAR = Path(__file__).resolve().parents[1] / "language" / "grammar.lark"


class SpecDocError(Exception):
    """The code has something the document has no words for."""


# The error-event normal form: every field of `ErrorEvent`, in words.
EVENT_FIELDS = {
    "vendor": "the vendor's name in lower case: nvidia, amd, ...",
    "code": "the vendor's error code as text (an XID \"79\", an SXid \"12028\", an AMD block \"umc.ue\")",
    "detail": "the driver's words, with pid and process name taken out",
    "time": "epoch seconds of the first occurrence",
    "raw": "the first line or record exactly as read",
    "source": "where it was read: kmsg, nvml, ras_sysfs, emulator",
    "address": "the device's bus address as the driver wrote it, lower case",
    "count": "occurrences merged into this event (same vendor, code, address, detail shape, bucket)",
    "first_seen": "epoch seconds of the first occurrence in the bucket",
    "last_seen": "epoch seconds of the last occurrence in the bucket",
    "pid": "the process named by the line, if any",
    "process": "that process's name",
    "name": "the catalogue's name for the code",
    "meaning": "the catalogue's meaning",
    "severity": f"one of {', '.join(SEVERITIES)}",
    "action": "the recommended action, one of the rungs below",
    "cause": "application, memory, interconnect, ..., or unknown",
    "hardware": "true when the device itself is at fault (counts toward repeat offenders)",
    "known": "false when the catalogue does not know the code (kept with its raw line, never dropped)",
    "serial": "the device the event was routed to, once routed",
    "key": "the fingerprint identical events share (numbers in the detail masked)",
}

# The repair ladder's rungs (the catalogues' actions) and what a device or host must guarantee.
RUNGS = {
    "ignore": "Nothing is done; the event is recorded and counted.",
    "restart_application": "The workload using the device is stopped and started again; the device keeps "
                           "its state and stays in service. Done when the application answers again.",
    "reset_device": "The device alone is reset (its `reboot` control action): in-flight work on it is lost, "
                    "other devices of the host are untouched. Done when the driver answers `ok` again and "
                    "the device's volatile error counters restart.",
    "reboot_host": "The whole host reboots; every device on it is back with a fresh driver. Done when the "
                   "host's agent reports again.",
    "inspect_hardware": "The device is taken out of service for a person to look at; nothing restarts it.",
    "inspect": "No rung is taken: a person reads the raw line (an unknown code, or one whose published "
               "action is to contact support, update software or check memory management); the event is "
               "shown as \"unknown: inspect\" and counted on `/metrics`.",
}
# Commands a spec declares for its devices.
COMMANDS = {
    "reboot": "`action reboot = ...`: resets one device. It must return (or raise) within the probe budget; "
              "while the device is away its driver status reads `rebooting`, and afterwards the counters "
              "show a fresh device (uptime-like totals may restart).",
    "diagnose": "`diagnose \"command\"`: a short self-test run as an argument list (never through a shell), "
                "and only from a spec in a spec folder. Exit status 0 means the device passed.",
}

EXAMPLE = '''\
# A device read through Linux hwmon files
device example
events amd_ras from kmsg

once chip = file("name", str)
temp: mC = file("temp1_input", int)
energy: uJ = optional(file("energy1_input", int))

stats.device_model = chip
stats.temperature_c = convert(temp, "C")
stats.energy_j_total = convert(energy, "J")

action reboot = write("device/reset", "1")
'''


def _check_sources() -> None:
    missing = missing_mappings()
    if missing:
        raise SpecDocError(f"counters without a row in fleet/asicmon/mappings.py: {', '.join(missing)}")
    fields = [f.name for f in dataclasses.fields(ErrorEvent)]
    if set(fields) != set(EVENT_FIELDS):
        raise SpecDocError(f"ErrorEvent fields and their texts differ: {sorted(set(fields) ^ set(EVENT_FIELDS))}")
    if set(ACTIONS) != set(RUNGS):
        raise SpecDocError(f"rungs without their guarantee: {sorted(set(ACTIONS) ^ set(RUNGS))}")
    if not set(CONTROL_ACTIONS) <= set(COMMANDS):
        raise SpecDocError(f"control actions without their guarantee: {sorted(set(CONTROL_ACTIONS) - set(COMMANDS))}")


# -- the grammar as EBNF --------------------------------------------------------------------
_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"i?|/(?!/)(?:[^/\\\n]|\\.)+/[imsx]*|//.*|->\s*\w+|[?]?%?\w+|\S')


def ebnf(grammar: str | None = None) -> str:
    """The Lark grammar in W3C-style EBNF (``::=``, ``( )?`` for optional, ``*``, ``+``):
    aliases, comments and Lark's inlining marks dropped, ``/regex/`` terminals kept."""
    grammar = GRAMMAR.read_text() if grammar is None else grammar
    rules: list[list[list[str]]] = []  # rule -> lines -> tokens
    ignored: list[str] = []
    for line in grammar.splitlines():
        tokens = [t for t in _TOKEN.findall(line) if not t.startswith("//") and not t.startswith("->")]
        if not tokens:
            continue
        if tokens[0] == "%ignore":
            ignored.append(" ".join(tokens[1:]))
        elif line[:1].strip():
            rules.append([tokens])
        else:
            rules[-1].append(tokens)
    out = []
    for lines in rules:
        name = lines[0][0].lstrip("?").lstrip("_")
        body = [_ebnf_tokens(lines[0][2:])] + [_ebnf_tokens(t) for t in lines[1:]]
        head = f"{name} ::= "
        out.append(head + body[0] if body[0] else head.rstrip())
        out.extend(" " * (len(head) - 2) + b for b in body[1:])
    out.append("")
    out.append("(* between tokens, ignored: " + "; ".join(ignored) + " *)")
    return "\n".join(out)


def _ebnf_tokens(tokens: list[str]) -> str:
    words = []
    for t in tokens:
        if t == "[":
            t = "("
        elif t == "]":
            t = ")?"
        elif re.fullmatch(r"_?[A-Za-z]\w*", t):
            t = t.lstrip("_")
        words.append(t)
    return re.sub(r" ([)*+?])", r"\1", re.sub(r"\( ", "(", " ".join(words))).replace(") ?", ")?")


# -- the document ---------------------------------------------------------------------------
def _cell(text: str) -> str:
    return (text or "—").replace("|", "\\|")


def _counters() -> list[str]:
    rows = ["| counter | unit (UCUM) | kind | required | meaning |", "|---|---|---|---|---|"]
    for c in CATALOGUE.values():
        required = "yes" if c.name in ALWAYS_PRESENT else "no"
        if c.name in RUNTIME_COUNTERS:
            required += " (runtime)"
        meaning = c.description + (f" Values: {', '.join(c.values)}." if c.values else "")
        meaning += " One value per compute core." if c.per_core else ""
        rows.append(f"| `{c.name}` | `{ucum(c.unit)}` | {c.kind} | {required} | {_cell(meaning)} |")
    return rows


def _names() -> list[str]:
    rows = ["| counter | OpenTelemetry | attributes | DCGM | amd-smi | Redfish | note |", "|---|---|---|---|---|---|---|"]
    for c in CATALOGUE.values():
        n = MAPPINGS[c.name]
        attrs = ", ".join(f"`{k}={v}`" for k, v in n.otel_attributes.items())
        rows.append(f"| `{c.name}` | {_cell(n.otel and f'`{n.otel}`')} | {_cell(attrs)} | {_cell(c.dcgm)} "
                    f"| {_cell(n.amdsmi)} | {_cell(n.redfish)} | {_cell(n.note)} |")
    return rows


def interface_md() -> str:
    _check_sources()
    cats = [catalogue(name) for name in catalogue_names()]
    lines = [
        f"# {TITLE}",
        "",
        "<!-- Generated by `python -m fleet.asimov.interface.document` from the code; do not edit by hand. -->",
        "",
        "An in-band interface any accelerator vendor can implement and any fleet can read: the counters a "
        "device reports, the error events its driver raises and what to do about each, the commands that "
        "repair it, and the Asimov language that binds a driver to all of these. The JSON Schemas beside "
        "this file (`*.schema.json`) are the machine-readable form.",
        "",
        "A vendor checks a spec with `python -m fleet.asimov validate SPEC` (nothing is executed) and runs "
        "the conformance kit with `python -m fleet.asimov conform SPEC`.",
        "",
        "## 1. Counters",
        "",
        f"Kinds: {', '.join(f'`{k}`' for k in KINDS)} — a `gauge` is a value at sample time, a `counter` a "
        "monotonic total (it may wrap at its hardware width, never go back otherwise), `info` text that "
        "rarely changes, `state` one of a fixed set of words. *Required* counters are in every snapshot "
        "(null when the device cannot tell); *runtime* ones are filled by the monitor, never by a spec.",
        "",
        *_counters(),
        "",
        "### 1.1 Names elsewhere",
        "",
        "OpenTelemetry names follow the hardware semantic conventions (`hw.*`, status \"development\"); "
        "every `hw.gpu.*` data point carries `hw.id` (required) and `hw.vendor`, `hw.model`, `hw.serial_number`, "
        "`hw.driver_version`, `hw.firmware_version` where known. DCGM fields are NVIDIA DCGM's, amd-smi "
        "fields are paths in `amd-smi metric --json`, Redfish properties are `Resource.Property`. "
        "— means there is no equivalent.",
        "",
        *_names(),
        "",
        "## 2. Error events",
        "",
        "A driver error becomes one event in normal form (schema: `error-event.schema.json`); identical "
        "events in one time bucket are merged and counted.",
        "",
        "| field | meaning |",
        "|---|---|",
        *(f"| `{f.name}` | {_cell(EVENT_FIELDS[f.name])} |" for f in dataclasses.fields(ErrorEvent)),
        "",
        "### 2.1 Error catalogues",
        "",
        "What a vendor's code means is data: one versioned JSON file per vendor (schema: "
        "`error-catalogue.schema.json`), `code → name, meaning, severity, action, cause, hardware`. A code "
        "the catalogue does not know is classified *unknown* (severity warning, action ignore) and kept.",
        "",
        "| catalogue | vendor | file |",
        "|---|---|---|",
        *(f"| `{c.name}` | {c.vendor} | `fleet/asicmon/catalogues/{c.name}.json` |" for c in cats),
        "",
        "Each file carries its own `version`; the codes it holds are its own and change without this "
        "document changing.",
        "",
        f"Severities: {', '.join(f'`{s}`' for s in SEVERITIES)}.",
        "",
        "## 3. Repair actions and device commands",
        "",
        "The recommended action of an event is one rung of the repair ladder, least disruptive first:",
        "",
        "| action | what it guarantees |",
        "|---|---|",
        *(f"| `{a}` | {_cell(RUNGS[a])} |" for a in ACTIONS),
        "",
        "A spec declares the commands its devices answer:",
        "",
        "| command | what it guarantees |",
        "|---|---|",
        *(f"| `{k}` | {_cell(v)} |" for k, v in COMMANDS.items()),
        "",
        "## 4. The Asimov language",
        "",
        "A spec binds one driver to the counters, events and commands above: one statement a line, "
        "Python-like expressions, units checked (`temp: mC = ...` then `convert(temp, \"C\")`). Its grammar:",
        "",
        "```ebnf",
        ebnf(),
        "```",
        "",
        "An example (it validates):",
        "",
        "```asimov",
        EXAMPLE.rstrip("\n"),
        "```",
        "",
        "## 5. Conformance",
        "",
        "`python -m fleet.asimov validate SPEC...` parses and checks specs without running anything and prints "
        "each error as `file:line:column: error: ...` (`--json` for tools; exit status 1 on errors). "
        "`python -m fleet.asimov conform SPEC --device DEVICE` drives one device through every counter and "
        "command the spec declares and prints a pass/fail table (`--json` for CI; exit status 1 when a check "
        f"fails, 2 when no device could be opened). Devices: {', '.join(f'`{d}`' for d in DEVICES)}, or "
        "`MODULE:FUNCTION[=ARGUMENT]`.",
        "",
        "| check | what passes |",
        "|---|---|",
        *(f"| {k} | {_cell(v)} |" for k, v in CHECKS.items()),
        "",
        "Ranges, in the counter's unit:",
        "",
        "| counter | low | high |",
        "|---|---|---|",
        *(f"| `{k}` | {lo:g} | {hi:g} |" for k, (lo, hi) in RANGES.items()),
        "",
        "## 6. Exporters in, OpenTelemetry out",
        "",
        "A fleet that already runs a metrics exporter joins without an agent: `EXPORTER_URLS` "
        "(`KIND=URL` pairs, comma-separated; KIND `dcgm` for NVIDIA dcgm-exporter, `amd` for AMD "
        "device-metrics-exporter) makes each endpoint a host whose GPUs are read through the specs "
        "`dcgm_exporter.asimov` and `amd_exporter.asimov` (their `/metrics` page as the driver). "
        "A new value of `DCGM_FI_DEV_XID_ERRORS` is an `nvidia_xid` error event; a climbing per-block "
        "count `gpu_ecc_{correct,uncorrect,deferred}_BLOCK` is an `amd_ras` event (`BLOCK.ce`, `.ue`, `.de`). "
        "A GPU gone from its exporter's page is marked absent (its history stays) and present again "
        "when it returns. An exporter takes no commands: the repair rungs and trace captures of its GPUs "
        "are refused, saying why.",
        "",
        "With `OTLP_METRICS_ENDPOINT` set (an OTLP/HTTP metrics URL; headers from "
        "`OTEL_EXPORTER_OTLP_METRICS_HEADERS`), every poll's samples are also sent as OTLP metrics under "
        "the OpenTelemetry names and attributes of section 1.1: gauges as gauges, `_total` counters as "
        "cumulative monotonic sums, one data point per device (or core) and cycle at the time of the "
        "device's refresh. Off by default; the Prometheus path is unchanged.",
        "",
    ]
    return "\n".join(lines)


def documents() -> dict[str, str]:
    """File name under docs/spec/ -> its text."""
    out = {"interface.md": interface_md(),
           "counters.json": json.dumps(counters_document(), indent=2, ensure_ascii=False) + "\n"}
    for name, schema in schemas().items():
        out[f"{name}.schema.json"] = json.dumps(schema, indent=2, sort_keys=True) + "\n"
    return out


def write(folder: Path = SPEC_DIR) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for name, text in documents().items():
        (folder / name).write_text(text)
        written.append(folder / name)
    return written


def stale(folder: Path = SPEC_DIR) -> list[str]:
    """Documents under ``folder`` that differ from what the code generates (or are missing)."""
    return [name for name, text in documents().items()
            if not (folder / name).is_file() or (folder / name).read_text() != text]


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if "--check" in argv:
        names = stale()
        for name in names:
            print(f"docs/spec/{name} is stale: run python -m fleet.asimov.interface.document", file=sys.stderr)
        return 1 if names else 0
    for path in write():
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
