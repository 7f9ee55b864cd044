"""The REST API of driver errors: the events (``/api/driver-errors/``), repeat offenders
(``/api/driver-errors/offenders/``) and a device's workload label
(``PUT /api/devices/{id}/workload/``), which the ladder's blast radius counts by."""

from __future__ import annotations

from dataclasses import asdict

from django.shortcuts import get_object_or_404
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers, viewsets
from rest_framework.exceptions import ValidationError
from rest_framework.response import Response
from rest_framework.views import APIView

from fleet.api import params
from fleet.api.permissions import CanOperateDevices, CanViewFleet
from fleet.asicmon.errors.catalogue import ACTIONS
from fleet.driver_errors.offenders import ranking
from fleet.models import Device, DriverError

__all__ = ["DeviceWorkloadView", "DriverErrorViewSet", "OffendersView"]


class DriverErrorSerializer(serializers.ModelSerializer):
    rung = serializers.CharField(source="handled_by.rung", read_only=True, default=None)
    action_status = serializers.CharField(source="handled_by.status", read_only=True, default=None)
    check_passed = serializers.BooleanField(source="handled_by.check_passed", read_only=True, default=None)
    check_detail = serializers.CharField(source="handled_by.check_detail", read_only=True, default=None)

    class Meta:
        model = DriverError
        fields = [
            "id", "device", "serial", "host", "vendor", "code", "name", "meaning", "severity", "action", "cause",
            "hardware", "known", "detail", "raw", "source", "address", "count", "first_seen", "last_seen",
            "handled_by", "outcome", "rung", "action_status", "check_passed", "check_detail",
        ]


def _int(query, name: str) -> int | None:
    raw = query.get(name)
    if raw in (None, ""):
        return None
    return params.database_int(raw, name)


@extend_schema(parameters=[
    OpenApiParameter("device", int, description="Device id"),
    OpenApiParameter("serial", str, description="Device serial (follows it across hosts)"),
    OpenApiParameter("code", str, description="Vendor code, e.g. 79, S12028, umc.ue"),
    OpenApiParameter("action", str, enum=list(ACTIONS), description="The catalogue's immediate action"),
])
class DriverErrorViewSet(viewsets.ReadOnlyModelViewSet):
    """Driver error events (Xid, SXid, amdgpu RAS), deduplicated per time bucket with their
    count; with what the repair ladder did about each. Newest first."""

    serializer_class = DriverErrorSerializer
    permission_classes = [CanViewFleet]

    def get_queryset(self):
        query = self.request.query_params
        rows = DriverError.objects.select_related("handled_by").order_by("-first_seen", "-id")
        if (device := _int(query, "device")) is not None:
            rows = rows.filter(device_id=device)
        if serial := query.get("serial"):
            rows = rows.filter(serial=serial)
        if code := query.get("code"):
            rows = rows.filter(code=code)
        if action := query.get("action"):
            if action not in ACTIONS:
                raise ValidationError({"action": f"'{action}' is not one of {', '.join(ACTIONS)}."})
            rows = rows.filter(action=action)
        return rows


class OffendersView(APIView):
    """Devices ranked by hardware incidents in the window, wherever they ran, with MTBI,
    incidents per 30 days by cause, and whether to pull them."""

    permission_classes = [CanViewFleet]

    @extend_schema(responses={200: dict})
    def get(self, request):
        limit = _int(request.query_params, "limit") or 50
        if not 1 <= limit <= 1000:
            raise ValidationError({"limit": "between 1 and 1000."})
        return Response({"results": [asdict(o) for o in ranking(limit)]})


class WorkloadSerializer(serializers.Serializer):
    workload = serializers.CharField(max_length=128, allow_blank=True, trim_whitespace=True)


class DeviceWorkloadView(APIView):
    """Sets the workload a device serves (a job or service name; empty: none), as a
    scheduler's job mapping would. The repair ladder takes at most LADDER_MAX_PER_WORKLOAD
    devices of one workload at once."""

    permission_classes = [CanOperateDevices]

    @extend_schema(request=WorkloadSerializer, responses={200: WorkloadSerializer})
    def put(self, request, pk: int):
        device = get_object_or_404(Device, pk=pk)
        body = WorkloadSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        Device.objects.filter(pk=device.pk).update(workload=body.validated_data["workload"])
        return Response({"workload": body.validated_data["workload"]})
