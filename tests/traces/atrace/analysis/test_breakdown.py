"""Operator breakdown: time per operator type on each side, self time without the nested
slices, drill-down by instance and by argument, a window and a side of the trace."""

from __future__ import annotations

import pytest

from traces.atrace import Kind, TraceBuilder, operator_breakdown

US = 1000


def _trace():
    """Two aten::linear (30 and 50 µs), each holding an aten::mm (20 and 40 µs) with its
    shapes; two kernels on the device (10 and 30 µs)."""
    b = TraceBuilder()
    host = b.track(1, 1)
    dev = b.track(0, 7, is_device=True, device=0, stream=7)
    b.add("aten::linear", 0, 30 * US, host, kind=Kind.HOST_OP)
    b.add(
        "aten::mm", 5 * US, 20 * US, host, kind=Kind.HOST_OP, args={"Input Dims": [[8, 8], [8, 8]]}
    )
    b.add("aten::linear", 100 * US, 50 * US, host, kind=Kind.HOST_OP)
    b.add(
        "aten::mm",
        105 * US,
        40 * US,
        host,
        kind=Kind.HOST_OP,
        args={"Input Dims": [[64, 64], [64, 64]]},
    )
    b.add("gemm", 10 * US, 10 * US, dev, kind=Kind.KERNEL)
    b.add("gemm", 110 * US, 30 * US, dev, kind=Kind.KERNEL)
    return b.build()


def test_rows_hold_totals_self_times_and_shares_per_operator_type():
    bd = operator_breakdown(_trace())
    host = {r["op"]: r for r in bd.rows("host")}
    assert host["aten::linear"]["count"] == 2 and host["aten::linear"]["total_us"] == 80.0
    assert host["aten::linear"]["self_us"] == 20.0  # 80 µs less the 60 µs of its aten::mm
    assert (
        host["aten::mm"]["self_us"] == host["aten::mm"]["total_us"] == 60.0
        and host["aten::mm"]["max_us"] == 40.0
    )
    (gemm,) = bd.rows("device")
    assert (gemm["op"], gemm["kind"], gemm["total_us"], gemm["mean_us"]) == (
        "gemm",
        "kernel",
        40.0,
        20.0,
    )
    assert gemm["share"] == round(40 / 150, 6)  # of the trace's 150 µs
    assert bd.busy_ns == {"host": 80 * US, "device": 40 * US}
    assert [r["op"] for r in bd.rows()] == ["aten::linear", "aten::mm", "gemm"]  # by total time


def test_drill_down_lists_instances_longest_first_and_splits_by_an_argument():
    bd = operator_breakdown(_trace())
    assert [i["dur_us"] for i in bd.instances("aten::mm")] == [40.0, 20.0]
    by_shape = bd.group_by_arg("aten::mm", "Input Dims")
    assert [(r["value"], r["count"], r["total_us"]) for r in by_shape] == [
        ([[64, 64], [64, 64]], 1, 40.0),
        ([[8, 8], [8, 8]], 1, 20.0),
    ]


def test_a_window_and_a_side_narrow_the_breakdown():
    bd = operator_breakdown(_trace(), window=(0, 100 * US))
    assert {r["op"]: r["count"] for r in bd.rows()} == {"aten::linear": 1, "aten::mm": 1, "gemm": 1}
    assert bd.span_ns == 100 * US
    device_only = operator_breakdown(_trace(), side="device")
    assert {r["side"] for r in device_only.rows()} == {"device"} and set(device_only.busy_ns) == {
        "device"
    }
    with pytest.raises(ValueError, match="side must be one of"):
        operator_breakdown(_trace(), side="gpu")
