"""Poll shards: every host belongs to exactly one, spread by its id."""

from fleet.polling.sharding import shard_of_host


def test_hosts_spread_over_the_configured_shards_by_id(settings):
    settings.POLL_SHARDS = 3
    assert [shard_of_host(host_id) for host_id in range(1, 7)] == [1, 2, 0, 1, 2, 0]
    settings.POLL_SHARDS = 1
    assert {shard_of_host(host_id) for host_id in range(50)} == {0}
