"""The readers of the fleet: what pages and the API show, in a fixed number of queries."""

import time
from collections import Counter, defaultdict
from dataclasses import asdict, dataclass
from datetime import UTC, datetime, timedelta

from django.db.models import Count, Q

from fleet.agent.queues import process_fresh_since
from fleet.asicmon import CATALOGUE
from fleet.choices import Health
from fleet.health import index as health_index
from fleet.health.assessing import current_health
from fleet.health.detection import Assessment
from fleet.models import Device, Host
from fleet.polling import snapshots
from fleet.reading import history
from fleet.reading.key_counters import key_counter_names


@dataclass
class DeviceRow:
    device: Device
    snapshot: dict | None
    assessment: Assessment

    @property
    def health(self) -> Health:
        return self.assessment.health


# --- The fleet page: summaries of the whole fleet, and one page of its device table -----

PAGE_SIZES = (25, 50, 100, 200)
PROBLEM_HOSTS = 40  # the worst hosts listed in the summary; the rest are counted
SORTS = {
    "host": ("host__name", "index"),
    "serial": ("serial",),
    "type": ("device_type", "host__name", "index"),
    "health": ("host__name", "index"),  # then worst first, by the health index
}


@dataclass(frozen=True)
class TableQuery:
    """What a fleet table shows: filters, sort and page (every filter may be empty)."""

    host: str = ""
    device_type: str = ""
    health: str = ""
    state: str = ""
    search: str = ""
    sort: str = "host"
    page: int = 1
    per_page: int = 50


@dataclass
class HostSummary:
    id: int
    name: str
    devices: int
    counts: dict[str, int]  # devices by health, the healthy left out


@dataclass
class FleetSummary:
    devices: int
    hosts: int
    health_counts: dict[str, int]
    problem_hosts: list[HostSummary]  # hosts with a device not healthy, worst first (the first few)
    problem_host_count: int  # all of them

    def to_json(self) -> dict:
        return asdict(self)


@dataclass
class TablePage:
    rows: list[DeviceRow]
    total: int  # the devices that pass every filter
    page: int
    pages: int
    per_page: int

    @property
    def first(self) -> int:
        return (self.page - 1) * self.per_page + 1 if self.rows else 0

    @property
    def last(self) -> int:
        return self.first + len(self.rows) - 1 if self.rows else 0


def fleet_summary(healths: dict[int, str]) -> FleetSummary:
    """Devices by health over the whole fleet, and the hosts with a problem, worst first:
    two SQL queries whatever the fleet's size (``healths`` from `health_index.read`)."""
    unknown, healthy = Health.UNKNOWN.value, Health.HEALTHY.value
    devices = list(Device.objects.order_by().values_list("id", "host_id"))
    health_of = [healths.get(device_id, unknown) for device_id, _ in devices]
    counts = Counter(health_of)
    devices_of = Counter(host_id for _, host_id in devices)
    per_host: dict[int, Counter] = defaultdict(Counter)
    for (_, host_id), health in zip(devices, health_of, strict=True):
        if health != healthy:
            per_host[host_id][health] += 1
    order = sorted(health_index.SEVERITY, key=health_index.SEVERITY.get)
    worst = sorted(per_host, key=lambda h: (*(-per_host[h][health] for health in order), h))[:PROBLEM_HOSTS]
    names = dict(Host.objects.filter(id__in=worst or [0]).values_list("id", "name"))
    return FleetSummary(
        devices=len(devices),
        hosts=len(devices_of),
        health_counts={h.value: counts.get(h.value, 0) for h in Health},
        problem_hosts=[
            HostSummary(h, names.get(h, "?"), devices_of[h], {x: per_host[h][x] for x in order if per_host[h][x]})
            for h in worst
        ],
        problem_host_count=len(per_host),
    )


def _matching(query: TableQuery):
    devices = Device.objects.matching(host=query.host, device_type=query.device_type)
    if query.state:
        devices = devices.filter(state=query.state)
    if query.search:
        term = query.search
        devices = devices.filter(Q(serial__icontains=term) | Q(host__name__icontains=term) | Q(model__icontains=term))
    return devices.order_by(*SORTS[query.sort])


def table_page(query: TableQuery, healths: dict[int, str]) -> TablePage:
    """One page of the device table, filtered and sorted in the database (health through
    the index): two SQL queries and one Redis read, whatever the fleet's size."""
    matching = _matching(query)
    unknown = Health.UNKNOWN.value
    if query.health or query.sort == "health":
        ids = list(matching.values_list("id", flat=True))
        if query.health:
            ids = [i for i in ids if healths.get(i, unknown) == query.health]
        if query.sort == "health":
            ids.sort(key=lambda i: health_index.SEVERITY.get(healths.get(i, unknown), 2))
        total = len(ids)
        page, pages = _clamp(query, total)
        start = (page - 1) * query.per_page
        wanted = ids[start : start + query.per_page]
        by_id = Device.objects.select_related("host").in_bulk(wanted)
        devices = [by_id[i] for i in wanted if i in by_id]
    else:
        total = matching.count()
        page, pages = _clamp(query, total)
        start = (page - 1) * query.per_page
        devices = list(matching.select_related("host")[start : start + query.per_page])
    latest = snapshots.read_snapshots([d.id for d in devices])
    now = time.time()
    rows = [DeviceRow(d, latest.get(d.id), current_health(latest.get(d.id), now)) for d in devices]
    return TablePage(rows=rows, total=total, page=page, pages=pages, per_page=query.per_page)


