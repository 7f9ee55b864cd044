from django.urls import path
from rest_framework.routers import SimpleRouter

from traces.api import job_views, page_data_views, request_views, upload_views, views

router = SimpleRouter()
router.register("traces", views.TraceViewSet, basename="trace")
router.register("jobs", job_views.JobViewSet, basename="job")
router.register("uploads", upload_views.UploadViewSet, basename="upload")

urlpatterns = [
    path("devices/<int:pk>/capture/", views.CaptureView.as_view(), name="device-capture"),
    path("hosts/<int:pk>/capture/", views.HostCaptureView.as_view(), name="host-capture"),
    path("jobs/capture/", job_views.JobCaptureView.as_view(), name="job-capture"),
    # The analyses (before the router: its detail route would take "compare" for an id).
    path("traces/compare/", page_data_views.ComparisonView.as_view(), name="trace-compare"),
    path("traces/versions/", page_data_views.VersionsView.as_view(), name="trace-versions"),
    path("traces/<int:pk>/findings/", page_data_views.FindingsView.as_view(), name="trace-findings"),
    path("traces/<int:pk>/flame/", page_data_views.FlameView.as_view(), name="trace-flame"),
    path("traces/<int:pk>/timeline/", page_data_views.TimelineView.as_view(), name="trace-timeline"),
    path("traces/<int:pk>/events/<int:index>/", page_data_views.EventView.as_view(), name="trace-event"),
    path("traces/<int:pk>/critical-path/", page_data_views.CriticalPathView.as_view(), name="trace-critical-path"),
    path("traces/<int:pk>/correlation/", page_data_views.CorrelationView.as_view(), name="trace-correlation"),
    path("traces/<int:pk>/metrics/", page_data_views.MetricsView.as_view(), name="trace-metrics"),
    path("traces/<int:pk>/spans/", request_views.SpanUploadView.as_view(), name="trace-spans"),
    path("traces/<int:pk>/requests/", request_views.RequestsView.as_view(), name="trace-requests"),
    path("jobs/<int:pk>/spans/", request_views.JobSpanUploadView.as_view(), name="job-spans"),
    path("traces/<int:pk>/requests/<str:request_id>/", request_views.RequestDetailView.as_view(),
         name="trace-request"),
    *router.urls,
]
