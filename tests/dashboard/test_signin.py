"""Sign-in lock-outs count per user name and client address; behind a proxy the client's
address comes from X-Forwarded-For, believed only from the proxies TRUSTED_PROXIES names."""

from ipaddress import ip_network

import pytest
from django.conf import settings
from django.test import RequestFactory

from dashboard.signin import client_address

pytestmark = pytest.mark.django_db

PROXY = "10.0.0.7"  # what Daphne sees as the peer behind the proxy
MALLORY, ALICE = "203.0.113.5", "198.51.100.7"


@pytest.fixture
def fresh_lockouts(clean_redis):
    """No count left from another test: clean_redis deletes this suite's keys, the cache's
    among them (never cache.clear(), which empties the whole Redis database)."""


def sign_in(client, user, password, *, remote=PROXY, forwarded=None):
    headers = {"HTTP_X_FORWARDED_FOR": forwarded} if forwarded is not None else {}
    return client.post("/accounts/login/", {"username": user.username, "password": password},
                       REMOTE_ADDR=remote, **headers)


def lock_out(client, user, **where):
    for _ in range(settings.SIGNIN_MAX_FAILURES):
        assert sign_in(client, user, "wrong", **where).status_code == 200
    assert sign_in(client, user, "wrong", **where).status_code == 429


def test_behind_a_trusted_proxy_one_client_cannot_lock_a_user_out_for_everyone(client, viewer, settings,
                                                                                fresh_lockouts):
    settings.TRUSTED_PROXIES = (ip_network("10.0.0.0/8"),)
    lock_out(client, viewer, forwarded=MALLORY)
    assert sign_in(client, viewer, "vera-password-123", forwarded=MALLORY).status_code == 429
    assert sign_in(client, viewer, "vera-password-123", forwarded=ALICE).status_code == 302


def test_a_forged_forwarded_entry_does_not_escape_the_lockout(client, viewer, settings, fresh_lockouts):
    """The proxy appends the peer it saw: entries to its left are whatever the client sent."""
    settings.TRUSTED_PROXIES = (ip_network("10.0.0.0/8"),)
    lock_out(client, viewer, forwarded=MALLORY)
    forged = sign_in(client, viewer, "vera-password-123", forwarded=f"{ALICE}, {MALLORY}")
    assert forged.status_code == 429


def test_without_trusted_proxies_the_header_is_ignored(client, viewer, settings, fresh_lockouts):
    settings.TRUSTED_PROXIES = ()
    lock_out(client, viewer, remote=MALLORY, forwarded=ALICE)
    assert sign_in(client, viewer, "vera-password-123", remote=MALLORY, forwarded="192.0.2.1").status_code == 429
    assert sign_in(client, viewer, "vera-password-123", remote=ALICE).status_code == 302


def test_a_client_not_behind_the_proxy_cannot_pick_its_address(client, viewer, settings, fresh_lockouts):
    settings.TRUSTED_PROXIES = (ip_network("10.0.0.0/8"),)
    lock_out(client, viewer, remote=MALLORY, forwarded=ALICE)
    assert sign_in(client, viewer, "vera-password-123", remote=MALLORY, forwarded="192.0.2.1").status_code == 429


def test_lockouts_are_per_user_name(client, viewer, operator, fresh_lockouts):
    lock_out(client, viewer, remote=MALLORY)
    assert sign_in(client, operator, "otto-password-123", remote=MALLORY).status_code == 302


@pytest.mark.parametrize(("remote", "forwarded", "expected"), [
    (PROXY, None, PROXY),  # no header: the peer itself
    (PROXY, MALLORY, MALLORY),
    (PROXY, f"{ALICE}, {MALLORY}", MALLORY),  # the rightmost hop the proxy did not add itself
    (PROXY, f"{MALLORY}, 10.1.2.3", MALLORY),  # two proxies in the trusted network
    (PROXY, f"{MALLORY},10.1.2.3 ,", MALLORY),  # spaces and an empty entry
    (PROXY, "10.1.2.3, 10.9.9.9", "10.1.2.3"),  # every hop trusted: the first
    (PROXY, "", PROXY),
    (PROXY, "2001:db8::1", "2001:db8::1"),
    (PROXY, "not-an-address", "not-an-address"),  # a broken proxy: its word, but not the proxy's address
    (MALLORY, ALICE, MALLORY),  # not from a trusted proxy: the header is the client's own claim
])
def test_client_address(settings, remote, forwarded, expected):
    settings.TRUSTED_PROXIES = (ip_network("10.0.0.0/8"),)
    headers = {"HTTP_X_FORWARDED_FOR": forwarded} if forwarded is not None else {}
    request = RequestFactory().get("/", REMOTE_ADDR=remote, **headers)
    assert client_address(request) == expected
