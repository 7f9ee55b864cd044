"""The two roles every installation has: viewers read, operators also act."""

from django.contrib.auth.models import Group, Permission

VIEWER_PERMISSIONS = ["fleet.view_device", "fleet.view_host", "traces.view_trace"]
OPERATOR_PERMISSIONS = [*VIEWER_PERMISSIONS, "fleet.operate_device", "traces.capture_trace"]
ROLES = {"viewers": VIEWER_PERMISSIONS, "operators": OPERATOR_PERMISSIONS}


def _permissions(names: list[str]) -> list[Permission]:
    found = []
    for name in names:
        app_label, codename = name.split(".")
        found.extend(Permission.objects.filter(content_type__app_label=app_label, codename=codename))
    return found


def ensure_roles(**kwargs) -> None:
    for group_name, names in ROLES.items():
        group, _ = Group.objects.get_or_create(name=group_name)
        group.permissions.add(*_permissions(names))
