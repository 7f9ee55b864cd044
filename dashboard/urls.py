from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.templatetags.static import static
from django.urls import include, path
from django.views.decorators.http import require_safe
from django.views.generic import RedirectView

from dashboard.signin import SignInView
from fleet.api.schema import DocsView, SchemaView

urlpatterns = [
    # Browsers and tools ask for /favicon.ico whatever the page links: the icon we serve.
    path("favicon.ico", require_safe(RedirectView.as_view(url=static("dashboard/favicon.svg"), permanent=True))),
    path("", include("fleet.urls")),
    path("accounts/login/", SignInView.as_view(), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("admin/", admin.site.urls),
    path("api/", include("fleet.api.urls")),
    path("api/", include("traces.api.urls")),
    path("traces/", include("traces.urls")),
    path("api/schema/", SchemaView.as_view(), name="schema"),
    path("api/docs/", DocsView.as_view(url_name="schema"), name="api-docs"),
    path("api/auth/", include("rest_framework.urls")),
    path("v1/traces", include("traces.requests.urls")),  # OTLP/HTTP spans in
]
