"""The process's Redis client and the prefix that keeps every key of this installation apart."""

from fleet.redis import get_redis, key


def test_keys_are_prefixed_with_the_installation_s_prefix(settings):
    settings.REDIS_KEY_PREFIX = "asicmon-x"
    assert key("snapshot", "GPU-1") == "asicmon-x:snapshot:GPU-1"
    assert key() == "asicmon-x"


def test_the_client_is_made_once_per_process_from_redis_url(settings):
    client = get_redis()
    assert get_redis() is client
    assert client.connection_pool.connection_kwargs["socket_timeout"] == 5
