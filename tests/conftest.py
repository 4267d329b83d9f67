"""Markers: `gpu` tests need CUDA (run on the lent H200 by scripts/gpu_run.sh); `gfx950` tests need an AMD
MI355X. Elsewhere they are skipped, and the reason shows in the report (pytest -ra)."""

import os

import pytest
import torch

# Without a GPU, Triton kernels run under the interpreter. It must be on before anything imports triton (the
# @triton.jit decorators read it at import), and test modules import the backends in any order.
if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")


def _is_gfx950() -> bool:
    if not torch.cuda.is_available() or getattr(torch.version, "hip", None) is None:
        return False
    return "gfx950" in getattr(torch.cuda.get_device_properties(0), "gcnArchName", "")


def pytest_collection_modifyitems(config, items):
    has_cuda = torch.cuda.is_available()
    gfx950 = _is_gfx950()
    for item in items:
        if "gpu" in item.keywords and not has_cuda:
            item.add_marker(pytest.mark.skip(reason="needs a CUDA GPU: run on the H200 with scripts/gpu_run.sh"))
        if "gfx950" in item.keywords and not gfx950:
            item.add_marker(pytest.mark.skip(reason="needs an AMD gfx950 GPU (MI355X): numerics unverified here"))


@pytest.fixture(autouse=True)
def _fresh_op_replay():
    """Each test starts with no op traces (atom_mxfp4.op_replay): a test that changes a backend's policy or stands in
    a kernel must not replay launches another test traced."""
    from atom_mxfp4 import op_replay

    op_replay.clear()
    yield
    op_replay.clear()


@pytest.fixture
def compiled_backends_on_cpu(monkeypatch):
    """The Hopper and Triton backends resolvable on the CPU: their host path runs, every launch recorded (the list
    yielded: atom_mxfp4.launch.recording), nothing compiled or run."""
    import _helpers as H

    from atom_mxfp4 import backends, launch

    H.compiled_backends_resolvable(monkeypatch)
    with launch.recording() as launches:
        yield launches
    backends._resolve.cache_clear()
