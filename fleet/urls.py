from django.urls import path

from fleet import views
from fleet.driver_errors import views as driver_error_views
from fleet.replay import views as replay_views

app_name = "fleet"
urlpatterns = [
    path("", views.fleet, name="fleet"),
    path("fleet/table/", views.fleet_table, name="fleet-table"),
    path("devices/<int:device_id>/", views.device, name="device"),
    path("hosts/<int:host_id>/", views.host, name="host"),
    path("metrics", views.prometheus_metrics, name="metrics"),
    path("offenders/", driver_error_views.offenders, name="offenders"),
    path("replay/", replay_views.replay_page, name="replay"),
    path("replay/<str:rid>/status", replay_views.replay_status, name="replay-status"),
]
