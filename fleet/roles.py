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
    """The Permission rows of ``app_label.codename`` names (one query); an unknown name is an error."""
    wanted = [name.partition(".") for name in names]
    rows = Permission.objects.filter(
        content_type__app_label__in={label for label, _, _ in wanted}, codename__in={code for _, _, code in wanted}
    ).select_related("content_type")
    by_name: dict[str, list[Permission]] = {}
    for row in rows:
        by_name.setdefault(f"{row.content_type.app_label}.{row.codename}", []).append(row)
    found = []
    for name in names:
        if name not in by_name:
            raise ImproperlyConfigured(f"role permission {name!r} does not exist (no such app label or codename)")
        found.extend(by_name[name])
    return found


def ensure_roles(**kwargs) -> None:
    """Each role's group with at least its permissions: three queries when they are there
    already (every test's user, every post_migrate), a few more to add what is missing."""
    wanted = {role: {p.id for p in permissions(names)} for role, names in ROLES.items()}
    groups = {g.name: g for g in Group.objects.filter(name__in=ROLES)}
    held: dict[int, set[int]] = {}
    for group_id, permission_id in Group.permissions.through.objects.filter(
        group_id__in=[g.id for g in groups.values()]
    ).values_list("group_id", "permission_id"):
        held.setdefault(group_id, set()).add(permission_id)
    for role, ids in wanted.items():
        group = groups.get(role)
        if group is None:
            group, _ = Group.objects.get_or_create(name=role)
        missing = ids - held.get(group.id, set())
        if missing:
            group.permissions.add(*missing)
