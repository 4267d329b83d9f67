"""Backend selection (atom_mxfp4.backends): FlyDSL is preferred on gfx950 only after its self-check passed; a failed
self-check raises for an explicit ``backend="flydsl"`` and falls back to Triton with one warning for ``None``.

No gfx950 device exists here, so the device probe and the self-check are replaced by fakes; what is tested is the
selection logic that runs on top of them.
"""

import warnings

import pytest
import torch

from atom_mxfp4 import backends
from atom_mxfp4.kernels import flydsl, triton


@pytest.fixture
def fake_gfx950(monkeypatch):
    """Pretend cuda:0 is a gfx950 device; `calls` counts self-checks, `fail` makes them raise."""
    state = {"calls": 0, "fail": False}

    def self_check(device):
        state["calls"] += 1
        if state["fail"]:
            raise RuntimeError("pa_decode mismatch vs torch: max |diff| 0.5 > tolerance 0.01 (case g16 split)")

    monkeypatch.setattr(flydsl, "self_check", self_check)
    monkeypatch.setattr(flydsl, "_is_gfx950", lambda device: device.type == "cuda")
    monkeypatch.setattr(backends, "_warned", set())
    for cached in (backends._resolve, flydsl._checked):
        cached.cache_clear()
    yield state
    for cached in (backends._resolve, flydsl._checked):
        cached.cache_clear()


def test_gfx950_prefers_flydsl_after_a_passing_self_check(fake_gfx950):
    chosen = backends.resolve_backend(None, "cuda:0")
    assert chosen.name == "flydsl"
    assert chosen.pa_decode is flydsl.pa_decode
    assert chosen.index_topk is triton.index_topk  # the explicit composition (FlyDSLBackend.borrows)
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


# ---- the registry -------------------------------------------------------------------------------------------------
def test_every_kernels_folder_is_registered_once():
    """Each folder of kernels/ registers exactly one backend; BACKENDS (the CLI's choices) is the registry."""
    import pkgutil

    from atom_mxfp4 import kernels, registry

    folders = {info.name for info in pkgutil.iter_modules(kernels.__path__) if info.ispkg}
    assert set(registry.registered()) == folders == set(backends.BACKENDS)
    assert backends.BACKENDS[0] == registry.REFERENCE_BACKEND
    for name, spec in registry.registered().items():
        assert spec.name == name and set(spec.ships) <= set(registry.OPS)
        assert spec.borrows is None or spec.borrows in backends.BACKENDS
        shipped = spec.load()
        assert all(callable(getattr(shipped, op)) for op in spec.ships)



def test_hopper_is_chosen_on_sm90_only_and_refused_elsewhere(monkeypatch):
    """backend=None picks the Gluon backend (kernels/hopper) on an sm_90 CUDA device, Triton's ops for the three it
    borrows; off sm_90 it is neither chosen nor runnable: an explicit request raises with the reason."""
    from atom_mxfp4.kernels import hopper

    backends._resolve.cache_clear()
    try:
        with pytest.raises(backends.BackendUnavailable, match="backend='hopper' cannot run here"):
            backends.resolve_backend("hopper", "cpu")
        assert "hopper" not in backends.available_backends("cpu")
        monkeypatch.setattr(hopper, "usable", lambda device: None)  # pretend an H200 is here
        monkeypatch.setattr(triton, "usable", lambda device: None)
        backends._resolve.cache_clear()
        assert backends.resolve_backend(None, "cuda:0").name == "hopper"
        assert backends.resolve_backend(None, "cpu").name != "hopper"
        table = backends.resolve_backend("hopper", "cuda:0")
        assert table.pa_decode is hopper.pa_decode and table.index_topk is triton.index_topk
    finally:
        backends._resolve.cache_clear()


def test_hopper_is_not_chosen_with_an_untested_triton(monkeypatch):
    """Gluon's API moves between triton releases: backend=None keeps Triton there, with one warning naming the
    version; an explicit backend='hopper' is still honoured."""
    from atom_mxfp4.kernels import hopper

    monkeypatch.setattr(hopper, "usable", lambda device: None)
    monkeypatch.setattr(triton, "usable", lambda device: None)
    monkeypatch.setattr(hopper, "_triton_version", lambda: "3.7.0")
    backends._resolve.cache_clear()
    backends._warned.clear()
    try:
        with pytest.warns(RuntimeWarning, match=r"triton 3\.7\.0 is not the one its GPU tests ran on"):
            assert backends.resolve_backend(None, "cuda:0").name == "triton"
        assert backends.resolve_backend("hopper", "cuda:0").pa_decode is hopper.pa_decode
    finally:
        backends._resolve.cache_clear()
        backends._warned.clear()


def test_unknown_backend_names_argument_expected_and_actual():
    expected = r"backend must be None or one of \['torch', 'triton', 'hopper', 'flydsl'\], got 'cuda'"
    with pytest.raises(ValueError, match=expected):
        backends.resolve_backend("cuda", "cpu")


def test_a_new_backend_is_one_registration(monkeypatch):
    """A registered class is all it takes: resolve_backend composes its ops (borrowing the rest), backend=None
    tries it in rank order, and an explicit request it refuses raises instead of falling back."""
    from types import SimpleNamespace

    from atom_mxfp4 import registry

    monkeypatch.setattr(registry, "_REGISTRY", dict(registry._REGISTRY))
    fake_ops = SimpleNamespace(pa_decode=lambda *a, **k: None, make_plan=lambda *a, **k: None)

    @registry.register_backend("fake", rank=-1)
    class Fake(registry.Backend):
        ships = ("pa_decode", "make_plan")
        borrows = "torch"
        refuse = False

        @classmethod
        def load(cls):
            return fake_ops

        @classmethod
        def unavailable(cls, device):
            return "refused for the test" if cls.refuse else None

        @classmethod
        def auto(cls, device):
            return not cls.refuse, None

    monkeypatch.setattr(backends, "BACKENDS", backends.BACKENDS + ("fake",))
    backends._resolve.cache_clear()
    try:
        table = backends.resolve_backend("fake", "cpu")
        assert table.pa_decode is fake_ops.pa_decode and table.index_topk is backends.resolve_backend(
            "torch", "cpu").index_topk
        assert backends.resolve_backend(None, "cpu").name == "fake"  # rank -1 comes first
        Fake.refuse = True
        backends._resolve.cache_clear()
        assert backends.resolve_backend(None, "cpu").name == "torch"
        with pytest.raises(backends.BackendUnavailable, match="backend='fake' cannot run here: refused for the test"):
            backends.resolve_backend("fake", "cpu")
    finally:
        backends._resolve.cache_clear()
