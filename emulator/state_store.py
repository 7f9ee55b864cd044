"""Where an emulated host's state is kept between polls, and the lock that guards it.

`EmulatedHost` saves one serialised state per host and reads it back when another process
wrote it since. A store gives it three things for a host: an exclusive lock across
processes (`locked`), the state with a stamp that changes on every write (`read`), and an
atomic replacement of the state (`write`).

`FileStateStore` (the default) keeps ``<dir>/<host>.json`` under an flock of
``<dir>/<host>.lock``: every process that polls or changes a host must see the same
folder. `RedisStateStore` keeps the state in one Redis hash per host and its lock in a
Redis key with a token and an expiry, so that processes on machines that share no disk
see one another's faults and loads; a holder that dies frees the lock when it expires.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import threading
import time
import uuid
from collections.abc import Hashable, Iterator
from pathlib import Path
from typing import NamedTuple, Protocol

__all__ = ["FileStateStore", "Read", "RedisStateStore", "StateStore", "StateLockTimeout"]


class Read(NamedTuple):
    """What `StateStore.read` found: the state's stamp, and its bytes unless the caller
    already had that stamp (then None: nothing to parse again)."""

    stamp: Hashable
    body: bytes | None


class StateStore(Protocol):
    def where(self, host: str) -> str:
        """Where the host's state is, in words (for error messages)."""

    def locked(self, host: str) -> contextlib.AbstractContextManager[None]:
        """Exclusive access to the host's state across processes (not reentrant)."""

    def read(self, host: str, known: Hashable | None = None) -> Read | None:
        """The host's state (None when it has none); its body is None when ``known`` is
        its stamp still."""

    def write(self, host: str, body: bytes) -> Hashable:
        """Replaces the host's state at once (hold `locked`); the new stamp."""


class StateLockTimeout(TimeoutError):
    pass


