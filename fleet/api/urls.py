from rest_framework.routers import DefaultRouter

from fleet.api import views

router = DefaultRouter()
router.register("hosts", views.HostViewSet)
router.register("devices", views.DeviceViewSet, basename="device")
router.register("counters", views.CounterViewSet)

urlpatterns = router.urls
