"""A capture of an emulated device that serves requests: the inference service runs while the
trace is captured, and its spans (made by the OpenTelemetry SDK) go over OTLP/HTTP to
EMULATOR_OTLP_ENDPOINT (Asicmon's own /v1/traces by default) when OTLP_TOKEN is set, or
straight beside the trace when it is not. The service plays the serving problems the capture
asked for (``problems``: long_prefill, throttled, host_stall, full_queue)."""

from __future__ import annotations

import logging
from functools import partial

from django.conf import settings

from emulator.serving.engine import ServingConfig
from emulator.serving.live import capture_serving_live
from emulator.serving.spans import emit_request, memory_provider, otlp_provider, resource_for

log = logging.getLogger(__name__)


def serving_for(trace):
    """The ``serving=`` argument of capture_live for ``trace``, or None when its device type
    does not serve requests."""
    if trace.device_type not in settings.EMULATOR_SERVING_TYPES:
        return None
    resource = resource_for(trace.host_name, trace.device.serial if trace.device else "")
    memory = None
    if settings.OTLP_TOKEN:
        provider = otlp_provider(settings.EMULATOR_OTLP_ENDPOINT, settings.OTLP_TOKEN, resource)
    else:
        provider, memory = memory_provider(resource)
    tracer = provider.get_tracer("asicmon.emulator.serving")

    def on_end(run) -> None:
        provider.force_flush(10_000)
        provider.shutdown()
        if memory is not None:
            from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

            from traces.atrace.io.otlp import spans_of
            from traces.requests.store import store_spans

            finished = memory.get_finished_spans()
            if finished:
                store_spans(spans_of(encode_spans(finished)), trace=trace)
        log.info("trace %s: served %d requests in %d steps", trace.pk, len(run.requests), len(run.steps))

    problems = frozenset(trace.params.get("problems", ()))  # SERVING_PROBLEMS, checked when asked
    return partial(capture_serving_live, config=ServingConfig(seed=trace.pk, problems=problems),
                   on_done=partial(emit_request, tracer), on_end=on_end, device_type=trace.device_type)
