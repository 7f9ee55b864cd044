"""Histories drawn from published rates: the Llama 3 mix gives about its 419 interruptions."""

import json

import pytest

from emulator.replay.history import DAY, HistoryError
from emulator.replay.rates import draw_history, load_rates


def test_llama3_rates_are_the_papers_counts_over_its_gpu_hours():
    rates = load_rates("llama3")
    assert "Llama 3 Herd of Models" in rates["source"] and rates["days"] == 54
    total = sum(rate for rate, _ in rates["per_gpu_hour"].values()) * 16384 * 54 * 24
    assert total == pytest.approx(419)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_llama3_on_its_own_fleet_draws_within_ten_percent_of_419(seed):
    faults = draw_history(load_rates("llama3"), 2048, 8, 54, seed)
    assert 0.9 * 419 <= len(faults) <= 1.1 * 419
    assert all(0 <= f.start_s < 54 * DAY and f.end_s > f.start_s for f in faults)
    assert faults == draw_history(load_rates("llama3"), 2048, 8, 54, seed)  # the same seed, the same draw


def test_bad_rates_files(tmp_path):
    path = tmp_path / "r.json"
    path.write_text(json.dumps({"gpus": 8, "days": 1, "classes": {"x": {"count": 1}}}))
    with pytest.raises(HistoryError, match="count and repair_h"):
        load_rates(str(path))
    with pytest.raises(HistoryError, match="built-in rates: llama3"):
        load_rates(str(tmp_path / "none.json"))
