"""Settings read from the environment: each helper takes one kind of value, falls back to its
default when the variable is unset or empty, and stops the start with ImproperlyConfigured,
naming the variable, on a value it cannot take."""

import stat
from ipaddress import ip_network

import pytest
from django.core.exceptions import ImproperlyConfigured

from dashboard.env import (
    env_bool,
    env_float,
    env_host_name,
    env_int,
    env_json_object,
    env_list,
    env_networks,
    env_paths,
    env_rate,
    parse_rate,
    secret_key_file,
)


def test_rates_are_read_as_count_per_period_or_off(monkeypatch):
    assert parse_rate("600/min") == (600, 60)
    assert parse_rate(" 5/S ") == (5, 1)
    assert parse_rate("100/hour") == (100, 3600) and parse_rate("1/day") == (1, 86400)
    assert parse_rate("off") is None
    for bad in ("600", "x/min", "0/min", "-1/min", "10/week", ""):
        with pytest.raises(ValueError, match="is not a rate"):
            parse_rate(bad)
    monkeypatch.setenv("API_THROTTLE_USER", "lots")
    with pytest.raises(ImproperlyConfigured, match="API_THROTTLE_USER: 'lots' is not a rate"):
        env_rate("API_THROTTLE_USER", "1200/min")
    monkeypatch.delenv("API_THROTTLE_USER")
    assert env_rate("API_THROTTLE_USER", "1200/min") == "1200/min"


def test_trusted_proxies_are_addresses_or_networks_and_a_bad_one_stops_start_up(monkeypatch):
    monkeypatch.setenv("TRUSTED_PROXIES", "127.0.0.1, 10.0.0.0/8,::1")
    assert env_networks("TRUSTED_PROXIES") == (
        ip_network("127.0.0.1/32"),
        ip_network("10.0.0.0/8"),
        ip_network("::1/128"),
    )
    monkeypatch.setenv("TRUSTED_PROXIES", "10.0.0.0/8,proxy.internal")
    with pytest.raises(
        ImproperlyConfigured, match="'proxy.internal' is not an IP address or network"
    ):
        env_networks("TRUSTED_PROXIES")
    monkeypatch.delenv("TRUSTED_PROXIES")
    assert env_networks("TRUSTED_PROXIES") == ()


def test_booleans_are_the_usual_words_and_anything_else_is_refused(monkeypatch):
    for word, value in [
        ("1", True),
        (" Yes ", True),
        ("on", True),
        ("FALSE", False),
        ("no", False),
        ("0", False),
    ]:
        monkeypatch.setenv("ASICMON_FLAG", word)
        assert env_bool("ASICMON_FLAG", not value) is value
    monkeypatch.setenv("ASICMON_FLAG", "")
    assert env_bool("ASICMON_FLAG", True) is True
    monkeypatch.setenv("ASICMON_FLAG", "maybe")
    with pytest.raises(ImproperlyConfigured, match="ASICMON_FLAG='maybe' is not a boolean"):
        env_bool("ASICMON_FLAG", False)


def test_numbers_are_checked_against_their_minimum(monkeypatch):
    monkeypatch.delenv("ASICMON_N", raising=False)
    assert env_int("ASICMON_N", 7) == 7 and env_float("ASICMON_N", 0.5) == 0.5
    monkeypatch.setenv("ASICMON_N", "12")
    assert env_int("ASICMON_N", 7, minimum=12) == 12 and env_float("ASICMON_N", 0.5) == 12.0
    monkeypatch.setenv("ASICMON_N", "2.5")
    assert env_float("ASICMON_N", 0.5, minimum=1) == 2.5
    with pytest.raises(ImproperlyConfigured, match="ASICMON_N='2.5' is not an integer"):
        env_int("ASICMON_N", 7)
    monkeypatch.setenv("ASICMON_N", "-1")
    with pytest.raises(ImproperlyConfigured, match="ASICMON_N=-1 must be at least 0"):
        env_int("ASICMON_N", 7)
    with pytest.raises(ImproperlyConfigured, match="ASICMON_N=-1.0 must be at least 0.0"):
        env_float("ASICMON_N", 0.5)
    monkeypatch.setenv("ASICMON_N", "lots")
    with pytest.raises(ImproperlyConfigured, match="ASICMON_N='lots' is not a number"):
        env_float("ASICMON_N", 0.5)


def test_lists_paths_and_json_objects(monkeypatch):
    monkeypatch.setenv("ASICMON_LIST", " a, ,b ,")
    assert env_list("ASICMON_LIST", ["x"]) == ["a", "b"]
    monkeypatch.setenv("ASICMON_LIST", "  ")
    assert env_list("ASICMON_LIST", ["x"]) == ["x"]
    monkeypatch.setenv("ASICMON_PATHS", "/opt/specs::/srv/more")
    assert [str(p) for p in env_paths("ASICMON_PATHS")] == ["/opt/specs", "/srv/more"]
    monkeypatch.setenv("ASICMON_JSON", ' {"leak_critical_s": 600} ')
    assert env_json_object("ASICMON_JSON") == {"leak_critical_s": 600}
    monkeypatch.setenv("ASICMON_JSON", "[600]")
    with pytest.raises(ImproperlyConfigured, match="ASICMON_JSON must be a JSON object"):
        env_json_object("ASICMON_JSON")
    monkeypatch.setenv("ASICMON_JSON", "{leak: 600}")
    with pytest.raises(ImproperlyConfigured, match="ASICMON_JSON is not valid JSON"):
        env_json_object("ASICMON_JSON")


def test_a_default_host_name_is_tidied_and_a_given_one_must_be_valid(monkeypatch):
    monkeypatch.delenv("ASICMON_HOST", raising=False)
    assert env_host_name("ASICMON_HOST", "my laptop (2)") == "my-laptop--2-"
    assert env_host_name("ASICMON_HOST", "") == "localhost"
    monkeypatch.setenv("ASICMON_HOST", "node-07.rack_3")
    assert env_host_name("ASICMON_HOST", "x") == "node-07.rack_3"
    for bad in ("-node", "node 7", "n" * 129):
        monkeypatch.setenv("ASICMON_HOST", bad)
        with pytest.raises(ImproperlyConfigured, match="is not a host name"):
            env_host_name("ASICMON_HOST", "x")


def test_the_secret_key_is_made_once_readable_by_its_owner_only(tmp_path):
    path = tmp_path / "keys" / "secret_key"
    key = secret_key_file(path)
    assert len(key) >= 50 and secret_key_file(path) == key
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert secret_key_file(tmp_path / "other") != key
