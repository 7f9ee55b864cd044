"""Fixtures: real PyTorch profiler traces of small models, made on the CPU once per test run."""

from __future__ import annotations

import pytest

from tests.support.shared import made_once


def _profile(path, model, make_input, steps=3, train=True, record_shapes=True):
    import torch
    from torch.profiler import ProfilerActivity, profile, record_function

    torch.manual_seed(0)
    opt = torch.optim.SGD(model.parameters(), lr=0.01) if train else None
    with profile(activities=[ProfilerActivity.CPU], record_shapes=record_shapes) as prof:
        for i in range(steps):
            with record_function(f"ProfilerStep#{i}"):
                x = make_input()
                if train:
                    loss = model(x).float().sum()
                    loss.backward()
                    opt.step()
                    opt.zero_grad()
                else:
                    with torch.no_grad():
                        model(x)
    prof.export_chrome_trace(str(path))
    return path


TORCH_MODELS = ("mlp", "cnn", "transformer")


def _profile_models(out):
    import torch
    from torch import nn

    mlp = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10))
    cnn = nn.Sequential(nn.Conv2d(3, 8, 3), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(), nn.Linear(8 * 15 * 15, 10))
    attn = nn.TransformerEncoderLayer(d_model=32, nhead=4, dim_feedforward=64, batch_first=True)
    _profile(out / "mlp.json", mlp, lambda: torch.randn(16, 64))
    _profile(out / "cnn.json", cnn, lambda: torch.randn(4, 3, 32, 32), train=False)
    _profile(out / "transformer.json", attn, lambda: torch.randn(2, 16, 32))


@pytest.fixture(scope="session")
def torch_traces(tmp_path_factory):
    """{name: path} of Kineto JSON traces of three small models, profiled on the CPU once
    per test run (xdist workers share them: importing torch alone takes seconds)."""
    out = made_once(tmp_path_factory, "torch_traces", _profile_models)
    return {name: out / f"{name}.json" for name in TORCH_MODELS}


@pytest.fixture(scope="session")
def gpu_trace(tmp_path_factory):
    """A synthetic Kineto trace with GPU kernels, streams, ac2g flows and syncs."""
    from tests.support.tracegen import write_kineto_trace

    path = tmp_path_factory.mktemp("synthetic") / "gpu.json"
    write_kineto_trace(path, 6000, seed=3, layers=4)
    return path
