"""Histories: the shared trace's JSON and a plain CSV, with clear errors."""

import json

import pytest

from emulator.replay.history import DAY, HistoryError, load_history, parse_csv, parse_json

SHARED = "/work/shared/data/fault-traces/infinitehbd_fault_trace.json"


def ev(node, t, typ, cls="GPU", desc="GPU Lost"):
    return {"node_id": node, "event_time": t, "event_type": typ,
            "fault_type": {"Level": "Hardware Failure", "Class": cls, "Desc": desc}}


def test_json_pairs_starts_with_ends_per_node_and_class():
    faults = parse_json([ev("a", 1, "fault_start"), ev("b", 1.5, "fault_start", "NIC", "NIC Lost"),
                         ev("a", 2, "fault_end"), ev("b", 3, "fault_end", "NIC", "NIC Lost")])
    assert [(f.node, f.start_s / DAY, f.end_s / DAY, f.kind) for f in faults] == [
        ("a", 1, 2, "GPU/GPU Lost"), ("b", 1.5, 3, "NIC/NIC Lost")]


@pytest.mark.parametrize("events, message", [
    ([ev("a", 1, "fault_end")], "event 0: fault_end of GPU/GPU Lost on a with no start"),
    ([ev("a", 1, "fault_start")], "1 faults never end"),
    ([ev("a", 2, "fault_start"), ev("a", 1, "fault_end")], "event 1: ends before it starts"),
    ([{"node_id": "a"}], "event 0: missing or bad field"),
])
def test_json_errors_say_where(events, message):
    with pytest.raises(HistoryError, match=message):
        parse_json(events)


def test_csv_in_days_or_iso_dates_with_line_numbers_in_errors():
    faults = parse_csv("node,start,end,class,description\nn1,0.5,1,GPU,GPU Lost\nn2,1,2,NIC\n")
    assert [(f.node, f.start_s, f.kind) for f in faults] == [("n1", 0.5 * DAY, "GPU/GPU Lost"), ("n2", DAY, "NIC/")]
    iso = parse_csv("n1,2024-01-01T00:00,2024-01-02T12:00,GPU,GPU Lost\n")
    assert iso[0].end_s == 1.5 * DAY
    with pytest.raises(HistoryError, match="history:3: expected node,start,end"):
        parse_csv("node,start,end,class\nn1,0,1,GPU\nn2,0\n")
    with pytest.raises(HistoryError, match="history:1: start and end must be days or ISO dates"):
        parse_csv("n1,soon,1,GPU\n")


def test_files_bad_json_and_missing(tmp_path):
    bad = tmp_path / "h.json"
    bad.write_text('[{"node_id": }]')
    with pytest.raises(HistoryError, match=r"h.json:1:14"):
        load_history(bad)
    with pytest.raises(HistoryError, match="No such file"):
        load_history(tmp_path / "none.json")
    good = tmp_path / "h.csv"
    good.write_text("n1,0,1,GPU,GPU Lost\n")
    assert len(load_history(good)) == 1
    bad.write_text(json.dumps([ev("a", 0, "fault_start"), ev("a", 1, "fault_end")]))
    assert load_history(bad)[0].end_s == DAY


def test_the_shared_history_reads_as_its_readme_counts():
    faults = load_history(SHARED)
    assert len(faults) == 584 and len({f.node for f in faults}) == 231
    assert round(max(f.end_s for f in faults) / DAY, 2) == 348.98
