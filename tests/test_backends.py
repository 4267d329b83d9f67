"""Backend selection (atom_mxfp4.backends): FlyDSL is preferred on gfx950 only after its self-check passed; a failed
self-check raises for an explicit ``backend="flydsl"`` and falls back to Triton with one warning for ``None``.

No gfx950 device exists here, so the device probe and the self-check are replaced by fakes; what is tested is the
selection logic that runs on top of them.
"""

import sys
import warnings

import pytest
import torch

from atom_mxfp4 import backends
from atom_mxfp4.kernels import flydsl, triton

import _helpers as H


@pytest.fixture
def fake_gfx950(monkeypatch):
    """Pretend cuda:0 is a gfx950 device; `calls` counts self-checks, `fail` makes them raise."""
    state = {"calls": 0, "fail": False, "devices": []}

    def self_check(device):
        state["calls"] += 1
        state["devices"].append(device)
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


def test_a_device_without_an_index_is_the_current_one(fake_gfx950, monkeypatch):
    """resolve_backend(None, "cuda") on a process whose current device is cuda:1 (a tensor-parallel rank after
    torch.cuda.set_device) checks and picks for cuda:1: the FlyDSL self-check ran on cuda:0 before, creating a context
    and its buffers on another rank's GPU."""
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 1)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert backends.resolve_backend(None, "cuda").name == "flydsl"
    assert fake_gfx950["devices"] == [torch.device("cuda", 1)]
    backends.resolve_backend(None, "cuda:1")  # the same device: no second self-check
    assert fake_gfx950["calls"] == 1


def test_cuda_without_cuda_asks_for_no_current_device(monkeypatch):
    """Where CUDA is not available "cuda" stays as given (torch's current_device would raise): resolution runs as it
    did before devices without an index were made concrete."""
    def no_device():
        raise AssertionError("Torch not compiled with CUDA enabled")

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.cuda, "current_device", no_device)
    backends._resolve.cache_clear()
    try:
        assert backends.resolve_backend(None, "cuda").name in backends.BACKENDS
    finally:
        backends._resolve.cache_clear()


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
    """Each folder of atom_mxfp4/kernels/ registers exactly one backend; BACKENDS (the CLI's choices) is the
    registry."""
    import pkgutil

    from atom_mxfp4 import kernels, registry

    folders = {info.name for info in pkgutil.iter_modules(kernels.__path__) if info.ispkg}
    assert set(registry.registered()) == folders == set(backends.BACKENDS)
    assert backends.BACKENDS[0] == registry.REFERENCE_BACKEND
    for name, spec in registry.registered().items():
        assert spec.name == name and set(spec.ships) <= set(registry.OPS + registry.FUSED_OPS)
        assert spec.borrows is None or spec.borrows in backends.BACKENDS
        shipped = spec.load()
        assert all(callable(getattr(shipped, op)) for op in spec.ships)



def test_hopper_is_chosen_on_sm90_only_and_refused_elsewhere(monkeypatch):
    """backend=None picks the Gluon backend (atom_mxfp4/kernels/hopper) on an sm_90 CUDA device, Triton's ops for the
    three it borrows; off sm_90 it is neither chosen nor runnable: an explicit request raises with the reason."""
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
        assert table.pa_decode is hopper.pa_decode and table.index_topk is hopper.index_topk  # shipped since 2026-12-03
        assert table.build_sparse_tables is triton.build_sparse_tables  # borrowed
    finally:
        backends._resolve.cache_clear()


