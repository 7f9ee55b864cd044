"""Health events, actions, the automation brake and the capacity signal."""

from django.shortcuts import get_object_or_404
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import status, viewsets
from rest_framework.exceptions import ValidationError
from rest_framework.response import Response
from rest_framework.views import APIView

from fleet.api import health_events, params
from fleet.api.permissions import CanOperateDevices, CanViewFleet
from fleet.api.serializers import (
    ActionRequestSerializer,
    ActionSerializer,
    AutomationSerializer,
    CapacitySerializer,
    HealthEventSerializer,
)
from fleet.choices import ActionKind, Health
from fleet.health import remediation
from fleet.models import Action, Automation, Device, HealthEvent
from fleet.reading import capacity


def parse_device(query) -> int | None:
    raw = query.get("device")
    if raw in (None, ""):
        return None
    return params.database_int(raw, "device", "a device id (an integer)")


def parse_bool(query, name: str) -> bool | None:
    raw = query.get(name)
    if raw in (None, ""):
        return None
    if raw.lower() in {"true", "1", "yes"}:
        return True
    if raw.lower() in {"false", "0", "no"}:
        return False
    raise ValidationError({name: f"'{raw}' is not a boolean: use true or false."})


@extend_schema(
    parameters=[
        OpenApiParameter("device", int, description="Device id"),
        OpenApiParameter("open", bool, description="true: still going on; false: ended"),
        OpenApiParameter("level", str, enum=[Health.WARNING, Health.CRITICAL]),
    ]
)
class HealthEventViewSet(viewsets.ReadOnlyModelViewSet):
    """When each health rule fired for a device, at what level, why and with what values, and
    the device's driver errors as events of rule ``driver_error``; newest first."""

    serializer_class = HealthEventSerializer

    def get_queryset(self):
        query = self.request.query_params
        events = HealthEvent.objects.select_related("device").order_by("-started_at", "-id")
        if (device := parse_device(query)) is not None:
            events = events.filter(device_id=device)
        if (still_open := parse_bool(query, "open")) is not None:
            events = events.filter(ended_at__isnull=still_open)
        if level := params.parse_choice(query, "level", [Health.WARNING, Health.CRITICAL]):
            events = events.filter(level=level)
        return events

    def list(self, request, *args, **kwargs):
        """The rules' events and, as rule ``driver_error``, the devices' driver errors."""
        query = request.query_params
        events = self.get_queryset()  # checks the filters: a bad one is a 400
        driver_errors = health_events.driver_errors_matching(
            parse_device(query), parse_bool(query, "open"),
            params.parse_choice(query, "level", [Health.WARNING, Health.CRITICAL]))
        merged = health_events.MergedEvents(events, driver_errors, lambda e: self.get_serializer(e).data)
        page = self.paginate_queryset(merged)
        if page is None:
            return Response(merged[0:merged.count()])
        return self.get_paginated_response(page)


@extend_schema(
    parameters=[
        OpenApiParameter("device", int, description="Device id"),
        OpenApiParameter("kind", str, enum=ActionKind.values),
    ]
)
class ActionViewSet(viewsets.ReadOnlyModelViewSet):
    """Every remediation and operator action: who or which rule, why, when, and the outcome."""

    serializer_class = ActionSerializer

    def get_queryset(self):
        query = self.request.query_params
        actions = Action.objects.select_related("device", "user").order_by("-created_at", "-id")
        if (device := parse_device(query)) is not None:
            actions = actions.filter(device_id=device)
        if kind := params.parse_choice(query, "kind", ActionKind.values):
            actions = actions.filter(kind=kind)
        return actions


class DeviceActionView(APIView):
    """Act on a device: reboot, drain, repair, return_to_service or maintenance (until)."""

    permission_classes = [CanOperateDevices]

    @extend_schema(
        request=ActionRequestSerializer,
        responses={
            202: ActionSerializer,
            400: OpenApiResponse(description="Unknown action or bad 'until'"),
            403: OpenApiResponse(description="Not an operator"),
            409: OpenApiResponse(description="The device is being rebooted"),
        },
    )
    def post(self, request, pk: int):
        device = get_object_or_404(Device.objects.select_related("host"), pk=pk)
        body = ActionRequestSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        data = body.validated_data
        try:
            action = remediation.request_action(
                device, data["action"], user=request.user, reason=data["reason"], until=data.get("until")
            )
        except remediation.Conflict as exc:
            return Response({"detail": str(exc)}, status=status.HTTP_409_CONFLICT)
        return Response(ActionSerializer(action, context={"request": request}).data, status=status.HTTP_202_ACCEPTED)


class AutomationView(APIView):
    """Whether automated remediation is paused (by the brake or an operator); operators resume or pause it."""

    def get_permissions(self):
        return [CanOperateDevices()] if self.request.method == "POST" else [CanViewFleet()]

    @extend_schema(responses=AutomationSerializer)
    def get(self, request):
        return Response(AutomationSerializer(Automation.current()).data)

    @extend_schema(request=AutomationSerializer, responses=AutomationSerializer)
    def post(self, request):
        body = AutomationSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        paused = body.validated_data["paused"]
        who = request.user.get_username()
        reason = body.validated_data.get("reason") or f"{'paused' if paused else 'resumed'} by {who}"
        remediation.set_paused(paused, reason=reason, user=request.user)
        return Response(AutomationSerializer(Automation.current()).data)


class CapacityView(APIView):
    """What a load balancer polls: per device whether it may serve, its weight and headroom;
    totals per device type, per host and for the fleet."""

    @extend_schema(responses=CapacitySerializer)
    def get(self, request):
        return Response(capacity.fleet_capacity())
