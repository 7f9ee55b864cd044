"""The emulator's state in the stack's Redis (emulator.state_store.RedisStateStore), against
the real Redis: whole writes, one holder of a host's lock at a time across processes, a lock
whose holder died expiring, a renewed lock outliving its expiry, and clear errors."""

import json
import signal
import subprocess
import sys
import threading
import time

import pytest
from django.conf import settings

from emulator import EmulatedHost, FleetConfig
from emulator.state_store import RedisStateStore, StateLockTimeout
from tests.support.processes import ROOT

CFG = FleetConfig(seed=5, hosts=2, devices_per_host=3)
T0 = 1_700_000_000.0

pytestmark = pytest.mark.usefixtures("clean_redis")


def prefix() -> str:
    return f"{settings.REDIS_KEY_PREFIX}:emulator"


def store(**kwargs) -> RedisStateStore:
    """A store with a client of its own, as another process would have."""
    return RedisStateStore.from_url(settings.REDIS_URL, prefix(), **kwargs)


def test_a_write_is_read_back_whole_by_another_store_and_not_again_when_unchanged():
    one, two = store(), store()
    with one.locked("host-00"):
        stamp = one.write("host-00", b'{"a": 1}')
    found = two.read("host-00")
    assert found.body == b'{"a": 1}' and found.stamp == stamp
    assert two.read("host-00", known=stamp).body is None  # unchanged: nothing to parse again
    assert two.read("host-01") is None


def test_a_reader_never_sees_half_a_write():
    """A reader reading while a writer alternates two large states sees only one of the two,
    each with the stamp of its own write."""
    writer, reader = store(), store()
    bodies = [bytes([ord("a") + n]) * 2_000_000 for n in range(2)]
    stamps: dict[str, bytes] = {}
    done = threading.Event()

    def write() -> None:
        for n in range(30):
            with writer.locked("host-00"):
                stamps[writer.write("host-00", bodies[n % 2])] = bodies[n % 2]
        done.set()

    thread = threading.Thread(target=write)
    thread.start()
    seen = 0
    while not done.is_set():
        found = reader.read("host-00")
        if found is not None:
            assert found.body in bodies
            seen += 1
    thread.join()
    assert seen > 0
    last = reader.read("host-00")
    assert stamps[last.stamp] == last.body


COUNTER = """
import sys
from emulator.state_store import RedisStateStore
store = RedisStateStore.from_url(sys.argv[1], sys.argv[2])
for _ in range(int(sys.argv[3])):
    with store.locked("host-00"):
        found = store.read("host-00")
        n = int(found.body) if found else 0
        store.write("host-00", str(n + 1).encode())
"""


@pytest.mark.slow  # over 1.5 s on 2 cores: in make test, out of make test-fast
def test_two_processes_taking_turns_under_the_lock_lose_no_update():
    """Read, add one, write: 2 x 150 times from two processes at once ends at 300, which a
    lock that let both in at once would not."""
    runs = [subprocess.Popen([sys.executable, "-c", COUNTER, settings.REDIS_URL, prefix(), "150"], cwd=ROOT)
            for _ in range(2)]
    assert [p.wait(120) for p in runs] == [0, 0]
    assert int(store().read("host-00").body) == 300


HOLD_AND_DIE = """
import os, signal, sys
from emulator.state_store import RedisStateStore
store = RedisStateStore.from_url(sys.argv[1], sys.argv[2], lock_ttl_s=3.0)
held = store.locked("host-00")  # kept: a collected context would release the lock
held.__enter__()
print("held", flush=True)
os.kill(os.getpid(), signal.SIGKILL)
"""


@pytest.mark.slow  # over 1.5 s on 2 cores: in make test, out of make test-fast
def test_the_lock_of_a_holder_that_died_expires(clean_redis):
    dead = subprocess.run([sys.executable, "-c", HOLD_AND_DIE, settings.REDIS_URL, prefix()], cwd=ROOT,
                          capture_output=True, text=True, timeout=60)
    assert dead.returncode == -signal.SIGKILL and dead.stdout == "held\n", dead.stderr
    left = clean_redis.pttl(f"{prefix()}:host-00:lock") / 1000
    assert 0 < left <= 3
    with pytest.raises(StateLockTimeout, match="locked by another process"), store(wait_s=0.1).locked("host-00"):
        pass  # still held: the dead process's lock has not expired yet
    started = time.monotonic()
    with store(wait_s=10).locked("host-00"):
        waited = time.monotonic() - started
    assert left - 0.5 < waited < left + 0.5  # when the dead holder's lock expired, not later


def test_a_lock_held_past_its_expiry_is_renewed_and_its_write_goes_through():
    holder, other = store(lock_ttl_s=0.6), store(wait_s=0.2)
    with holder.locked("host-00"):
        time.sleep(1.5)  # 2.5 expiries
        with pytest.raises(StateLockTimeout), other.locked("host-00"):
            pass
        holder.write("host-00", b"kept")
    assert other.read("host-00").body == b"kept"


def test_a_holder_that_lost_its_lock_cannot_overwrite_the_next_holders_state():
    stalled, next_one = store(), store()
    with stalled.locked("host-00"):
        stalled.client.delete(f"{prefix()}:host-00:lock")  # as if it expired during a stall
        with next_one.locked("host-00"):
            next_one.write("host-00", b"newer")
            with pytest.raises(StateLockTimeout, match="lock expired before the write"):
                stalled.write("host-00", b"stale")
    assert next_one.read("host-00").body == b"newer"


def test_a_write_without_the_lock_is_refused():
    with pytest.raises(RuntimeError, match="without holding its lock"):
        store().write("host-00", b"x")


def test_a_value_that_is_not_a_state_is_a_clear_error(clean_redis):
    clean_redis.set(f"{prefix()}:host-01", "junk")
    host = EmulatedHost(CFG, "host-01", store=store())
    with pytest.raises(ValueError, match=rf"Redis key {prefix()}:host-01 holds no emulator state"):
        host.sync(T0)
    clean_redis.delete(f"{prefix()}:host-01")
    clean_redis.hset(f"{prefix()}:host-01", mapping={"stamp": "x", "body": '{"version": 1, "dev'})
    with pytest.raises(ValueError, match=rf"Redis key {prefix()}:host-01 holds no readable state"):
        host.sync(T0)
    clean_redis.hset(f"{prefix()}:host-01", mapping={"stamp": "y", "body": json.dumps({"version": 1, "seed": 6})})
    with pytest.raises(ValueError, match="holds state of another fleet or format"):
        host.sync(T0)


def test_an_emulated_host_round_trips_through_redis_past_64_bits():
    host = EmulatedHost(CFG, "host-01", store=store())
    with host.locked():
        host.sync(T0)
        host.advance(T0 + 30)
        serial = next(iter(host.states))
        host.states[serial].core_total_cycles[0] = 2**70 + 3
        host.inject_fault(serial, "overheat")
        host.save()
    other = EmulatedHost(CFG, "host-01", store=store())
    with other.locked():
        assert other.sync(T0) is True
        assert other.sync(T0) is False  # nothing new: not read again
    assert {s: st.to_json() for s, st in other.states.items()} == {s: st.to_json() for s, st in host.states.items()}
    assert "overheat" in other.states[serial].faults
    assert other.now == T0 + 30
    assert not (settings.EMULATOR_STATE_DIR / "host-01.json").exists()  # nothing on disk