def agent_hosts() -> list[Host]:
    """The machines polled by an agent, by name, with their device and process counts (a
    machine without an accelerator shows here only: the device table has no row of it)."""
    return list(Host.objects.with_agent().annotate(
        device_count=Count("devices", distinct=True),
        process_count=Count("processes", filter=Q(processes__last_poll__gte=process_fresh_since()), distinct=True),
    ).order_by("name"))


def host_devices(host) -> list[DeviceRow]:
    """Every device of a host, by slot, with its latest snapshot and health."""
    devices = list(host.devices.select_related("host").order_by("index"))
    latest = snapshots.read_snapshots([d.id for d in devices])
    now = time.time()
    return [DeviceRow(d, latest.get(d.id), current_health(latest.get(d.id), now)) for d in devices]


def _clamp(query: TableQuery, total: int) -> tuple[int, int]:
    """The page asked for, within the pages there are (past the last: the last)."""
    pages = max(1, -(-total // query.per_page))
    return min(query.page, pages), pages


def first_page_ids() -> list[int]:
    """The devices of the first page of the default table (what a fleet socket follows
    until its page says otherwise): one query."""
    query = TableQuery()
    return list(_matching(query).values_list("id", flat=True)[: query.per_page])


def device_types() -> list[str]:
    """Every device type in the fleet, for the type filter (one query on an index)."""
    return list(Device.objects.order_by("device_type").values_list("device_type", flat=True).distinct())


# The ranges a device page offers: query value -> (span, label). The first is the default.
DEVICE_RANGES = {
    "15m": (timedelta(minutes=15), "15 min"),
    "1h": (timedelta(hours=1), "1 h"),
    "6h": (timedelta(hours=6), "6 h"),
    "24h": (timedelta(hours=24), "24 h"),
    "7d": (timedelta(days=7), "7 days"),
    "30d": (timedelta(days=30), "30 days"),
}


def range_reaching(age_s: float) -> tuple[str, str] | None:
    """The shortest device-page range (key, label) that reaches back ``age_s`` seconds, if any."""
    for key, (span, label) in DEVICE_RANGES.items():
        if span.total_seconds() >= age_s:
            return key, label
    return None


def resolution_label(step: int | None) -> str:
    """What a device page's graphs show, for the step of its history (None: raw samples)."""
    if step is None:
        return "every sample (one per poll)"
    minutes = step // 60
    width = f"{minutes // 60}-hour" if minutes % 60 == 0 else f"{minutes}-minute"
    return f"{width} mean, min–max band"


def device_history(device: Device, counters: list[str], since: datetime, until: datetime,
                   step: int | None = None) -> dict[str, list]:
    """A few counters of one device in [since, until] from the time-series store, oldest
    first: name -> [(epoch, value)] raw (``step`` None), or [(epoch, mean, min, max)] a point
    per ``step`` seconds. Raises TsdbUnavailable / TsdbError (fleet.reading.history)."""
    return history.read(device.id, counters, since, until, step)


@dataclass
class DeviceDetail:
    snapshot: dict
    assessment: Assessment
    counters: list[dict]
    history: dict[str, list]
    step: int | None = None  # of the history: None for raw samples, else the band step in seconds
    since: datetime | None = None
    until: datetime | None = None
    history_error: str = ""  # why the history is missing (the store is down), else ""

    @property
    def resolution(self) -> str:
        return "raw" if self.step is None else f"{self.step}s"


def device_detail(device: Device, span: timedelta = timedelta(minutes=15), now: datetime | None = None) -> DeviceDetail:
    """A device page's data: latest snapshot and its health, every counter (from Redis), and
    the history of the last ``span`` from the store, raw or in bands by the span's length
    (fleet.reading.history.chart_step). A store that does not answer leaves the history empty and
    says why in ``history_error``."""
    snapshot = snapshots.read_snapshot(device.id) or {}
    counters = [
        {"name": name, "value": snapshot[name], "unit": CATALOGUE[name].unit, "description": CATALOGUE[name].description}
        for name in sorted(snapshot)
        if name in CATALOGUE
    ]
    assessment = current_health(snapshot)
    until = now or datetime.now(tz=UTC)
    since = until - span
    step = history.chart_step(since, until)
    charted = charted_counters(assessment)
    try:
        found, error = device_history(device, charted, since, until, step), ""
    except history.TsdbError as exc:
        found, error = {name: [] for name in charted}, history.unavailable(exc)
    return DeviceDetail(
        snapshot=snapshot,
        assessment=assessment,
        counters=counters,
        history=found,
        step=step,
        since=since,
        until=until,
        history_error=error,
    )


# The counters behind each health rule, graphed on a device page while the rule fires.
RULE_COUNTERS = {
    "cooling": ["temperature_c", "power_w"],
    "ecc": ["ecc_corrected_per_s", "ecc_uncorrected_total"],
    "pcie": ["pcie_link_width", "pcie_link_gen", "pcie_errors_per_s"],
    "memory_leak": ["memory_used_bytes"],
    "core_stuck": ["device_utilization", "power_w"],
    "throttle": ["clock_mhz", "temperature_c"],
}


def charted_counters(assessment: Assessment) -> list[str]:
    """The key counters, then those behind the reasons the device is unhealthy now."""
    names = key_counter_names()
    for finding in assessment.findings:
        names += [n for n in RULE_COUNTERS.get(finding.rule, []) if n not in names]
    return names


def device_activity(device: Device, limit: int = 20) -> tuple[list, list]:
    """The device's latest health events and actions (two queries)."""
    from fleet.models import Action, HealthEvent

    events = list(HealthEvent.objects.filter(device=device).order_by("-started_at", "-id")[:limit])
    actions = list(Action.objects.filter(device=device).select_related("user").order_by("-created_at", "-id")[:limit])
    return events, actions
