"""Starting the agent's parts: Kineto's daemon protocol served, or said why not."""

from __future__ import annotations

import shutil
import socket
import tempfile

import pytest

from fleet.agent import kineto
from fleet.agent.run import start_kineto


@pytest.fixture
def socket_dir():
    folder = tempfile.mkdtemp(prefix="kineto-")
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def test_the_agent_serves_kineto_where_it_is_told(tmp_path, socket_dir, caplog):
    with caplog.at_level("INFO", logger="fleet.agent"):
        daemon = start_kineto(socket_dir, tmp_path / "traces")
    try:
        assert f"KINETO_IPC_SOCKET_DIR={socket_dir}" in caplog.text
        client = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        client.bind(f"{socket_dir}/dynoconfigclient-run")
        client.settimeout(5)
        body = kineto.REQUEST.pack(3, 1, 0) + (321).to_bytes(4, "little")
        client.sendto(kineto.HEADER.pack(len(body), b"req") + body, kineto.socket_address(socket_dir))
        assert kineto.HEADER.unpack_from(client.recv(1024))[1].rstrip(b"\0") == b"req"  # served, in its thread
        assert 321 in daemon.processes
    finally:
        daemon.close()


def test_a_socket_another_daemon_serves_is_said_at_start_not_failed_silently(tmp_path, socket_dir, caplog):
    dynolog = kineto.KinetoDaemon(tmp_path / "theirs", socket_dir=socket_dir)  # stands for dynolog
    try:
        with caplog.at_level("ERROR", logger="fleet.agent"):
            assert start_kineto(socket_dir, tmp_path / "traces") is None
        assert "cannot be captured from Asicmon" in caplog.text and "already serves Kineto" in caplog.text
    finally:
        dynolog.close()


def test_kineto_can_be_turned_off(tmp_path, caplog):
    with caplog.at_level("INFO", logger="fleet.agent"):
        assert start_kineto("off", tmp_path / "traces") is None
    assert "AGENT_KINETO=off" in caplog.text
