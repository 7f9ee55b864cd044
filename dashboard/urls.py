from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView

from dashboard import views
from dashboard.signin import SignInView
from fleet import views as fleet_views

dashboard_patterns = [
    path("", views.fleet, name="fleet"),
    path("fleet/table/", views.fleet_table, name="fleet-table"),
    path("devices/<int:device_id>/", views.device, name="device"),
]

urlpatterns = [
    path("", include((dashboard_patterns, "dashboard"))),
    path("accounts/login/", SignInView.as_view(), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("admin/", admin.site.urls),
    path("api/", include("fleet.api.urls")),
    path("api/", include("traces.api.urls")),
    path("traces/", include("traces.urls")),
    path("metrics", fleet_views.prometheus_metrics, name="metrics"),
    path("api/schema/", SpectacularAPIView.as_view(), name="schema"),
    path("api/docs/", SpectacularSwaggerView.as_view(url_name="schema"), name="api-docs"),
    path("api/auth/", include("rest_framework.urls")),
]
