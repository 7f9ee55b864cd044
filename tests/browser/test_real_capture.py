"""Click to capture a real PyTorch process, and a real job: two agents (real Celery workers
on their own queues, each serving Kineto's protocol from its own socket folder, on machines
without accelerators), a trace worker, Daphne and a real Chromium. An operator opens the
machine's page from the fleet page, clicks Capture on a training loop and reads its operator
breakdown; then captures a torchrun job (gloo) whose two ranks poll the two agents, as one
job, from the same page."""

from __future__ import annotations

import gzip
import sys
import tempfile
import time

import orjson
import pytest
from selenium.common.exceptions import TimeoutException
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

from fleet.models import HostProcess
from tests.support.browser import sign_in
from tests.support.processes import Service
from tests.support.pytorch_jobs import torchrun_job, training_process, wait_until
from traces.choices import JobStatus, RankStatus
from traces.models import Job, Trace
from traces.store.files import TraceFiles

pytestmark = [pytest.mark.browser, pytest.mark.integration, pytest.mark.django_db(transaction=True)]


class _Agents(dict):
    """The agents' socket folders by host name, and their services."""

    def __init__(self, sockets: dict, services: dict):
        super().__init__(sockets)
        self.services = services


def until(wait, condition, what: str, agents):
    """``wait.until(condition)``; on a timeout, what the page, the rows and the agents said."""
    try:
        return wait.until(condition)
    except TimeoutException:
        status = wait._driver.find_elements(By.ID, "capture-status")
        rows = list(Trace.objects.values_list("pk", "status", "error"))
        said = {name: agent.output()[-3000:] for name, agent in agents.services.items()}
        raise AssertionError(f"{what}: the page says {status[0].text if status else '?'!r}; traces {rows}; "
                             f"agents {said}") from None


@pytest.fixture
def agents(module_trace_stack, trace_stack, tmp_path):
    """The agents of node-a and node-b (no accelerator: an empty hwmon folder, no spec)."""
    started = {}
    try:
        for name in ("node-a", "node-b"):
            socket_dir = tempfile.mkdtemp(prefix="kineto-")
            (tmp_path / name / "hwmon").mkdir(parents=True)
            env = {**module_trace_stack.env, "AGENT_HOST": name, "AGENT_KINETO": socket_dir, "POLL_INTERVAL": "1",
                   "HWMON_ROOT": str(tmp_path / name / "hwmon"), "ASIMOV_SPEC_DIRS": "", "AGENT_KERNEL_LOG": "",
                   "AGENT_STATE_DIR": str(tmp_path / name / "state")}
            agent = Service(f"agent-{name}", [sys.executable, "-m", "fleet.agent"], env)
            started[name] = (agent, socket_dir)
        for agent, _ in started.values():
            agent.wait_for_line("ready.", timeout=90)
        yield _Agents({name: socket_dir for name, (_, socket_dir) in started.items()},
                      {name: agent for name, (agent, _) in started.items()})
    finally:
        for agent, _ in started.values():
            agent.stop()


def test_operator_captures_a_real_process_and_a_real_job_from_the_machines_page(browser, trace_stack, agents, operator,
                                                                                  tmp_path):
    wait = WebDriverWait(browser, 90, poll_frequency=0.2)
    sign_in(browser, trace_stack, "otto")
    listed = lambda pid: HostProcess.objects.filter(host__name="node-a", pid=pid).exists()  # noqa: E731
    with training_process(agents["node-a"], tmp_path, seconds=240, polled=listed) as loop:
        browser.get(f"{trace_stack}/")
        browser.find_element(By.CSS_SELECTOR, '[data-agent-host="node-a"]').click()
        wait.until(lambda b: b.find_elements(By.CSS_SELECTOR, f'#host-processes tr[data-pid="{loop.pid}"]'))
        assert browser.find_element(By.CSS_SELECTOR, f'input[name="pid"][value="{loop.pid}"]').is_selected()
        duration = browser.find_element(By.ID, "capture-duration")
        duration.clear()
        duration.send_keys("2")
        clicked = time.monotonic()
        browser.find_element(By.ID, "capture-button").click()

        # The stages in words, then the trace's page with the operator breakdown.
        said = set()

        def stage_said(b):
            said.add(b.find_element(By.ID, "capture-status").text)
            return any(f"process {loop.pid}" in text for text in said) or "/traces/" in b.current_url

        until(wait, stage_said, "the capture's stage was never said", agents)
        until(wait, lambda b: "/traces/" in b.current_url, "the trace's page never opened", agents)
        wait.until(lambda b: int(b.find_element(By.ID, "breakdown-table").get_attribute("data-rows") or 0) > 0)
        shown = time.monotonic() - clicked
        ops = [r.get_attribute("data-op") for r in browser.find_elements(By.CSS_SELECTOR, "#breakdown-table tbody tr")]
        assert "aten::addmm" in ops, ops
        assert browser.find_element(By.ID, "trace-status").text == "ready"
        print(f"click -> operator breakdown of a 2 s capture of a real process: {shown:.1f} s")

    # A torchrun job whose rank 0 polls node-a's agent and rank 1 node-b's.
    with torchrun_job(tmp_path, [agents["node-a"], agents["node-b"]], "run-42", env={"SLOW_RANK": "1", "SLOW_S": "0.03"}):
        wait_until(lambda: HostProcess.objects.filter(role="rank", job__TORCHELASTIC_RUN_ID="run-42").count() == 2, 60,
                   "the job's two ranks never polled their agents")
        browser.get(f"{trace_stack}/")
        browser.find_element(By.CSS_SELECTOR, '[data-agent-host="node-b"]').click()
        button = wait.until(lambda b: b.find_element(By.CSS_SELECTOR, '.capture-job-button[data-run-id="run-42"]'))
        button.click()
        wait.until(lambda b: "/jobs/" in b.current_url)
        until(wait, lambda b: b.find_element(By.ID, "job-status").text.lower() in ("ready", "failed"),
              "the job never ended", agents)
        job = Job.objects.get()
        assert job.status == JobStatus.READY, job.error
        assert job.straggler_rank == 1 and job.summary["straggler"]["host"] == "node-b"  # it sleeps 30 ms a step more
        assert job.summary["collectives"] > 10 and 20_000 < job.summary["skew_median_us"] < 60_000
        ranks = list(job.ranks.select_related("trace"))
        assert [(r.rank, r.host_name, r.status) for r in ranks] == [(0, "node-a", RankStatus.READY),
                                                                    (1, "node-b", RankStatus.READY)]
        for r in ranks:
            raw = gzip.decompress(TraceFiles(r.trace_id).storage.open(r.trace.raw_file, "rb").read())
            assert orjson.loads(raw)["distributedInfo"] | {"backend": "gloo"} == {"rank": r.rank, "world_size": 2,
                                                                               "backend": "gloo"}
            assert r.trace.capture_started_at and r.trace.capture_ended_at
