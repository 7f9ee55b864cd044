from django.urls import path
from rest_framework.routers import SimpleRouter

from traces.api import view_endpoints as tv
from traces.api import views

router = SimpleRouter()
router.register("traces", views.TraceViewSet, basename="trace")

urlpatterns = [
    path("devices/<int:pk>/capture/", views.CaptureView.as_view(), name="device-capture"),
    # The trace views (before the router: its detail route would take "compare" for an id).
    path("traces/compare/", tv.CompareView.as_view(), name="trace-compare"),
    path("traces/versions/", tv.VersionsView.as_view(), name="trace-versions"),
    path("traces/<int:pk>/flame/", tv.FlameView.as_view(), name="trace-flame"),
    path("traces/<int:pk>/timeline/", tv.TimelineView.as_view(), name="trace-timeline"),
    path("traces/<int:pk>/events/<int:index>/", tv.EventView.as_view(), name="trace-event"),
    path("traces/<int:pk>/critical-path/", tv.CriticalPathView.as_view(), name="trace-critical-path"),
    path("traces/<int:pk>/correlation/", tv.CorrelationView.as_view(), name="trace-correlation"),
    path("traces/<int:pk>/metrics/", tv.MetricsView.as_view(), name="trace-metrics"),
    *router.urls,
]
