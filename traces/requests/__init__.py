"""Request spans: OpenTelemetry spans received over OTLP/HTTP or uploaded beside a trace,
kept for a bounded window and joined to the device traces captured in it."""
