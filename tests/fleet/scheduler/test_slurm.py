"""The Slurm adapter against a real Slurm (one node, eight GPUs declared in gres.conf): a
node read, drained with Asicmon's reason, resumed only from Asicmon's own drain; reasons and
Slurm's host lists as Slurm writes them."""

from __future__ import annotations

import pytest

from fleet.scheduler.slurm import (
    REASON_PREFIX,
    SchedulerError,
    Slurm,
    _indexes,
    _names,
    asicmon_reason,
)

pytestmark = pytest.mark.integration


def test_a_node_is_read_drained_with_a_reason_and_resumed_only_from_asicmons_own_drain(cluster):
    slurm = Slurm(str(cluster.conf))
    cluster.run("scontrol", "update", f"NodeName={cluster.node}", "State=RESUME", check=False)
    assert slurm.node("no-such-node") is None
    assert not slurm.node(cluster.node).drained
    slurm.drain(cluster.node, "GPU-7 drained\nState=RESUME")
    state = slurm.node(cluster.node)
    assert state.drained_by_asicmon and state.reason == "asicmon: GPU-7 drained State=RESUME"
    assert slurm.resume(cluster.node) and not slurm.node(cluster.node).drained
    cluster.run("scontrol", "update", f"NodeName={cluster.node}", "State=DRAIN", "Reason=bad DIMM")
    assert not slurm.resume(cluster.node) and slurm.node(cluster.node).reason == "bad DIMM"
    cluster.run("scontrol", "update", f"NodeName={cluster.node}", "State=RESUME")


def test_a_cluster_that_cannot_answer_is_said_so(tmp_path):
    with pytest.raises(SchedulerError, match="scontrol show node"):
        Slurm(str(tmp_path / "no-slurm.conf"), timeout_s=5).node("vm")


def test_a_reason_is_one_bounded_line_and_host_lists_are_read_as_slurm_writes_them():
    assert asicmon_reason("GPU-1 drained\nState=RESUME") == REASON_PREFIX + "GPU-1 drained State=RESUME"
    assert len(asicmon_reason("x" * 1000)) == 200
    assert _names("gpu[01-04,07],login1", "gpu03") and _names("gpu[01-04,07],login1", "gpu07")
    assert not _names("gpu[01-04]", "gpu05") and _names("gpu[01-04],login1", "login1")
    assert _indexes("0-2,5") == [0, 1, 2, 5]
