"""One listener per web process for the shards' polls, handing each open page its rows.

The channel layer delivers a shard's poll message once to each web process with a page
open, not once per page: the process's listener is the only member of the shard groups.
Per poll it reads, once, the devices polled, the lines of every open page's rows and the
fleet's summary, encodes each line once, and sends each page its own rows straight to its
socket (no per-page channel message, no per-page wake-up of a consumer). A process with
no page open has left the groups and reads nothing.

The pages are the consumers of fleet/consumers.py, known here only by what they offer:
``visible`` (the device ids they show), ``wants_summary``, ``access_due()``, ``still_allowed()`` and
``message_for(poll)`` returning the text to send or None.
"""

import asyncio
import json
import logging
from dataclasses import dataclass, field

from asgiref.sync import sync_to_async
from channels.db import database_sync_to_async
from channels.layers import get_channel_layer
from django.conf import settings
from django.db import DatabaseError
from redis.exceptions import RedisError

from fleet.events import latest_lines, polled_ids, shard_group
from fleet.health import index as health_index
from fleet.reading import queries

log = logging.getLogger(__name__)

TRANSIENT_ERRORS = (OSError, DatabaseError, RedisError)
# The listener joins its groups again this often (seconds): the channel layer forgets a
# member after its group expiry (a day by default), whether or not polls arrived.
REJOIN_EVERY = 600.0


@dataclass
class Poll:
    """What a process read for one shard poll, shared by its pages."""

    shard: int
    cycle: float
    ids: frozenset[int]
    lines: dict[int, str]  # device id -> its line, JSON-encoded once
    summary: dict | None
    summary_text: str | None = field(default=None)

    async def lines_of(self, shown: list[int]) -> list[str]:
        """The encoded lines of a page's rows; rows it started showing after the process read
        the lines are read for it alone."""
        missing = [device_id for device_id in shown if device_id not in self.lines]
        if missing:
            self.lines.update(encoded_lines(await lines_of(missing)))
        return [self.lines[device_id] for device_id in shown if device_id in self.lines]


class Fanout:
    """The listener of one web process (one event loop): started by the first page that
    joins, stopped when the last one leaves."""

    def __init__(self):
        self.pages: set = set()
        self.channel: str | None = None
        self.task: asyncio.Task | None = None
        self.lock = asyncio.Lock()
        self.polls_read = 0

    async def join(self, page) -> None:
        self.pages.add(page)
        async with self.lock:
            if self.pages and (self.task is None or self.task.done()):
                layer = get_channel_layer()
                self.channel = await layer.new_channel()
                await self.join_groups()
                self.task = asyncio.get_running_loop().create_task(self.listen())

    async def leave(self, page) -> None:
        self.pages.discard(page)
        async with self.lock:
            if self.pages or self.task is None:
                return
            self.task.cancel()
            try:
                await self.task
            except asyncio.CancelledError:
                pass
            except Exception:
                log.exception("the fleet listener failed")
            self.task = None
            layer = get_channel_layer()
            try:
                for shard in range(settings.POLL_SHARDS):
                    await layer.group_discard(shard_group(shard), self.channel)
            except TRANSIENT_ERRORS:  # the groups forget it at their expiry; its messages expire
                log.warning("the fleet listener could not leave its groups", exc_info=True)

    async def join_groups(self) -> None:
        layer = get_channel_layer()
        for shard in range(settings.POLL_SHARDS):
            await layer.group_add(shard_group(shard), self.channel)

    async def listen(self) -> None:
        layer = get_channel_layer()
        while True:
            try:
                event = await asyncio.wait_for(layer.receive(self.channel), REJOIN_EVERY)
            except TimeoutError:
                await self.join_groups()
                continue
            except TRANSIENT_ERRORS:
                log.warning("the fleet listener lost the channel layer; trying again", exc_info=True)
                await asyncio.sleep(1)
                continue
            if event.get("type") == "fleet.polled":
                try:
                    await self.deliver(event)
                except Exception:
                    log.exception("a poll could not be delivered to the fleet's pages")

    async def deliver(self, event: dict) -> None:
        """Reads what the process's pages need of a poll once, then sends each its message."""
        pages = list(self.pages)
        if not pages:
            return
        self.polls_read += 1
        visible = frozenset().union(*(page.visible for page in pages))
        poll = await read_poll(event, visible, any(page.wants_summary for page in pages))
        due = [page for page in pages if page.access_due()]
        if due:  # asked together, decided in one batch (fleet.consumers.batched_refusal)
            allowed = await asyncio.gather(*(page.still_allowed() for page in due), return_exceptions=True)
            for page, ok in zip(due, allowed, strict=True):
                if ok is not True:  # refused (closed), or not decided: checked again next poll
                    if isinstance(ok, BaseException):
                        log.warning("a page's access could not be checked: %r", ok)
                    else:
                        self.pages.discard(page)
                    pages.remove(page)
        for page in pages:
            try:
                text = await page.message_for(poll)
                if text is not None:
                    await page.send(text_data=text)
            except Exception:
                log.exception("a page's poll message failed")


async def read_poll(event: dict, visible: frozenset[int], with_summary: bool) -> Poll:
    ids = await polled_of(event["poll"])
    wanted = sorted(visible & ids)
    lines, summary = await asyncio.gather(lines_of(wanted), summary_now() if with_summary else _none())
    poll = Poll(event["shard"], event["cycle"], ids, encoded_lines(lines), summary)
    if summary is not None:
        poll.summary_text = json.dumps(summary)
    return poll


async def _none() -> None:
    return None


def encoded_lines(lines: list) -> dict[int, str]:
    return {line["id"]: json.dumps(line) for line in lines}


async def polled_of(poll: str) -> frozenset[int]:
    try:
        return await sync_to_async(polled_ids, thread_sensitive=False)(poll)
    except TRANSIENT_ERRORS:
        return frozenset()  # Redis hiccuped: the next poll brings the rows


async def lines_of(device_ids: list[int]) -> list:
    """The poll lines of devices, from their latest snapshots (none on a Redis hiccup: the
    next poll brings them)."""
    if not device_ids:
        return []
    try:
        return await sync_to_async(latest_lines, thread_sensitive=False)(device_ids)
    except TRANSIENT_ERRORS:
        return []


async def summary_now() -> dict | None:
    try:
        return await database_sync_to_async(_summary)()
    except TRANSIENT_ERRORS:
        return None  # Redis or the database hiccuped: the next poll brings the summary


def _summary() -> dict:
    return queries.fleet_summary(health_index.read()).to_json()


_fanout: list = [None, None]  # the event loop, its Fanout


def fanout() -> Fanout:
    """This process's (this event loop's) listener."""
    loop = asyncio.get_running_loop()
    if _fanout[0] is not loop:
        _fanout[:] = [loop, Fanout()]
    return _fanout[1]
