from django.db.models import Count
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import (
    OpenApiParameter,
    OpenApiResponse,
    extend_schema,
    extend_schema_view,
    inline_serializer,
)
from rest_framework import serializers as drf_serializers
from rest_framework import viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import ValidationError
from rest_framework.response import Response

from fleet.api import params
from fleet.api.serializers import (
    CounterSerializer,
    DeviceSerializer,
    HostSerializer,
    SeriesSerializer,
)
from fleet.asicmon import CATALOGUE
from fleet.choices import DeviceState
from fleet.models import Counter, Device, Host
from fleet.polling import snapshots
from fleet.reading import history
from fleet.tsdb.series import series_counters

MAX_POINTS = 100_000
ERROR = OpenApiResponse(
    inline_serializer("Error", {"detail": drf_serializers.CharField()}),
    description="What was wrong with the request, by parameter (400) or why there is nothing (404)",
)
STORE_ERROR = OpenApiResponse(
    inline_serializer("StoreError", {"detail": drf_serializers.CharField()}),
    description="The time-series store refused the query (502) or is not answering (503); the body says which",
)


class HostViewSet(viewsets.ReadOnlyModelViewSet):
    serializer_class = HostSerializer
    queryset = Host.objects.annotate(device_count=Count("devices")).prefetch_related("processes").order_by("name")


@extend_schema_view(
    list=extend_schema(
        parameters=[
            OpenApiParameter("host", str, description="Host name"),
            OpenApiParameter("type", str, description="Device type, e.g. gpu"),
            OpenApiParameter("state", str, enum=["", *DeviceState.values], description="Empty: any state"),
        ],
        responses={200: DeviceSerializer(many=True), 400: ERROR},
    ),
    retrieve=extend_schema(responses={200: DeviceSerializer, 404: ERROR}),
)
class DeviceViewSet(viewsets.ReadOnlyModelViewSet):
    """Devices with their latest counters (from the snapshot cache, never a driver)."""

    serializer_class = DeviceSerializer

    def get_queryset(self):
        queryset = Device.objects.for_dashboard()
        if self.action != "list":
            return queryset  # filters are for the list; /api/devices/<id>/ is that device
        query = self.request.query_params
        queryset = queryset.matching(host=query.get("host", ""), device_type=query.get("type", ""))
        if state := params.parse_choice(query, "state", DeviceState.values):
            queryset = queryset.filter(state=state)
        return queryset

    def get_serializer(self, *args, **kwargs):
        instance = args[0] if args else None
        if instance is not None:
            devices = instance if isinstance(instance, list | tuple) else [instance]
            kwargs.setdefault("context", self.get_serializer_context())
            kwargs["context"]["snapshots"] = snapshots.read_snapshots([d.id for d in devices])
        return super().get_serializer(*args, **kwargs)

    @extend_schema(
        parameters=[
            OpenApiParameter(
                "counter", str, required=True, enum=[name for name, _ in series_counters()],
                description="Counter name from /api/counters/ (one with a time series: a gauge or counter)",
            ),
            OpenApiParameter("since", OpenApiTypes.DATETIME, description="ISO 8601 or Unix seconds; default until - 15 min"),
            OpenApiParameter("until", OpenApiTypes.DATETIME, description="ISO 8601 or Unix seconds; default now"),
            OpenApiParameter("limit", int, description=f"At most this many points, the latest of the range (1..{MAX_POINTS})"),
            OpenApiParameter(
                "resolution", str, enum=["auto", *history.API_STEPS],
                description="The step of the points: raw (every sample, one per poll), 1m or 1h (the mean, min, "
                "max and count of the samples in each minute or hour, computed by the time-series store); "
                "auto (default): by the range's length (raw up to 2 h, 1m up to 2 days, then 1h)",
            ),
        ],
        responses={200: SeriesSerializer, 400: ERROR, 404: ERROR, 502: STORE_ERROR, 503: STORE_ERROR},
    )
    @action(detail=True, methods=["get"])
    def samples(self, request, pk=None, **kwargs):  # kwargs: the router's .json suffix
        """One counter of one device over a time range, from the time-series store, oldest
        first: [time, value] raw, or [time, mean, min, max, count] a point per step, the time
        ending the step it sums up; ``resolution`` and ``step`` say which. A raw read looks
        back at most 100,000 polls from ``until``; ``limit`` keeps the latest points."""
        device = self.get_object()
        query = request.query_params
        name = query.get("counter")
        if not name:
            raise ValidationError({"counter": "counter is required, e.g. ?counter=temperature_c."})
        known = [counter for counter, _ in series_counters()]
        if name not in known:
            raise ValidationError({"counter": f"unknown counter '{name}'; counters with a time series: {', '.join(known)}."})
        since, until = params.parse_time_range(query)
        limit = params.parse_limit(query, default=10_000, maximum=MAX_POINTS)
        resolution = params.parse_choice(query, "resolution", ["auto", *history.API_STEPS]) or "auto"
        if resolution == "auto":
            resolution = history.api_resolution(since, until)
        try:
            points = history.api_points(device.id, name, since, until, resolution, limit)
        except history.TooManyPoints as exc:  # bounded above already; a refusal, never a 500
            raise ValidationError({"since": str(exc)}) from None
        return Response(
            {
                "device": device.id,
                "counter": name,
                "unit": CATALOGUE[name].unit,
                "since": since,
                "until": until,
                "resolution": resolution,
                "step": history.API_STEPS[resolution],
                "points": points,
            }
        )


class CounterViewSet(viewsets.ReadOnlyModelViewSet):
    """The Asicmon counter catalogue."""

    serializer_class = CounterSerializer
    queryset = Counter.objects.order_by("name")
    lookup_field = "name"
    pagination_class = None
