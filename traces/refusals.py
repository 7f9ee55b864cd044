"""What the writers of traces turn down, each with the HTTP status to answer it with."""


class TraceRefused(Exception):
    """A request the service turns down; ``status`` is the HTTP status to answer with."""

    status = 400


class BadTrace(TraceRefused):
    status = 400


class DeviceBusy(TraceRefused):
    status = 409


class CaptureUnavailable(TraceRefused):
    """The device's host cannot capture traces (fleet.agent.queues says why)."""

    status = 409


class StorageFull(TraceRefused):
    status = 507
