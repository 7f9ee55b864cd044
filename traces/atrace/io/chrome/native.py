"""The event scanner in C (``_eventscan.c``): built here, loaded where it was built.

:func:`build` compiles the scanner beside its source with the system's C compiler and this
Python's headers, and writes the source's SHA-256 into it; :func:`load` refuses a build
whose hash is not the source's (a scanner left from an older source after a ``git pull``,
or copied from elsewhere), with a warning. ``make`` runs this file by its path (``python
traces/atrace/io/chrome/native.py --ensure``) every time it sets up or checks the virtual
environment, before the requirements are installed: it needs the standard library alone,
and builds only when the build is missing or stale. Where it is not built (no compiler),
:data:`scan` is None, :data:`unavailable` says why, and the reader decodes every batch with
msgspec: the same traces, two to three times the time to load.
"""

from __future__ import annotations

import hashlib
import importlib.util
import logging
import os
import shlex
import shutil
import subprocess
import sysconfig
from collections.abc import Callable
from pathlib import Path

HERE = Path(__file__).resolve().parent
SOURCE = HERE / "_eventscan.c"
MODULE = "_eventscan"
ENV_DISABLE = "ATRACE_NO_NATIVE"  # set (to anything) to read with msgspec alone

log = logging.getLogger(__name__)


def built_path() -> Path:
    """Where the compiled scanner lies (the file name this Python imports)."""
    return HERE / (MODULE + (sysconfig.get_config_var("EXT_SUFFIX") or ".so"))


def source_hash(source: Path = SOURCE) -> str:
    return hashlib.sha256(source.read_bytes()).hexdigest()


def compiler() -> list[str]:
    """The C compiler's command (CC, else the one this Python was built with)."""
    return shlex.split(os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc")


def have_compiler() -> bool:
    cc = compiler()
    return bool(cc) and shutil.which(cc[0]) is not None


def build_command(out: Path, source: Path = SOURCE) -> list[str]:
    """The compiler command that builds the scanner from ``source`` into ``out``."""
    include = sysconfig.get_paths()["include"]
    digest = f'-DEVENTSCAN_SOURCE_SHA256="{source_hash(source)}"'
    return [*compiler(), "-O2", "-shared", "-fPIC", "-std=c11", "-Wall", digest, f"-I{include}", str(source),
            "-o", str(out)]


def build(out: Path | None = None, source: Path = SOURCE) -> Path:
    """Compile the scanner into ``out`` (where this Python imports it from); the file
    appears only once whole (built under another name, then renamed)."""
    out = out or built_path()
    partial = out.with_name(f".{out.name}.{os.getpid()}")
    try:
        subprocess.run(build_command(partial, source), check=True)
        partial.replace(out)
    finally:
        partial.unlink(missing_ok=True)
    return out


def _import(path: Path):
    spec = importlib.util.spec_from_file_location(f"{__package__ or 'atrace_native'}.{MODULE}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def load_module(path: Path | None = None):
    """The built scanner's module, or the reason it cannot be used (a str)."""
    path = path or built_path()
    if not path.exists():
        others = sorted(p.name for p in HERE.glob(f"{MODULE}*.so") if p != path)
        built_for = f" (there is {', '.join(others)}, built for another Python)" if others else ""
        return f"the event scanner is not built for this Python: no {path.name}{built_for}; run `make`"
    try:
        module = _import(path)
    except ImportError as exc:
        return f"the event scanner at {path} does not load ({exc}); run `make`"
    built_from, want = getattr(module, "SOURCE_SHA256", ""), source_hash()
    if built_from != want:
        return (f"the event scanner at {path} was built from another source (sha256 {built_from[:12] or 'unknown'}, "
                f"the source is {want[:12]}): refused; run `make`")
    return module


def load(path: Path | None = None) -> Callable | None:
    """The scanner's ``scan`` function, or None where it is not built, is stale or is turned
    off (:data:`unavailable` then says why; a stale or missing build is also logged)."""
    global unavailable
    if os.environ.get(ENV_DISABLE):
        unavailable = f"the event scanner is turned off ({ENV_DISABLE} is set)"
        return None
    module = load_module(path)
    if isinstance(module, str):
        unavailable = module
        log.warning("%s; traces load with msgspec alone, at about half speed", module)
        return None
    unavailable = None
    return module.scan


def ensure() -> str:
    """Build the scanner unless a build of this very source is there (its hash is written
    in the built file: looked for without loading it); say which."""
    path = built_path()
    if path.exists() and source_hash().encode() in path.read_bytes():
        return f"up to date: {path}"
    return f"built {build()}"


unavailable: str | None = None
scan = load() if __name__ != "__main__" else None  # (make's --ensure looks before it builds)


if __name__ == "__main__":
    import sys

    args = sys.argv[1:]
    if args == ["--check"]:  # CI: fail unless the scanner loads here
        module = load_module()
        print(module if isinstance(module, str) else f"the event scanner loads: {built_path()}")
        sys.exit(1 if isinstance(module, str) else 0)
    if args == ["--ensure"]:
        print(ensure())
        sys.exit(0)
    print("built", build(out=Path(args[0]).resolve() if args else None))
