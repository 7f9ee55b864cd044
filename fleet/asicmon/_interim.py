"""Stand-in monitors used until a device type's spec compiles (milestone 1 only)."""

from __future__ import annotations

from fleet.asimov.runtime import DeviceMonitor


class InterimMonitor(DeviceMonitor):
    COUNTERS = ("device_utilization", "temperature_c", "power_w", "memory_used_bytes", "memory_total_bytes")

    def _probe(self, now):
        files, lib = self.files, self.lib
        if files is not None:
            mem = files.read_text("mem_info").split()
            busy = [int(files.read_text(f"core{c}/busy_us")) for c in range(int(files.read_text("num_cores")))]
            util = max((self._rate(c, b, now, 1 << 32) or 0) / 1e6 for c, b in enumerate(busy))
            return {
                "device_utilization": min(1.0, util),
                "temperature_c": int(files.read_text("hwmon/temp1_input")) / 1000,
                "power_w": float(files.read_text("power").split()[0]) / 1000,
                "memory_used_bytes": int(mem[3]),
                "memory_total_bytes": int(mem[1]),
            }
        if hasattr(lib, "nvmlInit"):
            lib.nvmlInit()
            h = lib.nvmlDeviceGetHandleByIndex(self.index)
            m = lib.nvmlDeviceGetMemoryInfo(h)
            return {
                "device_utilization": lib.nvmlDeviceGetUtilizationRates(h).gpu / 100,
                "temperature_c": lib.nvmlDeviceGetTemperature(h, 0),
                "power_w": lib.nvmlDeviceGetPowerUsage(h) / 1000,
                "memory_used_bytes": m.used,
                "memory_total_bytes": m.total,
            }
        from fleet.asimov.runtime import Out

        h, a, b = Out(), Out(), Out()
        lib.nx_open(self.index, h)
        lib.nx_get_temperature(h.value, 0, a)
        temp = a.value / 100
        lib.nx_get_power(h.value, a)
        power = a.value / 1e6
        lib.nx_get_memory(h.value, a, b)
        return {"device_utilization": None, "temperature_c": temp, "power_w": power, "memory_used_bytes": a.value * 1024, "memory_total_bytes": b.value * 1024}