class FileStateStore:
    """``<directory>/<host>.json``, replaced by a rename, under an flock on ``<host>.lock``."""

    def __init__(self, directory: str | os.PathLike) -> None:
        self.directory = Path(directory)

    def path(self, host: str) -> Path:
        return self.directory / f"{host}.json"

    def where(self, host: str) -> str:
        return str(self.path(host))

    @staticmethod
    def _side_path(path: Path) -> Path:
        return path.with_name(f".{path.name}.new")

    @contextlib.contextmanager
    def locked(self, host: str) -> Iterator[None]:
        self.directory.mkdir(parents=True, exist_ok=True)
        with (self.directory / f"{host}.lock").open("a") as lock_file:
            fcntl.flock(lock_file, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(lock_file, fcntl.LOCK_UN)

    def read(self, host: str, known: Hashable | None = None) -> Read | None:
        path = self.path(host)
        st = _stat(path)
        if st is None and self._side_path(path).exists():
            self._side_path(path).rename(path)  # a write cut short after its unlink
            st = _stat(path)
        if st is None:
            return None
        stamp = (st.st_mtime_ns, st.st_size)
        return Read(stamp, None if stamp == known else path.read_bytes())

    def write(self, host: str, body: bytes) -> Hashable:
        """The new state goes to a side file that then takes the state file's name; the
        old file is unlinked first, because a rename over an existing file makes ext4 flush
        the new one to disk (auto_da_alloc): ten times the cost, for an emulator's state.
        `read` finishes a write cut short between the two steps."""
        path = self.path(host)
        path.parent.mkdir(parents=True, exist_ok=True)
        side = self._side_path(path)
        try:
            side.write_bytes(body)
            path.unlink(missing_ok=True)
            side.rename(path)
        except BaseException:
            if path.exists():
                side.unlink(missing_ok=True)
            raise
        st = path.stat()
        return (st.st_mtime_ns, st.st_size)


def _stat(path: Path) -> os.stat_result | None:
    try:
        return path.stat()
    except FileNotFoundError:
        return None


# KEYS[1] the state hash; ARGV[1] the stamp the caller has. 0: no state; 1: not a state;
# {stamp}: unchanged; {stamp, body}: changed.
_READ = """
local kind = redis.call('TYPE', KEYS[1]).ok
if kind == 'none' then return 0 end
if kind ~= 'hash' then return 1 end
local stamp = redis.call('HGET', KEYS[1], 'stamp')
if not stamp then return 1 end
if stamp == ARGV[1] then return {stamp} end
return {stamp, redis.call('HGET', KEYS[1], 'body') or ''}
"""
# KEYS[1] the state hash, KEYS[2] the lock; ARGV: our token, the new stamp, the body.
# Written only while the lock is still ours: a holder that stalled past its lock's expiry
# does not overwrite the state of the one that took the lock after it.
_WRITE = """
if redis.call('GET', KEYS[2]) ~= ARGV[1] then return 0 end
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1], 'stamp', ARGV[2], 'body', ARGV[3])
return 1
"""
_RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""
_RENEW = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
return 0
"""


class RedisStateStore:
    """One hash per host (``<prefix>:<host>``: its stamp and its body, replaced in one
    script) and one lock key (``<prefix>:<host>:lock``) holding its holder's token. The lock
    expires ``lock_ttl_s`` after it was last renewed; a thread of this process renews the
    locks it holds every third of that, so a long poll keeps its lock and a dead process
    loses its own. Waiting for a lock gives up after ``wait_s`` with `StateLockTimeout`."""

    def __init__(self, client, prefix: str, *, lock_ttl_s: float = 15.0, wait_s: float = 120.0) -> None:
        self.client, self.prefix = client, prefix
        self.lock_ttl_ms, self.wait_s = int(lock_ttl_s * 1000), wait_s
        self._read = client.register_script(_READ)
        self._write = client.register_script(_WRITE)
        self._release = client.register_script(_RELEASE)
        self._renew = client.register_script(_RENEW)
        self._held: dict[str, str] = {}  # host -> token, for the locks this process holds
        self._held_lock = threading.Lock()
        self._renewer: tuple[int, threading.Thread] | None = None

    @classmethod
    def from_url(cls, url: str, prefix: str, **kwargs) -> RedisStateStore:
        import redis

        return cls(redis.Redis.from_url(url, socket_timeout=10), prefix, **kwargs)

    def key(self, host: str) -> str:
        return f"{self.prefix}:{host}"

    def where(self, host: str) -> str:
        return f"Redis key {self.key(host)}"

    # -- the lock ----------------------------------------------------------------------------
    @contextlib.contextmanager
    def locked(self, host: str) -> Iterator[None]:
        lock_key, token = f"{self.key(host)}:lock", uuid.uuid4().hex
        deadline, pause = time.monotonic() + self.wait_s, 0.001
        while not self.client.set(lock_key, token, nx=True, px=self.lock_ttl_ms):
            if time.monotonic() > deadline:
                raise StateLockTimeout(f"{self.where(host)}: locked by another process for over {self.wait_s:g} s")
            time.sleep(pause)
            pause = min(pause * 2, 0.05)
        with self._held_lock:
            self._held[host] = token
        self._ensure_renewer()
        try:
            yield
        finally:
            with self._held_lock:
                self._held.pop(host, None)
            self._release(keys=[lock_key], args=[token])

    def _ensure_renewer(self) -> None:
        """One daemon thread per process (a forked child starts its own)."""
        if self._renewer is not None and self._renewer[0] == os.getpid() and self._renewer[1].is_alive():
            return
        thread = threading.Thread(target=self._renew_loop, name="emulator-state-locks", daemon=True)
        self._renewer = (os.getpid(), thread)
        thread.start()

    def _renew_loop(self) -> None:
        while True:
            time.sleep(self.lock_ttl_ms / 3000)
            with self._held_lock:
                held = list(self._held.items())
            for host, token in held:
                with contextlib.suppress(Exception):  # the holder's own write reports a lost lock
                    self._renew(keys=[f"{self.key(host)}:lock"], args=[token, self.lock_ttl_ms])

    # -- the state ---------------------------------------------------------------------------
    def read(self, host: str, known: Hashable | None = None) -> Read | None:
        found = self._read(keys=[self.key(host)], args=["" if known is None else known])
        if found == 0:
            return None
        if found == 1:
            raise ValueError(f"{self.where(host)} holds no emulator state (not a hash with a stamp); delete it")
        stamp = found[0].decode() if isinstance(found[0], bytes) else found[0]
        if len(found) == 1:
            return Read(stamp, None)
        return Read(stamp, found[1].encode() if isinstance(found[1], str) else found[1])

    def write(self, host: str, body: bytes) -> Hashable:
        token = self._held.get(host)
        if token is None:
            raise RuntimeError(f"{self.where(host)}: written without holding its lock")
        stamp = uuid.uuid4().hex
        if not self._write(keys=[self.key(host), f"{self.key(host)}:lock"], args=[token, stamp, body]):
            raise StateLockTimeout(f"{self.where(host)}: the lock expired before the write (held past "
                                   f"{self.lock_ttl_ms / 1000:g} s without renewal); the state was not written")
        return stamp
