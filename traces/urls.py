from django.urls import path

from traces import pages, views

app_name = "traces"
urlpatterns = [
    path("", views.catalogue, name="catalogue"),
    path("upload/", views.upload, name="upload"),
    path("compare/", pages.compare, name="compare"),
    path("versions/", pages.versions, name="versions"),
    path("<int:trace_id>/", views.detail, name="detail"),
]
