"""Record a real serving run on this machine's CPU: a small PyTorch language model served with
continuous batching by a few lines of Python, under the PyTorch profiler, each request traced
with the OpenTelemetry SDK.

    .venv/bin/pip install torch==2.13.0   # the CPU wheel; not in requirements.txt
    .venv/bin/python tests/data/serving_torch/record.py [--out tests/data/serving_torch]

Writes ``trace.json.gz`` (the profiler's Chrome trace) and ``spans.jsonl.gz`` (the spans, one
OTLP JSON ExportTraceServiceRequest a line, as the SDK's OTLP JSON encoder writes them).
Each engine step is a ``record_function`` range whose name carries its batch,
``engine_step#N|<request id>:<tokens>,...`` (the profiler's ranges take no arguments).
"""

from __future__ import annotations

import argparse
import gzip
import os
import random
import threading
import time
from collections import deque
from pathlib import Path

import torch
from opentelemetry import trace
from opentelemetry.exporter.otlp.json.common._internal.trace_encoder import encode_spans
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from torch import nn

VOCAB, WIDTH, MAX_BATCH = 512, 64, 6


class TinyLM(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(VOCAB, WIDTH)
        layer = nn.TransformerEncoderLayer(WIDTH, nhead=4, dim_feedforward=4 * WIDTH, batch_first=True)
        self.body = nn.TransformerEncoder(layer, num_layers=2)
        self.head = nn.Linear(WIDTH, VOCAB)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.head(self.body(self.embed(tokens))[:, -1])


class Request:
    def __init__(self, rid: str, prompt: int, output: int) -> None:
        self.id, self.prompt, self.output = rid, prompt, output
        self.arrival = time.time_ns()
        self.admitted = self.first_token = self.done = 0
        self.generated = 0
        self.tokens = torch.randint(0, VOCAB, (1, prompt))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(Path(__file__).parent))
    parser.add_argument("--requests", type=int, default=24)
    args = parser.parse_args()
    torch.manual_seed(0)
    rng = random.Random(0)
    torch.set_num_threads(1)
    model = TinyLM().eval()
    exporter = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({
        "service.name": "tiny-lm", "process.pid": os.getpid(), "thread.name": str(threading.get_native_id())}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("serving")

    # Arrivals: Poisson at 40 a second, prompts of 8-96 tokens, 4-24 tokens out.
    gaps = [rng.expovariate(40.0) for _ in range(args.requests)]
    shapes = [(rng.choice([8, 16, 32, 96]), rng.randint(4, 24)) for _ in range(args.requests)]
    queue, running, finished, step = deque(), [], [], 0
    next_arrival = time.time() + gaps[0]
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof, torch.no_grad():
        while len(finished) < args.requests:
            while len(finished) + len(queue) + len(running) < args.requests and time.time() >= next_arrival:
                k = len(finished) + len(queue) + len(running)
                queue.append(Request(f"r{k:03d}", *shapes[k]))
                next_arrival += gaps[min(k + 1, len(gaps) - 1)]
            new = []
            while queue and len(running) + len(new) < MAX_BATCH:
                new.append(queue.popleft())
            if not new and not running:
                time.sleep(0.001)
                continue
            batch = ",".join([f"{r.id}:1" for r in running] + [f"{r.id}:{r.prompt}" for r in new])
            start = time.time_ns()
            with torch.profiler.record_function(f"engine_step#{step}|{batch}"):
                for r in new:
                    r.admitted = start
                    model(r.tokens)  # prefill: the whole prompt
                if running:
                    model(torch.cat([r.tokens[:, -8:] for r in running]))  # decode: one token each
            end = time.time_ns()
            members = running + new
            for r in members:
                r.generated += 1
                r.first_token = r.first_token or end
                if r.generated >= r.output:
                    r.done = end
                    finished.append(r)
            running = [r for r in members if r.generated < r.output]
            step += 1
    for r in finished:
        _spans(tracer, r)
    provider.shutdown()
    out = Path(args.out)
    prof.export_chrome_trace(str(out / "trace.json"))
    with (out / "trace.json").open("rb") as src, gzip.open(out / "trace.json.gz", "wb") as dst:
        dst.write(src.read())
    (out / "trace.json").unlink()
    spans = exporter.get_finished_spans()
    with gzip.open(out / "spans.jsonl.gz", "wb") as fh:
        for i in range(0, len(spans), 64):
            fh.write(encode_spans(spans[i : i + 64]).to_json().encode() + b"\n")
    print(f"{len(finished)} requests in {step} steps; {len(spans)} spans")


def _spans(tracer, r: Request) -> None:
    root = tracer.start_span("llm_request", kind=trace.SpanKind.SERVER, start_time=r.arrival, attributes={
        "gen_ai.request.id": r.id, "gen_ai.usage.input_tokens": r.prompt, "gen_ai.usage.output_tokens": r.generated})
    ctx = trace.set_span_in_context(root)
    for name, a, b in (("queue", r.arrival, r.admitted), ("prefill", r.admitted, r.first_token),
                       ("decode", r.first_token, r.done)):
        tracer.start_span(name, context=ctx, start_time=a).end(end_time=max(a, b))
    root.end(end_time=r.done)


if __name__ == "__main__":
    main()
