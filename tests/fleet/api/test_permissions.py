"""Who may use the API: viewers read the fleet, operators also act on devices."""

import pytest
from django.contrib.auth.models import AnonymousUser
from rest_framework.test import APIRequestFactory

from fleet.api.permissions import CanOperateDevices, CanViewFleet

pytestmark = pytest.mark.django_db


def _request(user):
    request = APIRequestFactory().get("/api/devices/")
    request.user = user
    return request


@pytest.mark.parametrize(
    ("who", "may_view", "may_operate"),
    [("viewer", True, False), ("operator", True, True), ("outsider", False, False)],
)
def test_each_role_gets_what_it_may_do(request, who, may_view, may_operate):
    user = request.getfixturevalue(who)
    assert CanViewFleet().has_permission(_request(user), None) is may_view
    assert CanOperateDevices().has_permission(_request(user), None) is may_operate


def test_anyone_not_signed_in_gets_nothing_and_is_told_what_is_needed():
    anonymous = _request(AnonymousUser())
    assert not CanViewFleet().has_permission(anonymous, None)
    assert not CanOperateDevices().has_permission(anonymous, None)
    assert "operators role" in CanOperateDevices.message
