"""Backend selection (atom_mxfp4.backends): FlyDSL is preferred on gfx950 only after its self-check passed; a failed
self-check raises for an explicit ``backend="flydsl"`` and falls back to Triton with one warning for ``None``.

No gfx950 device exists here, so the device probe and the self-check are replaced by fakes; what is tested is the
selection logic that runs on top of them.
"""

import warnings

import pytest
import torch

from atom_mxfp4 import backends


@pytest.fixture
def fake_gfx950(monkeypatch):
    """Pretend cuda:0 is a gfx950 device; `calls` counts self-checks, `fail` makes them raise."""
    state = {"calls": 0, "fail": False}

    def self_check(device):
        state["calls"] += 1
        if state["fail"]:
            raise RuntimeError("pa_decode mismatch vs torch: max |diff| 0.5 > tolerance 0.01 (case g16 split)")

    flydsl = backends._import("flydsl")
    monkeypatch.setattr(flydsl, "self_check", self_check)
    monkeypatch.setattr(backends, "_is_gfx950", lambda device: device.type == "cuda")
    monkeypatch.setattr(backends, "_warned", set())
    for cached in (backends._resolve, backends._flydsl_checked):
        cached.cache_clear()
    yield state
    for cached in (backends._resolve, backends._flydsl_checked):
        cached.cache_clear()


def test_gfx950_prefers_flydsl_after_a_passing_self_check(fake_gfx950):
    chosen = backends.resolve_backend(None, "cuda:0")
    assert chosen.name == "flydsl"
    assert chosen.pa_decode is backends._import("flydsl").pa_decode
    assert chosen.index_topk is backends._import("triton").index_topk  # the explicit composition
    backends.resolve_backend("flydsl", "cuda:0")
    assert fake_gfx950["calls"] == 1  # once per process and device


def test_failed_self_check_falls_back_to_triton_with_one_warning(fake_gfx950):
    fake_gfx950["fail"] = True
    with pytest.warns(RuntimeWarning, match="self-check failed.*mismatch"):
        assert backends.resolve_backend(None, "cuda:0").name == "triton"
    backends._resolve.cache_clear()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a second resolution does not warn again
        assert backends.resolve_backend(None, "cuda:0").name == "triton"


def test_failed_self_check_raises_for_explicit_flydsl(fake_gfx950):
    fake_gfx950["fail"] = True
    with pytest.raises(backends.BackendUnavailable, match="self-check.*mismatch"):
        backends.resolve_backend("flydsl", "cuda:0")


def test_flydsl_refused_off_gfx950():
    with pytest.raises(backends.BackendUnavailable, match="gfx950"):
        backends.resolve_backend("flydsl", torch.device("cuda", 0))


def test_explicit_triton_without_a_gpu_or_interpreter_is_refused(monkeypatch):
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    backends._resolve.cache_clear()
    with pytest.raises(backends.BackendUnavailable, match="triton"):
        backends.resolve_backend("triton", "cpu")
    assert "triton" not in backends.available_backends("cpu")
