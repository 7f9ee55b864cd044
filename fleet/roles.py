"""The two roles every installation has: viewers read, operators also act."""

from django.contrib.auth.models import Group, Permission
from django.core.exceptions import ImproperlyConfigured

VIEWER_PERMISSIONS = ["fleet.view_device", "fleet.view_host", "traces.view_trace"]
OPERATOR_PERMISSIONS = [
    *VIEWER_PERMISSIONS,
    "fleet.operate_device",
    "traces.capture_trace",
    "traces.upload_trace",
]
ROLES = {"viewers": VIEWER_PERMISSIONS, "operators": OPERATOR_PERMISSIONS}


def permissions(names: list[str]) -> list[Permission]:
    """The Permission rows of ``app_label.codename`` names; an unknown name is an error."""
    found = []
    for name in names:
        app_label, _, codename = name.partition(".")
        matches = list(Permission.objects.filter(content_type__app_label=app_label, codename=codename))
        if not matches:
            raise ImproperlyConfigured(f"role permission {name!r} does not exist (no such app label or codename)")
        found.extend(matches)
    return found


def ensure_roles(**kwargs) -> None:
    for group_name, names in ROLES.items():
        group, _ = Group.objects.get_or_create(name=group_name)
        group.permissions.add(*permissions(names))
