from django.urls import path
from rest_framework.routers import DefaultRouter

from fleet.api import driver_errors, remediation_views, views

router = DefaultRouter()
router.register("hosts", views.HostViewSet)
router.register("devices", views.DeviceViewSet, basename="device")
router.register("counters", views.CounterViewSet)
router.register("health-events", remediation_views.HealthEventViewSet, basename="health-event")
router.register("actions", remediation_views.ActionViewSet, basename="action")
router.register("driver-errors", driver_errors.DriverErrorViewSet, basename="driver-error")

urlpatterns = [
    path("devices/<int:pk>/actions/", remediation_views.DeviceActionView.as_view(), name="device-actions"),
    path("automation/", remediation_views.AutomationView.as_view(), name="automation"),
    path("capacity/", remediation_views.CapacityView.as_view(), name="capacity"),
    path("driver-errors/offenders/", driver_errors.OffendersView.as_view(), name="driver-error-offenders"),
    path("devices/<int:pk>/workload/", driver_errors.DeviceWorkloadView.as_view(), name="device-workload"),
    *router.urls,
]