def test_hopper_needs_the_triton_it_is_written_for(monkeypatch):
    """Gluon's API moves between triton releases (3.7 renamed gl.thread_barrier): with a triton whose build has not run
    the GPU tests (3.7 here; 3.6, 3.8 and 3.9 have), backend=None on an sm_90 device keeps Triton with one warning
    naming the version, and backend='hopper' is refused with it."""
    from atom_mxfp4.kernels import hopper

    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: (9, 0))
    monkeypatch.setattr(hopper, "_triton_version", lambda: "3.7.1")
    monkeypatch.setattr(triton, "usable", lambda device: None)
    backends._resolve.cache_clear()
    backends._warned.clear()
    try:
        warning = (r"needs triton 3\.6\.x, 3\.8\.x or 3\.9\.x.*got triton 3\.7\.1 "
                   r"\(ATOM_MXFP4_HOPPER_TRITON_SERIES=3\.7 takes it untested\); using the Triton backend")
        with pytest.warns(RuntimeWarning, match=warning):
            assert backends.resolve_backend(None, "cuda:0").name == "triton"
        with pytest.raises(backends.BackendUnavailable, match=r"got triton 3\.7\.1"):
            backends.resolve_backend("hopper", "cuda:0")
        for version in ("3.6.0", "3.8.0", "3.9.0"):  # the series whose builds ran the GPU tests
            monkeypatch.setattr(hopper, "_triton_version", lambda: version)
            backends._resolve.cache_clear()
            assert hopper.usable(torch.device("cuda", 0)) is None
    finally:
        backends._resolve.cache_clear()
        backends._warned.clear()


def test_hopper_takes_another_series_only_when_asked(monkeypatch):
    """ATOM_MXFP4_HOPPER_TRITON_SERIES adds series the backend takes untested (to run its GPU tests under a new
    release): parsed as comma-separated major.minor, a malformed value refused naming the variable."""
    from atom_mxfp4.kernels import hopper

    for value, series in (("", ()), ("3.10", ("3.10.",)), (" 3.7., 3.10 ", ("3.7.", "3.10."))):
        monkeypatch.setenv(hopper.SERIES_ENV, value)
        assert hopper._extra_series() == series, value
    for value in ("3", "3.9x", "three.nine", "3.9.0"):
        monkeypatch.setenv(hopper.SERIES_ENV, value)
        with pytest.raises(ValueError, match=f"ATOM_MXFP4_HOPPER_TRITON_SERIES must be .*got {value!r}"):
            hopper._extra_series()
    monkeypatch.setattr(hopper, "_triton_version", lambda: "3.10.0")
    assert "got triton 3.10.0" in hopper._triton_problem()
    monkeypatch.setattr(hopper, "ACCEPTED_SERIES", hopper.TRITON_SERIES + ("3.10.",))
    assert hopper._triton_problem() is None


def test_hopper_kernels_import_under_triton_3_9():
    """Under triton 3.9 (torch 2.15's pin; .triton39/ from scripts/install.d/45-triton-series.sh) the Hopper kernels
    import (3.9's Gluon names: atom_mxfp4/kernels/hopper/_gluon.py), with or without ATOM_MXFP4_HOPPER_TRITON_SERIES:
    3.9 is in TRITON_SERIES since its GPU tests passed on the H200 (2026-12-05). Before that it needed the variable."""
    import os
    import subprocess

    from atom_mxfp4.kernels import hopper

    folder = H.triton_series_dir("3.9")
    probe = ("import triton; from atom_mxfp4.kernels import hopper; "
             "print(triton.__version__, hasattr(hopper, 'pa_decode'), hasattr(hopper, 'index_topk'), "
             "hopper._triton_problem())")
    env = {key: value for key, value in os.environ.items() if key != "TRITON_INTERPRET"}
    env["PYTHONPATH"] = os.pathsep.join([str(folder)] + [p for p in [env.get("PYTHONPATH")] if p])
    found = {}
    for value in ("", "3.10"):
        env[hopper.SERIES_ENV] = value
        done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env, timeout=300)
        assert done.returncode == 0, done.stderr[-3000:]
        found[value] = done.stdout.strip().splitlines()[-1]
    assert found == {"": "3.9.0 True True None", "3.10": "3.9.0 True True None"}, found
