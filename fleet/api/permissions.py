from rest_framework.permissions import BasePermission


class CanViewFleet(BasePermission):
    """Signed in, and allowed to see the fleet (the viewers and operators roles)."""

    message = "You need the 'view device' permission to read the fleet."

    def has_permission(self, request, view):
        user = request.user
        return bool(user and user.is_authenticated and user.has_perm("fleet.view_device"))


class CanOperateDevices(BasePermission):
    """Signed in with the 'operate device' permission (the operators role)."""

    message = "You need the 'operate device' permission (the operators role) to act on devices."

    def has_permission(self, request, view):
        user = request.user
        return bool(user and user.is_authenticated and user.has_perm("fleet.operate_device"))
