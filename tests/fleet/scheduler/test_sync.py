"""Asicmon and a real Slurm (one node, eight GPUs declared in gres.conf): a device out of
service drains its node with a reason that names it, the node comes back only when every
device is back in service and only from Asicmon's own drain, the jobs on each GPU are read
back for the pages, and a job on a GPU being rebooted is requeued where that is allowed."""

from __future__ import annotations

import time

import pytest

from fleet.choices import DeviceState
from fleet.models import Device, Host
from fleet.scheduler import sync
from fleet.scheduler.slurm import Slurm

pytestmark = [pytest.mark.integration, pytest.mark.django_db]


@pytest.fixture
def node(cluster, settings):
    """This machine as a host of the fleet and the node of the cluster (same name), its
    eight GPUs in service, the node idle and resumed, no job left."""
    settings.SCHEDULER, settings.SLURM_CONF, settings.SCHEDULER_REQUEUE = "slurm", str(cluster.conf), False
    cluster.run("scancel", "--full", "-w", cluster.node, check=False)
    cluster.run("scontrol", "update", f"NodeName={cluster.node}", "State=RESUME", check=False)
    host = Host.objects.create(name=cluster.node, agent_queue=f"q.{cluster.node}")
    for k in range(8):
        Device.objects.create(host=host, serial=f"GPU-{k:04d}", device_type="gpu", model="H100", index=k)
    return host


def _wait_running(cluster, job_id: int) -> None:
    deadline = time.monotonic() + 30
    while cluster.job_state(job_id) != "RUNNING":
        assert time.monotonic() < deadline, f"job {job_id} never ran: {cluster.job_state(job_id)}"
        time.sleep(0.3)


def test_a_device_out_of_service_drains_its_node_and_its_return_resumes_it(cluster, node):
    Device.objects.filter(host=node, index=3).update(state=DeviceState.DRAINED)
    began = time.monotonic()
    assert sync.sync_all() == [f"drained {node.name}: GPU-0003 drained"]
    took = time.monotonic() - began
    line = cluster.node_line()
    assert "DRAIN" in line and "Reason=asicmon: GPU-0003 drained" in line
    node.refresh_from_db()
    assert "DRAIN" in node.scheduler_state and node.scheduler_reason == "asicmon: GPU-0003 drained"
    assert sync.sync_all() == []  # drained already: nothing more
    Device.objects.filter(host=node, index=3).update(state=DeviceState.IN_SERVICE)
    assert sync.sync_all() == [f"resumed {node.name}: every device back in service"]
    assert "DRAIN" not in cluster.node_line().split("State=")[1].split()[0]
    print(f"device out of service -> node drained in Slurm: {took * 1000:.0f} ms")


def test_a_drain_someone_else_made_is_never_resumed(cluster, node):
    cluster.run("scontrol", "update", f"NodeName={cluster.node}", "State=DRAIN", "Reason=bad DIMM, ticket 4411")
    assert sync.sync_all() == []
    assert "Reason=bad DIMM, ticket 4411" in cluster.node_line()
    assert not Slurm(str(cluster.conf)).resume(cluster.node)


def test_the_jobs_on_each_gpu_are_read_back_and_shown(cluster, node, client, viewer):
    job = cluster.submit(gpus=2)
    _wait_running(cluster, job)
    sync.sync_all()
    node.refresh_from_db()
    (held,) = node.scheduler_jobs
    assert (held["job_id"], held["user"], held["gpus"], held["requeue"]) == (job, "root", [0, 1], True)
    assert node.scheduler_jobs_on(1) == [held] and node.scheduler_jobs_on(2) == []
    client.force_login(viewer)
    device = Device.objects.get(host=node, index=1)
    assert f"Slurm job {job}" in client.get(f"/devices/{device.id}/").content.decode()
    section = client.get(f"/hosts/{node.id}/").content.decode().split('id="host-scheduler"')[1].split("</section>")[0]
    assert f"Slurm job {job}" in section and "GPUs 0, 1" in section and node.scheduler_state in section


def test_a_job_on_a_gpu_being_rebooted_is_requeued_where_allowed(cluster, node, settings):
    job = cluster.submit(gpus=2)
    _wait_running(cluster, job)
    Device.objects.filter(host=node, index=0).update(state=DeviceState.REBOOTING)
    done = sync.sync_all()
    assert done == [f"drained {node.name}: GPU-0000 rebooting"]  # not allowed: not requeued
    assert cluster.job_state(job) == "RUNNING"
    settings.SCHEDULER_REQUEUE = True
    done = sync.sync_all()
    assert done == [f"requeued job {job} (root) off GPU [0]"]
    assert cluster.job_state(job) != "RUNNING"


def test_a_host_that_is_no_node_is_said_so_and_the_others_go_on(cluster, node):
    other = Host.objects.create(name="not-in-slurm")
    Device.objects.create(host=other, serial="GPU-x", device_type="gpu", index=0, state=DeviceState.DRAINED)
    Device.objects.filter(host=node, index=5).update(state=DeviceState.MAINTENANCE)
    assert sync.sync_all() == [f"drained {node.name}: GPU-0005 in maintenance"]
    other.refresh_from_db()
    assert other.scheduler_error == "not-in-slurm is not a node of the scheduler"
