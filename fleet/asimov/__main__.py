"""``python -m fleet.asimov compile SPEC`` prints the generated monitor module;
``python -m fleet.asimov check SPEC...`` only checks (exit status 1 on errors). Neither runs
what it compiles, so any spec, from any folder, can be checked safely."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from fleet.asimov.compiler import check_file, compile_file
from fleet.asimov.errors import AsimovError, SpecErrors


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m fleet.asimov", description="The Asimov spec compiler."
    )
    sub = parser.add_subparsers(dest="command", required=True)
    p_compile = sub.add_parser("compile", help="check a spec and print the generated Python module")
    p_compile.add_argument("spec", type=Path)
    p_check = sub.add_parser("check", help="check specs without generating code")
    p_check.add_argument("specs", type=Path, nargs="+")
    args = parser.parse_args(argv)

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
