"""``ATOM_MXFP4_HOST_METER``: our host time per forward batch inside the server, logged and read back (issue 39).

The meter on a stand-in backend with a stepped clock (what each part adds, the line, ``parse`` of it), then in the
real backend as SGLang drives it (hand-built ForwardBatches through the installed attention hook, torch kernels):
one line per N batches, with the decode and extend batches and the layers of each.
"""

from __future__ import annotations

import importlib.util
from types import SimpleNamespace

import pytest
import torch

from atom_mxfp4.model_patches.sglang import meter

needs_sglang = pytest.mark.skipif(importlib.util.find_spec("sglang") is None,
                                  reason="SGLang is not installed (scripts/install.d/30-sglang.sh installs it)")


class _Mode:
    def __init__(self, decode):
        self.decode = decode

    def is_decode_or_idle(self):
        return self.decode


class _Backend:
    """The three methods the meter wraps, each advancing the clock by its own cost."""

    def __init__(self, clock):
        self.clock = clock

    def init_forward_metadata_out_graph(self, forward_batch, in_capture=False):
        self.clock[0] += 30e-6

    def init_forward_metadata_in_graph(self, forward_batch):
        self.clock[0] += 10e-6

    def attend(self, module, qkv, out):
        self.clock[0] += 25e-6


def test_the_meter_adds_each_part_per_batch_kind_and_logs_every_n_batches(caplog):
    clock = [0.0]
    backend = _Backend(clock)
    meter.HostMeter(3, clock=lambda: clock[0]).install(backend)
    caplog.set_level("INFO", logger=meter.logger.name)
    backend.init_forward_metadata_out_graph(SimpleNamespace(forward_mode=_Mode(True)), in_capture=True)  # not counted
    for decode, layers in ((True, 4), (True, 4), (False, 2), (True, 4)):  # the fourth batch ends the first three
        batch = SimpleNamespace(forward_mode=_Mode(decode))
        backend.init_forward_metadata_out_graph(batch)
        backend.init_forward_metadata_in_graph(batch)
        for _ in range(layers):
            backend.attend(None, None, None)
    (line,) = [r.getMessage() for r in caplog.records]
    assert line == ("atom_mxfp4 host time, last 3 batches: decode 2 (metadata 40.0 us + attention 100.0 us over 4.0 "
                    "layers = 140.0 us a batch); extend 1 (metadata 40.0 us + attention 50.0 us over 2.0 layers = "
                    "90.0 us a batch)")
    assert meter.parse("x\n[t] " + line + "\n") == [{
        "batches": 3,
        "decode": {"batches": 2, "metadata_us": 40.0, "attention_us": 100.0, "layers": 4.0, "total_us": 140.0},
        "extend": {"batches": 1, "metadata_us": 40.0, "attention_us": 50.0, "layers": 2.0, "total_us": 90.0}}]
    assert meter.parse("atom_mxfp4 host time, last 2 batches: decode 2 (metadata 1.0 us + attention 2.0 us over 1.0 "
                       "layers = 3.0 us a batch); extend 0") == [{
        "batches": 2, "decode": {"batches": 2, "metadata_us": 1.0, "attention_us": 2.0, "layers": 1.0,
                                 "total_us": 3.0}, "extend": {"batches": 0}}]


@pytest.mark.parametrize("value", ["-1", "ten", "1.5"])
def test_a_bad_setting_is_refused_by_name(monkeypatch, value):
    monkeypatch.setenv(meter.ENV, value)
    with pytest.raises(ValueError, match=f"{meter.ENV}.*whole number.*{value}"):
        meter.every()


@needs_sglang
def test_off_wraps_nothing(monkeypatch):
    import test_sglang_backend as B

    monkeypatch.delenv(meter.ENV, raising=False)
    backend, _ = B.make_setup()
    assert "attend" not in vars(backend) and "init_forward_metadata_out_graph" not in vars(backend)


@needs_sglang
def test_the_real_backend_logs_its_batches_and_layers(monkeypatch, caplog):
    import test_sglang_backend as B
    from sglang.srt.model_executor.forward_context import ForwardContext, forward_context
    from sglang.srt.models.minimax_m3 import MiniMaxM3Attention

    monkeypatch.setenv(meter.ENV, "2")
    backend, req_to_token = B.make_setup()
    caplog.set_level("INFO", logger=meter.logger.name)
    gen = torch.Generator().manual_seed(5)
    width = {s: (backend.configs[s].num_q_heads + 2 * backend.configs[s].num_kv_heads) * 128 for s in (False, True)}
    modules = [B.StandInAttention(0, False, width[False], gen), B.StandInAttention(1, True, width[True], gen)]
    steps = [({0: 0, 1: 0}, {0: 20, 1: 3}), ({0: 20, 1: 3}, {0: 1, 1: 1}), ({0: 21, 1: 4}, {0: 1, 1: 1})]
    with forward_context(ForwardContext(attn_backend=backend)):
        for done, new in steps + [steps[-1]]:  # the fourth batch's start ends the third: one line for batches 1-2
            fb = B.forward_batch(backend, req_to_token, done, new)
            backend.init_forward_metadata(fb)
            for module in modules:
                hidden = torch.randn(fb.positions.numel(), backend.configs[True].qkv_width, generator=gen).bfloat16()
                MiniMaxM3Attention.forward(module, fb.positions, hidden, fb)
    found = meter.parse("\n".join(r.getMessage() for r in caplog.records))
    assert [(f["batches"], f["decode"]["batches"], f["extend"]["batches"]) for f in found] == [(2, 1, 1)]
    decode, extend = found[0]["decode"], found[0]["extend"]
    assert decode["layers"] == extend["layers"] == 2.0
    assert all(v > 0 for v in (decode["metadata_us"], decode["attention_us"], extend["attention_us"]))
