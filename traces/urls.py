from django.urls import path

from traces import views
from traces.requests import views as request_views

app_name = "traces"
urlpatterns = [
    path("", views.catalogue, name="catalogue"),
    path("upload/", views.upload, name="upload"),
    path("compare/", views.comparison_page, name="compare"),
    path("versions/", views.versions, name="versions"),
    path("<int:trace_id>/", views.detail, name="detail"),
    path("<int:trace_id>/requests/", request_views.requests_page, name="requests"),
    path("<int:trace_id>/requests/<str:request_id>/", request_views.request_page, name="request"),
    path("jobs/", views.jobs, name="jobs"),
    path("jobs/<int:job_id>/", views.job, name="job"),
]
