import pytest

from tests.support.slurm import slurm_cluster
from tests.support.tiers import starts_processes


@pytest.fixture(scope="session")
@starts_processes
def cluster(tmp_path_factory):
    """A real one-node Slurm cluster (tests/support/slurm.py), for this folder's tests."""
    with slurm_cluster(tmp_path_factory.mktemp("slurm")) as running:
        yield running
