"""The web process's memory allocator: at most a few malloc arenas.

glibc gives a thread that allocates while another holds the arena an arena of its own, up
to eight per core, and an arena keeps the memory its frees leave. Django runs each request's
view in a thread of its own and the object store's writer sends parts from threads, so a
1 GB upload left its 1 MB reads and its parts spread over many arenas: the web process's
peak RSS was 15-25 MB higher than with two (benchmarks/bench_object_store.py). Two arenas
cost nothing measurable in time here (the threads mostly wait on sockets and the GIL).
"""

from __future__ import annotations

import ctypes
import os

M_ARENA_MAX = -8  # glibc's mallopt parameter


def limit_malloc_arenas(count: int = 2) -> bool:
    """Cap glibc's arenas at ``count`` for the threads that allocate from now on, unless
    MALLOC_ARENA_MAX names a cap already; False where the C library has no ``mallopt``."""
    if os.environ.get("MALLOC_ARENA_MAX"):
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):  # not glibc (musl, macOS)
        return False
    return bool(mallopt(M_ARENA_MAX, count))
