"""The viewers' and operators' groups and their permissions."""

import pytest
from django.contrib.auth.models import Group
from django.core.exceptions import ImproperlyConfigured

from fleet.roles import ROLES, ensure_roles, permissions


def _codenames(group: Group) -> set[str]:
    return {f"{p.content_type.app_label}.{p.codename}" for p in group.permissions.all()}


@pytest.mark.django_db
def test_operators_can_do_what_viewers_can_and_act_on_devices():
    ensure_roles()
    viewers, operators = Group.objects.get(name="viewers"), Group.objects.get(name="operators")
    assert _codenames(viewers) == set(ROLES["viewers"])
    assert _codenames(operators) == set(ROLES["operators"])
    assert _codenames(viewers) < _codenames(operators)
    assert "fleet.operate_device" not in _codenames(viewers)


@pytest.mark.django_db
def test_ensuring_the_roles_twice_leaves_one_group_each():
    ensure_roles()
    ensure_roles()
    assert Group.objects.filter(name__in=ROLES).count() == len(ROLES)


@pytest.mark.django_db
def test_a_role_naming_a_permission_that_does_not_exist_is_a_configuration_error():
    with pytest.raises(ImproperlyConfigured, match="'fleet.fly_device' does not exist"):
        permissions(["fleet.view_device", "fleet.fly_device"])
