"""Deleting a trace deletes its files, once the deletion has committed."""

from django.db import transaction
from django.db.models.signals import post_delete
from django.dispatch import receiver

from traces.models import Trace


@receiver(post_delete, sender=Trace)
def delete_trace_files(sender, instance: Trace, **kwargs):
    from traces.services import delete_files

    trace_id = instance.pk
    transaction.on_commit(lambda: delete_files(trace_id))
