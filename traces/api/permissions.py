from rest_framework.permissions import BasePermission


class _Needs(BasePermission):
    perm = ""
    message = ""

    def has_permission(self, request, view):
        user = request.user
        return bool(user and user.is_authenticated and user.has_perm(self.perm))


class CanViewTraces(_Needs):
    perm = "traces.view_trace"
    message = "You need the 'view trace' permission to read traces."


class CanCaptureTraces(_Needs):
    perm = "traces.capture_trace"
    message = "You need the 'capture trace' permission (the operators role) to capture a trace."


class CanUploadTraces(_Needs):
    perm = "traces.upload_trace"
    message = "You need the 'upload trace' permission (the operators role) to upload a trace."
