from __future__ import annotations

import pytest

from emulator.workloads.graph import WORKLOADS, op_time_us, workload_for


@pytest.mark.parametrize("name", ["recommendation", "transformer", "video_pipeline"])
def test_workloads_are_dags_in_topological_order(name):
    w = WORKLOADS[name]
    assert w.name == name
    for i, node in enumerate(w.nodes):
        assert node.id == i
        assert all(0 <= d < i for d in node.deps)
        assert node.kind in {"host", "compute", "dma"}
        assert node.flops >= 0 and node.bytes > 0
        assert node.shapes and all(all(x > 0 for x in s) for s in node.shapes)
    assert sum(1 for n in w.nodes if n.kind == "compute") >= 5


def test_real_model_shapes():
    rec = WORKLOADS["recommendation"]
    assert sum(1 for n in rec.nodes if n.op_type == "embedding_bag") == 26
    enc = WORKLOADS["transformer"]
    ffn = next(n for n in enc.nodes if n.name == "ffn.intermediate")
    assert ffn.shapes[1] == [768, 3072]
    video = WORKLOADS["video_pipeline"]
    assert [n.op_type for n in video.nodes[:5]] == [
        "demux",
        "memcpy",
        "decode",
        "resize",
        "normalize",
    ]


def test_same_model_runs_at_different_speeds_on_types_and_versions():
    node = next(n for n in WORKLOADS["transformer"].nodes if n.op_type == "softmax")
    times = {t: op_time_us(node, t) for t in ("video", "inference", "gpu")}
    assert len(set(times.values())) == 3
    assert op_time_us(node, "gpu", "1.0") > op_time_us(node, "gpu", "2.0")
    assert op_time_us(node, "gpu", slowdown=2.0) == pytest.approx(2 * op_time_us(node, "gpu"))
    emb = next(n for n in WORKLOADS["recommendation"].nodes if n.op_type == "embedding_bag")
    assert op_time_us(emb, "inference", "1.5") > op_time_us(emb, "inference", "2.1")


def test_workload_for_each_type():
    assert workload_for("video").name == "video_pipeline"
    assert workload_for("inference").name == "recommendation"
    assert workload_for("gpu").name == "transformer"
