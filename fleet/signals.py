"""What the fleet tells other apps, as Django signals: the fleet imports none of them.

``capture_wanted``: a health rule asks for a trace of a device (fleet/health/autocapture.py). Sent
with ``device`` (its host selected), ``duration_s`` and ``reason``; a receiver that starts a
capture returns the trace's id (traces/signals.py does), one that does not returns None.
"""

from django.dispatch import Signal

capture_wanted = Signal()
