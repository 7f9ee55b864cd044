"""``python -m fleet.asimov validate SPEC...``: a vendor's check of a spec, with no stack.

Parses and checks each spec (`fleet.asimov.compiler.check_file`: nothing generated, nothing
run), and prints every error as ``file:line:column: error: ...`` with the line and a caret,
or what the spec declares (counters, commands, events). ``--json`` prints one object per
spec: ``{"spec", "ok", "errors": [{"file", "line", "column", "message", "expected"}],
"metadata"}`` (metadata as docs/spec/spec-metadata.schema.json has it). Exit status 1 when
any spec has an error.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TextIO

from fleet.asimov.compiler import check_file
from fleet.asimov.errors import AsimovError, SpecErrors
from fleet.asimov.interface.schemas import spec_metadata

__all__ = ["validate", "validate_paths"]


def validate(path: Path) -> dict:
    """One spec's result: ``ok``, its ``errors`` and, when it is fine, its ``metadata``."""
    result: dict = {"spec": str(path), "ok": False, "errors": [], "metadata": None}
    try:
        checked = check_file(path)
    except (AsimovError, SpecErrors) as exc:
        errors = exc.errors if isinstance(exc, SpecErrors) else [exc]
        result["errors"] = [{"file": e.file, "line": e.line, "column": e.column, "message": e.message,
                             "expected": e.expected, "text": str(e)} for e in errors]
        return result
    except (OSError, UnicodeDecodeError) as exc:
        why = "no such file" if isinstance(exc, FileNotFoundError) else (
            "not a text file (UTF-8)" if isinstance(exc, UnicodeDecodeError) else exc.strerror or str(exc))
        text = f"{path}:1:1: error: {why}"
        result["errors"] = [{"file": str(path), "line": 1, "column": 1, "message": why, "expected": "", "text": text}]
        return result
    result["ok"] = True
    result["metadata"] = spec_metadata(checked)
    return result


def validate_paths(paths: list[Path], *, as_json: bool, out: TextIO, err: TextIO) -> int:
    results = [validate(Path(p)) for p in paths]
    if as_json:
        json.dump(results, out, indent=2)
        out.write("\n")
    else:
        for r in results:
            if r["ok"]:
                m = r["metadata"]
                events = m["events"]["catalogue"] if m["events"] else "none"
                out.write(f"{r['spec']}: ok (device {m['device']}, {len(m['counters'])} counters, "
                          f"commands: {', '.join(m['actions'] + (['diagnose'] if m['diagnose'] else [])) or 'none'}, "
                          f"events: {events})\n")
            for e in r["errors"]:
                err.write(e["text"] + "\n")
        bad = sum(len(r["errors"]) for r in results)
        if bad:
            err.write(f"{bad} error{'s' if bad != 1 else ''} in {sum(not r['ok'] for r in results)} of {len(results)} spec(s)\n")
    return 0 if all(r["ok"] for r in results) else 1
