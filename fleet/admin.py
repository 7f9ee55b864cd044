from django.contrib import admin

from fleet.models import Counter, Device, Host


@admin.register(Host)
class HostAdmin(admin.ModelAdmin):
    list_display = ["name", "created_at"]
    search_fields = ["name"]


@admin.register(Device)
class DeviceAdmin(admin.ModelAdmin):
    list_display = ["serial", "host", "device_type", "model", "index", "state"]
    list_filter = ["device_type", "state"]
    list_select_related = ["host"]
    search_fields = ["serial", "host__name"]


@admin.register(Counter)
class CounterAdmin(admin.ModelAdmin):
    list_display = ["name", "unit", "kind", "description"]
    search_fields = ["name"]
