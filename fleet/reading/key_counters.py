"""The key counters: the few counters a fleet listing, a device's graphs and the live
updates show. One table, read by the queries, the poll message, the charts, the templates
and (as JSON in every page) the JavaScript; adding a key counter is one line here.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from fleet.asicmon.catalogue import CATALOGUE

__all__ = [
    "KEY_COUNTERS",
    "NOT_REPORTED",
    "KeyCounter",
    "key_counter_names",
    "key_counters_json",
    "reported",
    "series_style",
]

# Shown for a counter the driver answered without: the device cannot give it (never zero).
NOT_REPORTED = "not reported"


@dataclass(frozen=True)
class KeyCounter:
    name: str  # the catalogue counter
    label: str  # column and chart title
    unit: str  # the unit shown, after scaling
    scale: float  # shown value = raw value * scale
    digits: int  # decimals shown
    colour: str  # of its chart line

    def __post_init__(self) -> None:
        if self.name not in CATALOGUE:
            raise ValueError(f"key counter {self.name!r} is not in the Asicmon catalogue")

    @property
    def suffix(self) -> str:
        return self.unit if self.unit == "%" else f" {self.unit}"

    def format(self, value) -> str:
        """The value as the fleet table shows it: "42%", "61.5 °C", "–" when unknown, or
        `NOT_REPORTED` (see `reported`)."""
        if value is NOT_REPORTED:
            return NOT_REPORTED
        if value is None or value == "":
            return "–"
        return f"{float(value) * self.scale:.{self.digits}f}{self.suffix}"


KEY_COUNTERS: tuple[KeyCounter, ...] = (
    KeyCounter("device_utilization", "Utilization", "%", 100.0, 0, "var(--counter-utilization)"),
    KeyCounter("temperature_c", "Temperature", "°C", 1.0, 1, "var(--counter-temperature)"),
    KeyCounter("power_w", "Power", "W", 1.0, 0, "var(--counter-power)"),
    KeyCounter("memory_used_bytes", "Memory used", "GiB", 1 / 2**30, 1, "var(--counter-memory)"),
)

# Counters graphed on a device page only while a health rule that reads them fires
# (fleet.reading.queries.RULE_COUNTERS); drawn with the same fields as the key counters.
RULE_SERIES: tuple[KeyCounter, ...] = (
    KeyCounter("clock_mhz", "Clock", "MHz", 1.0, 0, "var(--counter-clock)"),
    KeyCounter("ecc_corrected_per_s", "Corrected ECC errors", "/s", 1.0, 1, "var(--counter-ecc-corrected)"),
    KeyCounter("ecc_uncorrected_total", "Uncorrectable ECC errors", "count", 1.0, 0, "var(--counter-ecc-uncorrected)"),
    KeyCounter("pcie_link_width", "PCIe link width", "lanes", 1.0, 0, "var(--counter-pcie-width)"),
    KeyCounter("pcie_link_gen", "PCIe link generation", "gen", 1.0, 0, "var(--counter-pcie-gen)"),
    KeyCounter("pcie_errors_per_s", "PCIe errors", "/s", 1.0, 1, "var(--counter-pcie-errors)"),
)

# Readers look the table up when they run (never a copy taken at import), so that the table
# stays the one place to change.


def key_counter_names() -> list[str]:
    return [k.name for k in KEY_COUNTERS]


def reported(snapshot: dict | None, name: str):
    """A counter of a snapshot; `NOT_REPORTED` when the driver answered without it, None
    when nothing is known (never polled, or no answer)."""
    if not snapshot:
        return None
    value = snapshot.get(name)
    if value is None and snapshot.get("driver_status") == "ok":
        return NOT_REPORTED
    return value


def series_style(name: str) -> KeyCounter:
    """How a device page graphs ``name``: a key counter, or a counter behind a health rule."""
    for k in (*KEY_COUNTERS, *RULE_SERIES):
        if k.name == name:
            return k
    raise KeyError(f"{name!r} has no graph style in fleet.reading.key_counters")


def key_counters_json() -> list[dict]:
    """The table as the page JavaScript reads it (``lib/format.js``)."""
    return [{**asdict(k), "suffix": k.suffix} for k in KEY_COUNTERS]
