"""The event scanner in C (``_eventscan.c``): built here, loaded where it was built.

:func:`build` compiles the scanner beside its source with the system's C compiler and this
Python's headers. ``make`` runs this file by its path (``python
traces/atrace/io/chrome/native.py [OUT]``) when it sets up the virtual environment, before
the requirements are installed: it needs the standard library alone. Where it is not built
(no compiler), :data:`scan` is None and the reader decodes every batch with msgspec: the
same traces, two to three times the time to load.
"""

from __future__ import annotations

import importlib
import os
import shlex
import subprocess
import sysconfig
from collections.abc import Callable
from pathlib import Path

HERE = Path(__file__).resolve().parent
SOURCE = HERE / "_eventscan.c"
MODULE = "_eventscan"
ENV_DISABLE = "ATRACE_NO_NATIVE"  # set (to anything) to read with msgspec alone


def built_path() -> Path:
    """Where the compiled scanner lies (the file name this Python imports)."""
    return HERE / (MODULE + (sysconfig.get_config_var("EXT_SUFFIX") or ".so"))


def build_command(out: Path) -> list[str]:
    """The compiler command that builds the scanner into ``out``."""
    cc = shlex.split(os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc")
    include = sysconfig.get_paths()["include"]
    return [*cc, "-O2", "-shared", "-fPIC", "-std=c11", "-Wall", f"-I{include}", str(SOURCE), "-o", str(out)]


def build(force: bool = False, out: Path | None = None) -> Path:
    """Compile the scanner into ``out`` (where this Python imports it from) if its source
    is newer than the build (or ``force``); the file appears only once whole (built under
    another name, then renamed)."""
    out = out or built_path()
    if not force and out.exists() and out.stat().st_mtime >= SOURCE.stat().st_mtime:
        return out
    partial = out.with_name(f".{out.name}.{os.getpid()}")
    try:
        subprocess.run(build_command(partial), check=True)
        partial.replace(out)
    finally:
        partial.unlink(missing_ok=True)
    return out


def load() -> Callable | None:
    """The scanner's ``scan`` function, or None where it is not built or is turned off."""
    if os.environ.get(ENV_DISABLE):
        return None
    try:
        module = importlib.import_module(f"{__package__}.{MODULE}")
    except ImportError:
        return None
    return module.scan


scan = load()


if __name__ == "__main__":
    import sys

    print("built", build(force=True, out=Path(sys.argv[1]).resolve() if len(sys.argv) > 1 else None))
