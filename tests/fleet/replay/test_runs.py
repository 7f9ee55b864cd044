"""Replays from the dashboard: checked at once, run by the task with its progress, kept in Redis."""

import json

import pytest

from emulator.replay.history import HistoryError
from fleet.replay import runs as replays

CSV = b"node,start,end,class,description\nn1,0.1,0.5,GPU,GPU Lost\nn2,0.2,1,NIC,NIC Lost\n"


def test_a_replay_runs_to_its_figures(clean_redis):
    rid = replays.start("h.csv", CSV, nodes=4, devices_per_node=2, jobs="1x2")
    assert replays.status(rid) == {"state": "queued", "progress": 0.0}
    replays.run(rid)
    done = replays.status(rid)
    assert done["state"] == "done" and done["progress"] == 1.0
    assert list(done["summary"]["policies"]) == ["asicmon", "none", "reboot"]
    assert done["summary"]["policies"]["asicmon"]["repairs"] == {"reboot_host: cured": 1}
    assert [c["id"] for c in done["charts"]] == ["service", "ettr", "losses"]
    assert clean_redis.get(replays._key(rid, "history")) is None  # the upload is not kept once replayed


@pytest.mark.parametrize("name, data, kw, error, message", [
    ("h.csv", b"n1,0\n", {}, HistoryError, "h.csv:1: expected node,start,end"),
    ("h.json", b"[{", {}, HistoryError, "h.json:1:3"),
    ("h.csv", b"\xff\xfe", {}, replays.ReplayError, "not UTF-8"),
    ("h.csv", CSV, {"nodes": 1}, replays.ReplayError, "names 2 servers, the fleet has 1"),
    ("h.csv", CSV, {"nodes": 4, "jobs": "9"}, replays.ReplayError, "jobs need 9 servers"),
    ("h.csv", CSV, {"nodes": 0}, replays.ReplayError, "servers must be"),
    ("h.csv", b"x" * (replays.MAX_BYTES + 1), {}, replays.ReplayError, "at most"),
])
def test_bad_uploads_are_refused_before_anything_is_kept(clean_redis, name, data, kw, error, message):
    with pytest.raises(error, match=message):
        replays.start(name, data, **kw)
    assert not list(clean_redis.scan_iter(replays._key("*", "*")))


def test_an_expired_history_fails_the_run_with_why(clean_redis):
    replays.run("0" * 32)
    assert replays.status("0" * 32) == {"state": "failed", "progress": 0.0, "error": "the replay's history expired"}


def test_progress_is_written_before_each_policy(clean_redis, monkeypatch):
    seen = []
    real = replays.replay

    def watch(faults, s, policies):
        seen.append((policies[0], replays.status(rid)["progress"]))
        return real(faults, s, policies)

    rid = replays.start("h.csv", CSV, nodes=4, jobs="1")
    monkeypatch.setattr(replays, "replay", watch)
    replays.run(rid)
    assert seen == [("asicmon", 0.0), ("none", 0.25), ("reboot", 0.5)]
    assert json.loads(clean_redis.get(replays._key(rid, "status")))["state"] == "done"
