"""Throttling of failed sign-ins, per user name and client address.

After SIGNIN_MAX_FAILURES failed attempts within SIGNIN_LOCKOUT_SECONDS, further attempts
for that name from that address are refused until the window passes, with a message that
says so (the sign-in page answers 429). The counts live in the cache (Redis), so every
web process sees them. The backend refuses too, so the admin's and the browsable API's
sign-in forms are throttled the same way.

The client's address is the connection's, unless that is one of TRUSTED_PROXIES: then it
is the rightmost X-Forwarded-For entry that is not a trusted proxy (each proxy appends the
peer it saw; what stands to the left of that is whatever the client chose to send).
"""

from ipaddress import ip_address

from django.conf import settings
from django.contrib.auth import views as auth_views
from django.contrib.auth.backends import ModelBackend
from django.contrib.auth.forms import AuthenticationForm
from django.contrib.auth.signals import user_login_failed
from django.core.cache import cache
from django.core.exceptions import PermissionDenied, ValidationError
from django.dispatch import receiver


def _trusted(address: str) -> bool:
    try:
        parsed = ip_address(address)
    except ValueError:
        return False
    return any(parsed in network for network in settings.TRUSTED_PROXIES)


def client_address(request) -> str:
    """The address of the client a request comes from, as far as it can be believed."""
    address = request.META.get("REMOTE_ADDR") or "?"
    if not _trusted(address):
        return address
    hops = [hop.strip() for hop in request.META.get("HTTP_X_FORWARDED_FOR", "").split(",") if hop.strip()]
    for hop in reversed(hops):
        address = hop[:64]
        if not _trusted(address):
            break
    return address


def _key(request, username: str | None) -> str:
    address = client_address(request) if request is not None else "?"
    return f"signin-failures:{address}:{(username or '').strip().lower()[:150]}"


def is_throttled(request, username: str | None) -> bool:
    return (cache.get(_key(request, username)) or 0) >= settings.SIGNIN_MAX_FAILURES


@receiver(user_login_failed)
def count_failure(sender, credentials, request=None, **kwargs):
    key = _key(request, credentials.get("username"))
    cache.add(key, 0, timeout=settings.SIGNIN_LOCKOUT_SECONDS)
    cache.incr(key)


class ThrottledModelBackend(ModelBackend):
    def authenticate(self, request, username=None, password=None, **kwargs):
        if is_throttled(request, username):
            raise PermissionDenied("too many failed sign-ins")
        return super().authenticate(request, username=username, password=password, **kwargs)


class ThrottledAuthenticationForm(AuthenticationForm):
    throttled = False

    def clean(self):
        if is_throttled(self.request, self.cleaned_data.get("username")):
            self.throttled = True
            minutes = max(1, settings.SIGNIN_LOCKOUT_SECONDS // 60)
            raise ValidationError(
                f"Too many failed sign-ins for this user from your address; try again in {minutes} minutes.",
                code="throttled",
            )
        return super().clean()


class SignInView(auth_views.LoginView):
    authentication_form = ThrottledAuthenticationForm
    template_name = "dashboard/login.html"
    http_method_names = ["get", "head", "post", "options"]  # not PUT, which LoginView takes for a POST

    def form_invalid(self, form):
        response = super().form_invalid(form)
        if form.throttled:
            response.status_code = 429
        return response
