"""Mounted at /v1/traces (the OTLP/HTTP path) by dashboard/urls.py."""

from django.urls import path

from traces.requests.receiver import receive_traces

urlpatterns = [path("", receive_traces, name="otlp-traces")]
