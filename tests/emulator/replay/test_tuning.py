"""Tuning: a grid of settings over one history, the best by ETTR and by false pulls."""

import json

import pytest

from emulator.__main__ import main
from emulator.replay.engine import Settings
from emulator.replay.history import Fault
from emulator.replay.tuning import best, text, tune

XID = "GPU/GPU xid Error"  # Xid 13: a restart cures it; it comes back, the ladder climbs


def test_the_attempt_budget_changes_what_is_pulled():
    faults = [Fault("n1", t, t + 43200, XID) for t in (1000.0, 5000.0, 9000.0)]
    base = Settings(nodes=1, devices_per_node=2, jobs=(1,), horizon_s=20000.0)
    rows = tune(faults, base, {"max_attempts": [1, 3]})
    assert [(r["settings"], r["pulled_devices"]) for r in rows] == [({"max_attempts": 1}, 1), ({"max_attempts": 3}, 0)]
    assert rows[1]["ettr"] > rows[0]["ettr"]  # a pull waits for a person and the history
    assert best(rows)["by_ettr"]["settings"] == {"max_attempts": 3}
    assert "best by ETTR: {'max_attempts': 3}" in text(rows)


def test_bad_grids_are_refused():
    with pytest.raises(ValueError, match="unknown settings colour"):
        tune([], Settings(), {"colour": [1]})
    with pytest.raises(ValueError, match="non-empty list"):
        tune([], Settings(), {"max_attempts": []})


def test_cli_grid(tmp_path, capsys):
    hist = tmp_path / "h.csv"
    hist.write_text("n1,0.01,0.02,GPU,GPU xid Error\n")
    grid = tmp_path / "g.json"
    grid.write_text(json.dumps({"max_attempts": [1, 2], "person_delay_s": [60, 600]}))
    assert main(["replay", str(hist), "--nodes", "2", "--jobs", "1", "--grid", str(grid), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert len(data["rows"]) == 4 and set(data["best"]) == {"by_ettr", "by_false_pulls"}
    grid.write_text("[1]")
    assert main(["replay", str(hist), "--nodes", "2", "--grid", str(grid)]) == 2
    assert "expected {setting: [values]}" in capsys.readouterr().err
