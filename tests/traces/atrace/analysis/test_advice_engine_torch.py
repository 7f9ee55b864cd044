"""The inference facts and rules on a real PyTorch profiler trace: a small attention model's
prefill and decode loop with a KV cache, recorded on the CPU (torch's CPU build) with its
phases marked by ``record_function`` — the ranges are recognised from the events, and on a
trace without device work none of the device rules (replay gaps, prefill stall, KV cache)
fires: the verdict is cpu-only, with its CPU hotspot."""

from __future__ import annotations

import json

import pytest

from tests.support.shared import made_once
from traces.atrace import advise, read_trace

pytestmark = pytest.mark.slow  # records PyTorch profiler traces of real models: seconds of CPU (make test runs it)

DECODE_STEPS = 12


def _record(out):
    import torch
    from torch.profiler import ProfilerActivity, profile, record_function

    torch.manual_seed(0)
    d, heads, vocab = 64, 4, 500
    emb = torch.nn.Embedding(vocab, d)
    qkv = torch.nn.Linear(d, 3 * d)
    proj = torch.nn.Linear(d, vocab)
    cache_k = torch.zeros(1, heads, 256, d // heads)
    cache_v = torch.zeros_like(cache_k)

    def attend(tokens, pos):
        x = emb(tokens)
        q, k, v = qkv(x).split(d, dim=-1)
        q, k, v = (t.view(1, -1, heads, d // heads).transpose(1, 2) for t in (q, k, v))
        n = k.shape[2]
        with record_function("kv_cache_write"):
            cache_k[:, :, pos:pos + n].copy_(k)
            cache_v[:, :, pos:pos + n].copy_(v)
        a = torch.nn.functional.scaled_dot_product_attention(q, cache_k[:, :, :pos + n], cache_v[:, :, :pos + n])
        return proj(a.transpose(1, 2).reshape(1, -1, d))[:, -1].argmax(-1)

    prompt = torch.randint(0, vocab, (1, 48))
    with torch.no_grad(), profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        with record_function("prefill"):
            token = attend(prompt, 0)
        pos = prompt.shape[1]
        for _ in range(DECODE_STEPS):
            with record_function("decode"):
                token = attend(token.view(1, 1), pos)
            pos += 1
    prof.export_chrome_trace(str(out / "decode.json"))


@pytest.fixture(scope="module")
def decode_trace(tmp_path_factory):
    pytest.importorskip("torch", reason="torch (CPU build) records the trace; it is in the shared virtualenv")
    return made_once(tmp_path_factory, "torch_decode", _record) / "decode.json"


def test_prefill_and_decode_ranges_are_read_from_the_events(decode_trace):
    raw = json.loads(decode_trace.read_text())["traceEvents"]
    ranges = {n: sum(1 for e in raw if e.get("name") == n and e.get("ph") == "X") for n in ("prefill", "decode")}
    assert ranges == {"prefill": 1, "decode": DECODE_STEPS}
    found = advise(read_trace(decode_trace))
    phases = found.account["inference"]["phases"]
    assert {k: v["count"] for k, v in phases.items()} == ranges
    assert any(line.startswith("Phases: prefill 1 ranges") for line in found.account["lines"])


def test_no_device_rule_fires_on_a_cpu_decode_loop(decode_trace):
    found = advise(read_trace(decode_trace))
    assert found.verdict == "cpu-only"
    assert not {"replay_gaps", "prefill_stall", "kv_cache", "graph_replays"} & set(found.rules), found.rules
    assert found.rules == ["cpu_hotspot"] and found.reason
