"""``python -m emulator replay``: text, JSON, settings and clear errors."""

import json

import pytest

from emulator.__main__ import main
from emulator.replay.cli import parse_jobs, settings_from


def history(tmp_path):
    path = tmp_path / "h.csv"
    path.write_text("node,start,end,class,description\nn1,0.1,0.5,GPU,GPU Lost\nn2,0.2,1,NIC,NIC Lost\n")
    return str(path)


def test_text_and_json(tmp_path, capsys):
    assert main(["replay", history(tmp_path), "--nodes", "4", "--devices-per-node", "2", "--jobs", "2,1"]) == 0
    assert "jobs' ETTR" in capsys.readouterr().out
    assert main(["replay", history(tmp_path), "--nodes", "4", "--jobs", "1x2", "--json", "--policies", "asicmon"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert list(data["policies"]) == ["asicmon"] and data["settings"]["jobs"] == [1, 1]
    assert data["policies"]["asicmon"]["repairs"] == {"reboot_host: cured": 1}


def test_settings_file(tmp_path):
    path = tmp_path / "s.json"
    path.write_text(json.dumps({"person_delay_s": 60, "jobs": [2]}))
    s = settings_from(str(path), nodes=3)
    assert (s.person_delay_s, s.jobs, s.nodes) == (60, (2,), 3)
    path.write_text(json.dumps({"colour": 1}))
    with pytest.raises(ValueError, match="unknown settings colour"):
        settings_from(str(path))


@pytest.mark.parametrize("args, message", [
    (["--jobs", "big"], "--jobs: 'big' is not SIZE"),
    (["--nodes", "1"], "names 2 servers, the fleet has 1"),
    (["--nodes", "4", "--jobs", "5"], "jobs need 5 servers"),
    (["--policies", "pray"], "no policy 'pray'"),
    (["--days", "3"], "--days goes with --rates"),
])
def test_errors_are_clear_and_exit_2(tmp_path, capsys, args, message):
    assert main(["replay", history(tmp_path), *args]) == 2
    assert message in capsys.readouterr().err


def test_parse_jobs():
    assert parse_jobs("128,8x3") == (128, 8, 8, 8)
    with pytest.raises(ValueError, match="at least 1"):
        parse_jobs("0")


def test_rates_instead_of_a_history(capsys):
    assert main(["replay", "--rates", "llama3", "--nodes", "2080", "--jobs", "2048", "--json",
                 "--policies", "asicmon"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["settings"]["days"] == 54 and 377 <= data["settings"]["faults"] <= 461
    assert main(["replay", "--rates", "llama3", "h.csv"]) == 2
    assert "either HISTORY or --rates" in capsys.readouterr().err
