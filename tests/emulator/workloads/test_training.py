"""Training steps for distributed jobs: the forward pass, the backward pass and the optimizer,
with the all-reduces data or tensor parallelism adds between them."""

import pytest

from emulator.workloads.graph import OpNode
from emulator.workloads.training import (
    BACKWARD_FACTOR,
    DDP_BUCKETS,
    GRAD_BYTES,
    TrainingStep,
    parameters,
    training_step,
)


def _layers(step: TrainingStep) -> list[OpNode]:
    """The forward pass's layers with weights."""
    return [n for n in step.nodes if parameters(n) and not n.name.endswith(".backward")]


def test_a_step_is_a_graph_in_order_that_ends_in_the_optimizer():
    for device in ("gpu", "inference", "video"):
        step = training_step(device, "data", 4)
        assert all(d < node.id for node in step.nodes for d in node.deps)
        assert [n.id for n in step.nodes] == list(range(len(step.nodes)))
        last = step.nodes[-1]
        assert last.name == "optimizer.step"
        assert {c.id for c in step.collectives()} <= set(last.deps)  # it waits for every bucket


def test_a_single_rank_reduces_nothing_and_its_backward_pass_does_twice_the_work():
    step = training_step("gpu")
    assert step.collectives() == [] and step.segments() == [step.nodes]
    forward = {n.name: n for n in step.nodes}
    for node in step.nodes:
        if node.name.endswith(".backward"):
            ahead = forward[node.name.removesuffix(".backward")]
            assert node.flops == BACKWARD_FACTOR * ahead.flops


def test_data_parallel_reduces_every_weight_once_in_buckets():
    step = training_step("gpu", "data", 8)
    reductions = step.collectives()
    assert 1 < len(reductions) <= DDP_BUCKETS
    assert {r.name for r in reductions} == {"ddp_allreduce"}
    total = sum(parameters(n) for n in _layers(step))
    assert sum(r.shapes[0][0] for r in reductions) == total
    assert all(r.bytes == r.shapes[0][0] * GRAD_BYTES for r in reductions)
    segments = step.segments()
    assert [seg[-1] for seg in segments[:-1]] == reductions and sum(map(len, segments)) == len(
        step.nodes
    )


def test_tensor_parallel_reduces_each_layer_forward_and_backward_and_shards_its_work():
    one, four = training_step("gpu", "tensor", 1), training_step("gpu", "tensor", 4)
    assert one.collectives() == []
    assert len(four.collectives()) == 2 * len(_layers(four))
    assert {c.name for c in four.collectives()} == {"tp_allreduce"}
    compute = {n.name: n for n in one.nodes if n.kind == "compute"}
    for node in four.nodes:
        if node.kind == "compute" and node.name != "optimizer.step":
            assert node.flops == pytest.approx(compute[node.name].flops / 4)


def test_weights_are_counted_only_for_layers():
    linear = OpNode(0, "fc", "linear", "compute", [[32, 128], [128, 64], [32, 64]], [], 1.0, 1.0)
    conv = OpNode(
        1, "c", "conv2d", "compute", [[1, 3, 8, 8], [16, 3, 3, 3], [1, 16, 8, 8]], [], 1.0, 1.0
    )
    table = OpNode(2, "e", "embedding_bag", "compute", [[32], [1000, 64], [32, 64]], [], 1.0, 1.0)
    assert (parameters(linear), parameters(conv), parameters(table)) == (
        128 * 64,
        16 * 3 * 3 * 3,
        0,
    )


@pytest.mark.parametrize(
    ("parallelism", "world", "message"),
    [
        ("pipeline", 2, "unknown parallelism 'pipeline'; expected one of data, tensor"),
        ("data", 0, "at least one rank"),
    ],
)
def test_a_job_that_cannot_be_split_is_refused(parallelism, world, message):
    with pytest.raises(ValueError, match=message):
        training_step("gpu", parallelism, world)
