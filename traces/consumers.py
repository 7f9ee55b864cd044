"""The trace and job pages' websocket consumers: progress and state changes, forwarded."""

from channels.db import database_sync_to_async
from django.urls import path

from fleet.consumers import SignedInConsumer
from traces.events import job_group, trace_group
from traces.models import Job, Trace


class TraceConsumer(SignedInConsumer):
    """/ws/traces/<id>/: a trace's progress and state changes (traces/events.py)."""

    permission = "traces.view_trace"

    async def groups_for_connection(self):
        trace_id = self.scope["url_route"]["kwargs"]["trace_id"]
        exists = await database_sync_to_async(Trace.objects.filter(pk=trace_id).exists)()
        return [trace_group(trace_id)] if exists else None

    async def trace_changed(self, event):
        if await self.still_allowed():
            await self.send_json(event)

    async def trace_progress(self, event):
        if await self.still_allowed():
            await self.send_json(event)


class JobConsumer(SignedInConsumer):
    """/ws/jobs/<id>/: a job's state changes and its ranks' progress (traces/events.py)."""

    permission = "traces.view_trace"

    async def groups_for_connection(self):
        job_id = self.scope["url_route"]["kwargs"]["job_id"]
        exists = await database_sync_to_async(Job.objects.filter(pk=job_id).exists)()
        return [job_group(job_id)] if exists else None

    async def job_changed(self, event):
        if await self.still_allowed():
            await self.send_json(event)

    async def job_ranks(self, event):
        if await self.still_allowed():
            await self.send_json(event)


websocket_urlpatterns = [
    path("ws/traces/<int:trace_id>/", TraceConsumer.as_asgi()),
    path("ws/jobs/<int:job_id>/", JobConsumer.as_asgi()),
]
