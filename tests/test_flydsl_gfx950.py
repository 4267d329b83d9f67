"""FlyDSL pa_decode on real gfx950 hardware against the torch backend (skipped without an MI350/MI355X).

Run on a gfx950 machine:  python -m pytest -q -m gfx950 tests/test_flydsl_gfx950.py
Each case goes through the public op (``atom_mxfp4.ops.pa_decode(backend="flydsl")``) with a NaN-poisoned
``out``, on both the split (plan from ``plan_pa_decode``) and the direct path, and is compared with the torch
backend fed the query the kernel computes with (``cases.kernel_query``), within ``cases.tolerance``.
"""

from __future__ import annotations

import math

import pytest
import torch

from atom_mxfp4.kernels.flydsl import cases as C
from atom_mxfp4.kernels.flydsl import is_available

DEVICE = torch.device("cuda", 0) if torch.cuda.is_available() else torch.device("cpu")
pytestmark = [
    pytest.mark.gfx950,
    pytest.mark.skipif(not is_available(DEVICE), reason="needs an AMD gfx950 GPU (MI350/MI355X) with ROCm torch "
                       "and flydsl; this machine has none (CPU-side checks: tests/test_flydsl_compile.py, "
                       "tests/test_flydsl_layout.py)"),
]


def _run(case, plan):
    from atom_mxfp4 import ops

    out = case.out.clone()
    ops.pa_decode(out, case.q, case.k_cache, case.v_cache, case.tables, case.context_lens,
                  softmax_scale=case.softmax_scale, query_scale=case.query_scale, plan=plan, backend="flydsl")
    torch.cuda.synchronize(DEVICE)
    return out.float()


def _plans(case):
    from atom_mxfp4 import ops
    from atom_mxfp4.kernels.flydsl.check import direct_plan
    from atom_mxfp4.kernels.flydsl.pa_decode import make_plan

    rows, width = case.tables.shape
    group = case.q.shape[1]
    return {"split": ops.plan_pa_decode(rows, width, group, DEVICE, backend="flydsl"),
            "direct": direct_plan(rows, width, group, DEVICE),
            "forced split": make_plan(rows, width, group, DEVICE, num_splits=C.FORCED_SPLITS)}


IRREGULAR = [
    dict(group=16, context_lens=[1, 0, 97, 2049, 128, 129]),
    dict(group=8, context_lens=[4096 + 17] + [300] * 16, q_dtype=torch.float8_e4m3fn, query_scale="tensor"),
    dict(group=1, context_lens=[63, 64, 65, 255, 256, 257]),
    dict(group=3, context_lens=[5000], query_scale="float"),
    dict(group=16, context_lens=[2048] * 17, q_dtype=torch.float8_e4m3fn),
    dict(group=8, context_lens=[1000, 1, 300, 0, 2049], extra_width=60),  # short rows in a wide table
]


@pytest.mark.parametrize("spec", IRREGULAR, ids=lambda s: f"g{s['group']}-R{len(s['context_lens'])}")
@pytest.mark.parametrize("path", ["split", "direct", "forced split"])
def test_flydsl_matches_torch_backend(spec, path):
    for seed in range(2):  # fresh random data each time
        case = C.make_case("irregular", device=DEVICE, seed=100 + seed, **spec)
        plan = _plans(case)[path]
        got = _run(case, plan)
        ref = C.reference(case)
        assert not torch.isnan(got).any(), "NaN reached out"
        err = (got - ref).abs() / C.tolerance(case, ref)
        assert err.max() <= 1.0, f"worst error {err.max():.3g}x tolerance at {divmod(int(err.argmax()), 128)}"
        assert torch.all(got[case.context_lens == 0] == 0)


def test_a_larger_plan_gives_the_output_of_plan_none_bit_for_bit():
    """One plan per batch (atom_mxfp4.plan): made for more rows and wider tables than the call, the launch splits
    as plan=None does and writes the same bits."""
    from atom_mxfp4 import ops

    case = C.make_case("larger-plan", device=DEVICE, seed=7, **IRREGULAR[0])
    rows, width = case.tables.shape
    large = ops.plan_pa_decode(3 * rows + 5, 4 * width + 3, case.q.shape[1], DEVICE, backend="flydsl")
    assert torch.equal(_run(case, large).view(torch.int16), _run(case, None).view(torch.int16))


def test_self_check_passes_and_backend_none_prefers_flydsl():
    from atom_mxfp4.backends import resolve_backend
    from atom_mxfp4.kernels.flydsl import self_check

    self_check(DEVICE)
    assert resolve_backend(None, DEVICE).name == "flydsl"


def test_large_cache_offsets_beyond_4_gib():
    """Pages past 4 GiB of cache: the kernel's 64-bit addressing (skipped when the GPU has too little memory)."""
    free, _ = torch.cuda.mem_get_info(DEVICE)
    pages = math.ceil(4.5 * 2 ** 30 / 8704)
    if free < 2.5 * pages * 8704:
        pytest.skip("not enough free GPU memory for a 4.5 GiB K and V cache")
    case = C.make_case("big", group=8, context_lens=[300], device=DEVICE, seed=5, kv_heads=1)
    big_k = torch.zeros(pages, 1, 8704, dtype=torch.uint8, device=DEVICE)
    big_v = torch.zeros_like(big_k)
    far = pages - 8
    for p in range(3):
        big_k[far + p] = case.k_cache[int(case.tables[0, p])]
        big_v[far + p] = case.v_cache[int(case.tables[0, p])]
    case.tables[0, :3] = torch.arange(far, far + 3, dtype=torch.int32, device=DEVICE)
    case.k_cache, case.v_cache = big_k, big_v
    got = _run(case, _plans(case)["direct"])
    ref = C.reference(case)
    assert torch.all((got - ref).abs() <= C.tolerance(case, ref))
