"""Driver errors on `/metrics` (a block of its own, appended to `fleet.reading.metrics.render`):

- ``asicmon_driver_errors_total{host,serial,vendor,code,action}``: occurrences stored, all time;
- ``asicmon_driver_error_actions_total{rung,status}``: the repair ladder's actions (a rung
  that could not run on its host: status ``skipped``);
- ``asicmon_ladder_outcomes_total{outcome}``: how the ladder's incidents ended, one series
  each, always present: ``repaired_validated`` (back after a passing diagnostic),
  ``repaired_not_validated`` (back on health alone: no diagnostic for its type),
  ``pulled_for_inspection``, ``needs_person`` (no rung left that can run: drained);
- ``asicmon_driver_errors_unknown_total{host,vendor,code}``: occurrences of codes no catalogue
  knows ("unknown: inspect": shown with their raw line, given to a person, never ignored);
- for NVIDIA devices, dcgm-exporter's XID series: ``DCGM_FI_DEV_XID_ERRORS`` (the value of
  the device's last XID, with its gpu, UUID, device, modelName and Hostname labels) and
  ``DCGM_EXP_XID_ERRORS_COUNT{xid}`` (XIDs within the last DRIVER_ERROR_METRICS_WINDOW_S).

A few grouped queries, whatever the number of stored errors.
"""

from __future__ import annotations

from datetime import timedelta

from django.db.models import Count, Max, Sum
from django.utils import timezone

from fleet.choices import ActionStatus
from fleet.models import Action, DriverError

__all__ = ["render_text"]

WINDOW_S = 300.0
OUTCOMES = {
    ActionStatus.SUCCEEDED: "repaired_validated",
    ActionStatus.NOT_VALIDATED: "repaired_not_validated",
    ActionStatus.PULLED: "pulled_for_inspection",
    ActionStatus.NEEDS_PERSON: "needs_person",
}  # dcgm-exporter's default XID count window (5 minutes)


def render_text() -> str:
    out: list[str] = []
    rows = (DriverError.objects.values("host", "serial", "vendor", "code", "action")
            .annotate(n=Sum("count")).order_by("host", "serial", "code"))
    out += ["# HELP asicmon_driver_errors_total Driver error occurrences (Xid, SXid, amdgpu RAS) stored by Asicmon.",
            "# TYPE asicmon_driver_errors_total counter"]
    for r in rows:
        labels = label_text({k: r[k] for k in ("host", "serial", "vendor", "code", "action")})
        out.append(f"asicmon_driver_errors_total{{{labels}}} {float(r['n'])!r}")
    unknown = (DriverError.objects.filter(known=False).values("host", "vendor", "code")
               .annotate(n=Sum("count")).order_by("host", "vendor", "code"))
    out += ["# HELP asicmon_driver_errors_unknown_total Driver error occurrences whose code no catalogue knows (unknown: inspect).",
            "# TYPE asicmon_driver_errors_unknown_total counter"]
    out += [f"asicmon_driver_errors_unknown_total{{{label_text({k: r[k] for k in ('host', 'vendor', 'code')})}}} {float(r['n'])!r}"
            for r in unknown]
    ladder = Action.objects.filter(rule="driver_error").values("rung", "status").annotate(n=Count("id")).order_by("rung")
    out += ["# HELP asicmon_driver_error_actions_total Repair ladder actions by rung and status.",
            "# TYPE asicmon_driver_error_actions_total counter"]
    out += [f"asicmon_driver_error_actions_total{{{label_text({'rung': r['rung'], 'status': r['status']})}}} {float(r['n'])!r}"
            for r in ladder]
    by_status = {r["status"]: r["n"] for r in Action.objects.filter(rule="driver_error", status__in=list(OUTCOMES))
                 .values("status").annotate(n=Count("id")).order_by()}
    out += ["# HELP asicmon_ladder_outcomes_total How the repair ladder's incidents ended.",
            "# TYPE asicmon_ladder_outcomes_total counter"]
    out += [f'asicmon_ladder_outcomes_total{{outcome="{name}"}} {float(by_status.get(status, 0))!r}'
            for status, name in OUTCOMES.items()]
    out += _dcgm_xid()
    return "\n".join(out) + "\n"


def _dcgm_xid() -> list[str]:
    nvidia = DriverError.objects.filter(vendor="nvidia", device__isnull=False).exclude(code__startswith="S")
    last = {}
    for r in nvidia.order_by("device_id", "-last_seen").values(
            "device_id", "device__index", "serial", "device__model", "device__host__name", "code"):
        last.setdefault(r["device_id"], r)
    out = []
    if last:
        out += ["# HELP DCGM_FI_DEV_XID_ERRORS Value of the last XID error encountered.",
                "# TYPE DCGM_FI_DEV_XID_ERRORS gauge"]
        for r in last.values():
            out.append(f"DCGM_FI_DEV_XID_ERRORS{{{_dcgm_labels(r)}}} {float(r['code'])!r}")
    since = timezone.now() - timedelta(seconds=WINDOW_S)
    recent = (nvidia.filter(last_seen__gte=since).values("device_id", "code")
              .annotate(n=Sum("count"), at=Max("last_seen")).order_by("device_id", "code"))
    if recent:
        out += ["# HELP DCGM_EXP_XID_ERRORS_COUNT Count of XID errors within the last 5 minutes.",
                "# TYPE DCGM_EXP_XID_ERRORS_COUNT gauge"]
        for r in recent:
            base = last.get(r["device_id"])
            if base is not None:
                out.append(f"DCGM_EXP_XID_ERRORS_COUNT{{{_dcgm_labels(base)},xid=\"{r['code']}\"}} {float(r['n'])!r}")
    return out


def label_text(labels: dict) -> str:
    """Labels in the Prometheus text format, values escaped as it asks."""
    def escape(value) -> str:
        return str(value).replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')

    return ",".join(f'{name}="{escape(value)}"' for name, value in labels.items())


def _dcgm_labels(r: dict) -> str:
    index = r["device__index"]
    return label_text({"gpu": str(index), "UUID": r["serial"], "device": f"nvidia{index}",
                       "modelName": r["device__model"], "Hostname": r["device__host__name"]})
