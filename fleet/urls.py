from django.urls import path

from fleet import views

app_name = "fleet"
urlpatterns = [
    path("", views.fleet, name="fleet"),
    path("fleet/table/", views.fleet_table, name="fleet-table"),
    path("devices/<int:device_id>/", views.device, name="device"),
    path("metrics", views.prometheus_metrics, name="metrics"),
]
