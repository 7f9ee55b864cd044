"""JSON Schemas of the published interface (docs/spec/*.schema.json), built from the code:
the counter catalogue (`fleet.asicmon.catalogue` with its names elsewhere,
`fleet.asicmon.mappings`), an error event (`ErrorEvent`'s fields and types), an error
catalogue (what `fleet.asicmon.errors.catalogue.Catalogue` loads) and a spec's declared
metadata (`spec_metadata` of a checked spec). `counters_document` is the catalogue itself
as JSON, the document the counter-catalogue schema describes.
"""

from __future__ import annotations

import dataclasses
import typing

from fleet.asicmon.catalogue import ALWAYS_PRESENT, CATALOGUE, KINDS, RUNTIME_COUNTERS
from fleet.asicmon.errors.catalogue import ACTIONS, SEVERITIES
from fleet.asicmon.errors.events import ErrorEvent
from fleet.asicmon.mappings import MAPPINGS, ucum
from fleet.asicmon.monitor import CONTROL_ACTIONS

__all__ = ["counters_document", "schemas", "spec_metadata"]

BASE = "https://asicmon.example/spec/0.1/"
_DRAFT = "https://json-schema.org/draft/2020-12/schema"
_JSON_TYPES = {str: "string", float: "number", int: "integer", bool: "boolean"}
_NAME = {"type": "string", "pattern": "^[a-z][a-z0-9_]*$"}


def _schema(name: str, title: str, body: dict) -> dict:
    return {"$schema": _DRAFT, "$id": f"{BASE}{name}.schema.json", "title": title, **body}


def counters_document() -> dict:
    """The counter catalogue as JSON (docs/spec/counters.json)."""
    rows = []
    for c in CATALOGUE.values():
        n = MAPPINGS[c.name]
        rows.append({
            "name": c.name, "unit": ucum(c.unit), "kind": c.kind, "description": c.description,
            "per_core": c.per_core, "values": list(c.values), "required": c.name in ALWAYS_PRESENT,
            "runtime": c.name in RUNTIME_COUNTERS,
            "names": {"otel": n.otel, "otel_attributes": dict(n.otel_attributes), "dcgm": c.dcgm,
                      "amdsmi": n.amdsmi, "redfish": n.redfish, "note": n.note},
        })
    return {"version": "0.1", "counters": rows}


def _counter_catalogue() -> dict:
    names = {k: {"type": "string"} for k in ("otel", "dcgm", "amdsmi", "redfish", "note")}
    names["otel_attributes"] = {"type": "object", "additionalProperties": {"type": "string"}}
    counter = {
        "type": "object",
        "required": ["name", "unit", "kind", "description", "required", "names"],
        "additionalProperties": False,
        "properties": {
            "name": _NAME, "unit": {"type": "string", "minLength": 1}, "kind": {"enum": list(KINDS)},
            "description": {"type": "string", "minLength": 1}, "per_core": {"type": "boolean"},
            "values": {"type": "array", "items": {"type": "string"}}, "required": {"type": "boolean"},
            "runtime": {"type": "boolean"},
            "names": {"type": "object", "required": sorted(names), "additionalProperties": False, "properties": names},
        },
    }
    return _schema("counter-catalogue", "Asicmon counter catalogue", {
        "type": "object", "required": ["version", "counters"], "additionalProperties": False,
        "properties": {"version": {"type": "string"}, "counters": {"type": "array", "items": counter}},
    })


def _field_type(annotation) -> dict:
    hint = eval(annotation, {}) if isinstance(annotation, str) else annotation  # noqa: S307 - our own annotations
    args = [a for a in typing.get_args(hint) if a is not type(None)]
    if args:  # X | None
        return {"type": [_JSON_TYPES[args[0]], "null"]}
    return {"type": _JSON_TYPES[hint]}


def _error_event() -> dict:
    props = {f.name: _field_type(f.type) for f in dataclasses.fields(ErrorEvent)}
    props["severity"] = {"enum": ["", *SEVERITIES]}  # "" until classified
    props["action"] = {"enum": ["", *ACTIONS]}
    props["count"]["minimum"] = 1
    required = [f.name for f in dataclasses.fields(ErrorEvent)
                if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING]
    return _schema("error-event", "Asicmon error event (normal form)", {
        "type": "object", "required": required, "additionalProperties": False, "properties": props,
    })


def _error_catalogue() -> dict:
    entry = {
        "type": "object", "required": ["name", "meaning", "severity", "action", "cause"],
        "properties": {
            "name": {"type": "string", "minLength": 1}, "meaning": {"type": "string", "minLength": 1},
            "severity": {"enum": list(SEVERITIES)}, "action": {"enum": list(ACTIONS)},
            "cause": {"type": "string", "minLength": 1}, "hardware": {"type": "boolean"},
        },
    }
    return _schema("error-catalogue", "Asicmon error catalogue (one vendor's codes)", {
        "type": "object", "required": ["vendor", "version", "codes"],
        "properties": {
            "catalogue": _NAME, "vendor": _NAME, "version": {"type": "string", "minLength": 1},
            "sources": {"type": "array", "items": {"type": "string"}}, "note": {"type": "string"},
            "codes": {"type": "object", "minProperties": 1, "additionalProperties": entry},
        },
    })


def _spec_metadata() -> dict:
    return _schema("spec-metadata", "What an Asimov spec declares", {
        "type": "object", "required": ["device", "counters", "actions", "events", "diagnose"],
        "additionalProperties": False,
        "properties": {
            "device": _NAME,
            "counters": {"type": "array", "uniqueItems": True,
                         "items": {"enum": [n for n in CATALOGUE if n not in RUNTIME_COUNTERS]}},
            "actions": {"type": "array", "uniqueItems": True, "items": {"enum": list(CONTROL_ACTIONS)}},
            "events": {"oneOf": [{"type": "null"}, {
                "type": "object", "required": ["catalogue", "sources"], "additionalProperties": False,
                "properties": {"catalogue": _NAME, "sources": {"type": "array", "items": _NAME}}}]},
            "diagnose": {"type": "array", "items": {"type": "string"}},
            "health": {"type": "object", "additionalProperties": {"type": "number"}},
            "simulated": {"type": "boolean"},
        },
    })


def spec_metadata(checked) -> dict:
    """What a checked spec (`fleet.asimov.checking.checker.CheckedSpec`) declares, as JSON."""
    events = None
    if checked.events:
        events = {"catalogue": checked.events["catalogue"], "sources": list(checked.events["sources"])}
    return {
        "device": checked.device, "counters": list(checked.counters), "actions": list(checked.actions),
        "events": events, "diagnose": list(checked.diagnostic), "health": dict(checked.health),
        "simulated": bool(checked.state),
    }


def schemas() -> dict[str, dict]:
    return {
        "counter-catalogue": _counter_catalogue(),
        "error-event": _error_event(),
        "error-catalogue": _error_catalogue(),
        "spec-metadata": _spec_metadata(),
    }
