from django.contrib import admin

from traces.models import Trace


@admin.register(Trace)
class TraceAdmin(admin.ModelAdmin):
    list_display = ["id", "name", "source", "status", "device", "device_type", "sw_version", "events", "created_by", "created_at"]
    list_filter = ["status", "source", "device_type", "sw_version"]
    list_select_related = ["device", "created_by"]
    search_fields = ["name", "host_name", "device__serial"]
    readonly_fields = [f.name for f in Trace._meta.fields if f.name not in ("name",)]
