"""``python -m fleet.asimov validate``: good specs pass and say what they declare, broken ones
print every error at its file:line:column and exit 1, and nothing of a spec is run."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

from fleet.asimov.interface.validate import validate, validate_paths
from fleet.asimov.loader import SPECS_DIR

ROOT = Path(__file__).resolve().parents[4]
BROKEN = 'device bad\nt: mC = file("t", int)\nstats.temperature_c = convert(t, "C")\nstats.power_w = y\nstats.nope = 1\n'


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "fleet.asimov", "validate", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=60)


def test_every_shipped_spec_validates_from_the_command_line():
    specs = sorted(str(p) for p in SPECS_DIR.glob("*.asimov"))
    result = _run(*specs)
    assert result.returncode == 0, result.stderr
    assert result.stdout.count(": ok (device ") == len(specs)
    assert "gpu.asimov: ok (device gpu, 23 counters, commands: reboot, diagnose, events: nvidia_xid)" in result.stdout


def test_a_broken_spec_prints_each_error_at_line_and_column_and_exits_1(tmp_path):
    bad = tmp_path / "bad.asimov"
    bad.write_text(BROKEN)
    result = _run(str(SPECS_DIR / "gpu.asimov"), str(bad))
    assert result.returncode == 1
    assert f"{bad}:4:17: error: unknown name 'y'" in result.stderr
    assert f"{bad}:5:7: error: unknown counter 'stats.nope'" in result.stderr
    assert "2 errors in 1 of 2 spec(s)" in result.stderr
    assert "gpu.asimov: ok" in result.stdout


def test_json_form(tmp_path):
    bad = tmp_path / "bad.asimov"
    bad.write_text(BROKEN)
    result = _run("--json", str(SPECS_DIR / "video.asimov"), str(bad))
    assert result.returncode == 1
    good, broken = json.loads(result.stdout)
    assert good["ok"] and good["metadata"]["device"] == "video" and good["metadata"]["actions"] == ["reboot"]
    assert not broken["ok"] and broken["metadata"] is None
    assert [(e["line"], e["column"]) for e in broken["errors"]] == [(4, 17), (5, 7)]


def test_a_syntax_error_a_folder_a_missing_file_and_bytes_are_errors_not_tracebacks(tmp_path):
    (tmp_path / "syntax.asimov").write_text("device x\nstats.temperature_c = (1 +\n")
    (tmp_path / "bytes.asimov").write_bytes(b"\xff\xfe\x00device")
    out, err = io.StringIO(), io.StringIO()
    paths = [tmp_path / "syntax.asimov", tmp_path, tmp_path / "missing.asimov", tmp_path / "bytes.asimov"]
    assert validate_paths(paths, as_json=False, out=out, err=err) == 1
    text = err.getvalue()
    assert f"{tmp_path / 'syntax.asimov'}:" in text and "Traceback" not in text
    assert f"{tmp_path / 'missing.asimov'}:1:1: error: no such file" in text
    assert f"{tmp_path / 'bytes.asimov'}:1:1: error: not a text file (UTF-8)" in text
    assert f"{tmp_path}:1:1: error: " in text
    assert "4 errors in 4 of 4 spec(s)" in text


def test_validate_runs_nothing_of_the_spec(tmp_path):
    marker = tmp_path / "ran"
    spec = tmp_path / "x.asimov"
    spec.write_text(f'device x\ndiagnose "touch {marker}"\naction reboot = write("reset", "1")\n'
                    't: mC = file("t", int)\nstats.temperature_c = convert(t, "C")\n')
    result = validate(spec)
    assert result["ok"], result["errors"]
    assert result["metadata"]["diagnose"] == ["touch", str(marker)]
    assert not marker.exists()
