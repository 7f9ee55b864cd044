"""``python -m fleet.asimov compile SPEC`` prints the generated monitor module;
``python -m fleet.asimov check SPEC...`` only checks (exit status 1 on errors);
``python -m fleet.asimov validate SPEC... [--json]`` checks and says what each spec declares
(`fleet.asimov.validate`). None of them runs what it compiles, so any spec, from any folder,
can be checked safely."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from fleet.asimov.compiler import check_file, compile_file
from fleet.asimov.errors import AsimovError, SpecErrors
from fleet.asimov.validate import validate_paths


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
    args = parser.parse_args(argv)
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


if __name__ == "__main__":
    sys.exit(main())
