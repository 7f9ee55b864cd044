"""The latest snapshot of every device, kept in Redis.

Two hashes: device id -> snapshot JSON, and device id -> the poll cycle it came from.
A write never replaces a snapshot with one from an older cycle, so a late retry of a
shard cannot roll the fleet page back.
"""

import json

from fleet.redis import get_redis, key

_WRITE_IF_NEWER = """
local written = 0
for i = 1, #ARGV, 3 do
  local id, cycle, body = ARGV[i], tonumber(ARGV[i + 1]), ARGV[i + 2]
  local current = tonumber(redis.call('HGET', KEYS[2], id) or '-1')
  if cycle >= current then
    redis.call('HSET', KEYS[1], id, body)
    redis.call('HSET', KEYS[2], id, cycle)
    written = written + 1
  end
end
return written
"""


def _keys() -> tuple[str, str]:
    return key("snapshots"), key("snapshot-cycles")


def write_snapshots(cycle: float, snapshots: dict[int, dict]) -> int:
    """Store snapshots of one cycle in one round trip; returns how many were newer."""
    if not snapshots:
        return 0
    args: list = []
    for device_id, snapshot in snapshots.items():
        args += [device_id, repr(cycle), json.dumps({**snapshot, "cycle": cycle})]
    client = get_redis()
    script = client.register_script(_WRITE_IF_NEWER)
    return int(script(keys=list(_keys()), args=args))


def read_snapshots(device_ids: list[int] | None = None) -> dict[int, dict]:
    """Latest snapshots by device id; a device never polled is absent."""
    snapshots_key, _ = _keys()
    client = get_redis()
    if device_ids is None:
        raw = client.hgetall(snapshots_key)
        return {int(k): json.loads(v) for k, v in raw.items()}
    if not device_ids:
        return {}
    values = client.hmget(snapshots_key, device_ids)
    return {i: json.loads(v) for i, v in zip(device_ids, values, strict=True) if v is not None}


def read_snapshot(device_id: int) -> dict | None:
    return read_snapshots([device_id]).get(device_id)


def forget_snapshots(device_ids: list[int]) -> None:
    if device_ids:
        client = get_redis()
        for name in _keys():
            client.hdel(name, *device_ids)
