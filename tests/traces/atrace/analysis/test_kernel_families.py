"""The per-family tables of a kernel model: to JSON and back, and what a bad table is refused for."""

from __future__ import annotations

import orjson
import pytest

from traces.atrace.analysis.kernel_families import Detail, stem


def test_a_detail_round_trips_through_json():
    detail = Detail(curves={"pytorch:k": ([1.0, 2.5], [0.1, -0.2])}, launches={"pytorch:k|[1, 1, 1]|[128, 1, 1]": 3.25},
                    medians={"pytorch:k": 4.0}, groups={"bandwidth": {"latency_us": 2.0, "gbps": 900.0}},
                    by_threads={"cublas:g": ([5.0, 9.0], [1.0, 3.0])}, stems={"cudnn:fft2d_r2c_32x32": 64.0},
                    tile_rates={"conv": 4.5e-5})
    again = Detail.from_dict(orjson.loads(orjson.dumps(detail.to_dict())))
    assert again == detail


@pytest.mark.parametrize(("data", "message"), [
    ([], "expected"),
    ({"curves": {"f": ["x", "y"]}}, "not numbers"),
    ({"medians": {"f": "slow"}}, "not numbers"),
    ({"groups": {"compute": {"tflops": 3}}}, "needs a latency_us"),
    ({"curves": {"f": [[2.0, 1.0], [0.0, 0.0]]}}, "increasing"),
    ({"by_threads": {"f": [[1.0, 2.0], [0.0]]}}, "as many x as y"),
    ({"curves": {"f": [[], []]}}, "increasing"),
])
def test_a_bad_table_is_refused_saying_what_is_wrong(data, message):
    with pytest.raises(ValueError, match=message):
        Detail.from_dict(data)


def test_a_template_s_families_share_a_stem():
    assert stem("cudnn:fft2d_r2c_32x32<float, false, 5u, true>") == stem("cudnn:fft2d_r2c_32x32<float, false, 0u, false>")
    assert stem("cudnn:fft2d_r2c_32x32<float>") != stem("cudnn:fft2d_c2r_32x32<float>")
    assert stem("cublas:ampere_sgemm_32x32_sliced1x4_tn") == "cublas:ampere_sgemm_32x32_sliced1x4_tn"
