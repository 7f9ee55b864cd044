"""A rung's command: an argument list (never a shell), a minimal environment, and what is
stored of its command line with the secrets masked. (The commands run by an agent on its
host's devices: tests/fleet/agent/test_agent_rung_commands.py.)"""

from types import SimpleNamespace

import pytest

from fleet.driver_errors.host_commands import argv, masked, masked_text, rung_env


@pytest.mark.parametrize(("command", "stored"), [
    ("requeue --token abc123 --job 7", "requeue --token '***' --job 7"),
    ("requeue --api-key=abc123 --job 7", "requeue '--api-key=***' --job 7"),
    ("login -u ops --password hunter2", "login -u ops --password '***'"),
    ("tool --client-secret s3cr3t", "tool --client-secret '***'"),
    ("curl -H 'Authorization: Bearer eyJhbGci' https://sched/requeue",
     "curl -H 'Authorization: ***' https://sched/requeue"),
    ("curl https://ops:hunter2@sched.example/requeue", "curl 'https://***@sched.example/requeue'"),
    ("curl 'https://sched/requeue?job=7&token=abc123'", "curl 'https://sched/requeue?job=7&token=***'"),
    ("env API_TOKEN=abc123 requeue", "env 'API_TOKEN=***' requeue"),
    ("sudo systemctl reboot", "sudo systemctl reboot"),  # nothing secret: as it is
    (["requeue", "--token", "abc123"], "requeue --token '***'"),  # a list as given
    # Found here: the secret-bearing flags and headers of the tools a rung command calls.
    ("ipmitool -I lanplus -H bmc-7 -U admin -P hunter2 chassis power cycle",
     "ipmitool -I lanplus -H bmc-7 -U admin -P '***' chassis power cycle"),
    ("curl -u ops:hunter2 https://sched/requeue", "curl -u 'ops:***' https://sched/requeue"),
    ("curl --user ops:hunter2 https://sched/requeue", "curl --user 'ops:***' https://sched/requeue"),
    ("sshpass -p hunter2 ssh root@node-7 reboot", "sshpass -p '***' ssh root@node-7 reboot"),
    ("curl -H 'X-Auth-Token: abc123' https://bmc/redfish", "curl -H 'X-Auth-Token: ***' https://bmc/redfish"),
    ("redfishtool --pass abc123 Systems reset", "redfishtool --pass '***' Systems reset"),
    ("ssh -p 2222 root@node-7 reboot", "ssh -p 2222 root@node-7 reboot"),  # ssh's -p is a port
])
def test_the_stored_command_line_has_its_secrets_masked(command, stored):
    assert masked(command) == stored
    for secret in ("abc123", "hunter2", "s3cr3t", "eyJhbGci"):
        assert secret not in masked(command)


def test_a_command_line_that_cannot_be_split_still_hides_url_credentials():
    assert masked("curl 'https://ops:hunter2@sched/x") == "curl 'https://***@sched/x"


def test_output_lines_have_their_secrets_masked():
    line = "posted to https://ops:hunter2@sched/x with Authorization: Bearer abc; token=xyz ok"
    assert "hunter2" not in masked_text(line) and "abc" not in masked_text(line)
    assert masked_text("requeued job 7 (token=xyz)") == "requeued job 7 (token=***"


def test_a_string_is_split_into_arguments_and_a_list_kept():
    assert argv("dcgmi diag -r 1") == ["dcgmi", "diag", "-r", "1"]
    assert argv("load-test --name 'a b'; rm -rf /") == ["load-test", "--name", "a b;", "rm", "-rf", "/"]
    assert argv(("dcgmi", "diag", "-r", 1)) == ["dcgmi", "diag", "-r", "1"]


def test_the_environment_is_path_lang_and_the_device_only(monkeypatch):
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    monkeypatch.setenv("LANG", "C.UTF-8")
    for name in ("DATABASE_URL", "SECRET_KEY", "OTLP_TOKEN", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.setenv(name, "secret")
    device = SimpleNamespace(serial="nvml:host-07:0", workload="job-9", host=SimpleNamespace(name="host-07"))
    assert rung_env("reboot_host", device) == {
        "PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "ASICMON_RUNG": "reboot_host",
        "ASICMON_DEVICE_SERIAL": "nvml:host-07:0", "ASICMON_HOST": "host-07", "ASICMON_WORKLOAD": "job-9"}
