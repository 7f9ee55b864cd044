"""``python -m fleet.asimov compile SPEC`` prints the generated monitor module;
``python -m fleet.asimov check SPEC...`` only checks (exit status 1 on errors);
``python -m fleet.asimov validate SPEC... [--json]`` checks and says what each spec declares
(`fleet.asimov.interface.validate`). None of them runs what it compiles, so any spec, from any folder,
can be checked safely. ``python -m fleet.asimov conform SPEC [--device sim] [--json]`` runs
the conformance kit (`fleet.asimov.interface.conform`): it loads the spec's monitor and drives a device
with it (exit status 1 when a check fails, 2 when no device could be opened)."""

from __future__ import annotations

import argparse
import io
import sys
from pathlib import Path

from fleet.asimov.compiler import check_file, compile_file
from fleet.asimov.errors import AsimovError, SpecErrors
from fleet.asimov.interface.conform import conform, table, to_json
from fleet.asimov.interface.validate import validate_paths


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m fleet.asimov", description="The Asimov spec compiler."
    )
    sub = parser.add_subparsers(dest="command", required=True)
    p_compile = sub.add_parser("compile", help="check a spec and print the generated Python module")
    p_compile.add_argument("spec", type=Path)
    p_check = sub.add_parser("check", help="check specs without generating code")
    p_check.add_argument("specs", type=Path, nargs="+")
    p_validate = sub.add_parser("validate", help="check specs (never run) and print what each declares")
    p_validate.add_argument("specs", type=Path, nargs="+")
    p_validate.add_argument("--json", action="store_true", help="one JSON object per spec")
    p_conform = sub.add_parser("conform", help="drive a device through every counter and command the spec declares")
    p_conform.add_argument("spec", type=Path)
    p_conform.add_argument("--device", default="sim", help="sim (the spec's simulator) or MODULE:FUNCTION[=ARGUMENT]")
    p_conform.add_argument("--json", action="store_true", help="the report as JSON")
    args = parser.parse_args(argv)
    if args.command == "conform":
        return _conform(args)
    if args.command == "validate":
        return validate_paths(args.specs, as_json=args.json, out=sys.stdout, err=sys.stderr)

    paths = [args.spec] if args.command == "compile" else args.specs
    status = 0
    for path in paths:
        try:
            compiled = compile_file(path) if args.command == "compile" else check_file(path)
        except FileNotFoundError:
            print(f"{path}: error: no such file", file=sys.stderr)
            status = 1
            continue
        except (AsimovError, SpecErrors) as exc:
            print(exc, file=sys.stderr)
            status = 1
            continue
        if args.command == "compile":
            sys.stdout.write(compiled.code)
        else:
            print(f"{path}: ok ({len(compiled.counters)} counters)")
    return status


def _conform(args) -> int:
    if validate_paths([args.spec], as_json=False, out=io.StringIO(), err=sys.stderr):
        return 1
    try:
        report = conform(args.spec, args.device)
    except (ImportError, AttributeError, ValueError) as exc:
        print(f"{args.spec}: cannot open device {args.device!r}: {exc}", file=sys.stderr)
        return 2
    print(to_json(report) if args.json else table(report))
    return 0 if report.passed else 1


if __name__ == "__main__":
    sys.exit(main())
