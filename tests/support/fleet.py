"""What several test folders share about a polled fleet."""

import time

# A fixed poll slot: the `polled_fleet` fixture polls the three cycles ending here, so that
# no test straddles a cycle boundary and tests can ask for exact times. It is the start of
# yesterday (UTC), not a constant: a slot fixed in the calendar falls out of the sample
# retention a week later and the samples written for it are refused. Not today's midnight
# either: a run in the first minutes of a day would find those samples inside the API's
# default "last 15 minutes" window (CI failed so at 00:05 UTC).
POLLED_CYCLE = float(int(time.time()) // 86_400 * 86_400 - 86_400)

# The small emulated fleet of the suite (2 hosts x 4 devices, three types): `fleet_settings`
# sets these for a test, and a stack shared by a test module starts with them.
TEST_FLEET = {
    "FLEET_SEED": 7,
    "FLEET_HOSTS": 2,
    "FLEET_DEVICES_PER_HOST": 4,
    "FLEET_TYPES": ("video", "inference", "gpu"),
    "POLL_SHARDS": 2,
}
