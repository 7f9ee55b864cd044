import pytest

from tests.support.hwmon import write_hwmon_tree


@pytest.fixture
def agent_settings(settings, tmp_path):
    """This process plays the agent of "node-a", whose machine has a generated hwmon tree."""
    from fleet.agent.discovery import forget

    settings.AGENT_HOST = "node-a"
    settings.HWMON_ROOT = write_hwmon_tree(tmp_path / "sys")
    settings.ASIMOV_SPEC_DIRS = []
    settings.AGENT_STATE_DIR = tmp_path / "agent-state"
    forget()
    yield settings
    forget()
