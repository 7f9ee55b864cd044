"""Error events: identical events merged in the channel with their count and times, distinct
ones kept apart."""

from fleet.asicmon.errors import ErrorEvent, EventChannel


def test_channel_merges_identical_events_and_keeps_distinct_ones():
    channel = EventChannel(bucket_s=60)
    for i in range(5):
        channel.put(ErrorEvent("nvidia", "74", f"NVLink: fatal error detected on link {i}", 100.0 + i, address="0000:3b:00"))
    channel.put(ErrorEvent("nvidia", "48", "DBE", 101.0, address="0000:3b:00"))
    events = channel.drain()
    assert [(e.code, e.count, e.last_seen) for e in events] == [("74", 5, 104.0), ("48", 1, 101.0)]
    assert channel.drain() == []
