"""The emulated devices: what a device type is (`device_type`), the zoo of types read from
the Asimov specs (`zoo`, `spec_types`, `doubles`), one device's state and how it moves in
time (`physics`), its driver-error cascades (`driver_errors`) and the driver interfaces its
host's monitor reads (`drivers`)."""
