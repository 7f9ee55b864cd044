from django.urls import path
from rest_framework.routers import DefaultRouter

from fleet.api import remediation_views, views

router = DefaultRouter()
router.register("hosts", views.HostViewSet)
router.register("devices", views.DeviceViewSet, basename="device")
router.register("counters", views.CounterViewSet)
router.register("health-events", remediation_views.HealthEventViewSet, basename="health-event")
router.register("actions", remediation_views.ActionViewSet, basename="action")

urlpatterns = [
    path("devices/<int:pk>/actions/", remediation_views.DeviceActionView.as_view(), name="device-actions"),
    path("automation/", remediation_views.AutomationView.as_view(), name="automation"),
    path("capacity/", remediation_views.CapacityView.as_view(), name="capacity"),
    *router.urls,
]
