"""The FlyDSL backend's host side without a GPU: refusal off gfx950, plans, plan validation, availability."""

from __future__ import annotations

import pytest
import torch

from atom_mxfp4.kernels import flydsl as F
from atom_mxfp4.kernels.flydsl import cases as C
from atom_mxfp4.kernels.flydsl import layout as L
from atom_mxfp4.kernels.flydsl.pa_decode import _check_plan


def test_not_available_and_self_check_refuses_on_cpu():
    assert F.is_available("cpu") is False
    with pytest.raises(RuntimeError, match="gfx950"):
        F.self_check("cpu")


def test_pa_decode_refuses_a_non_gfx950_device_naming_it():
    case = C.make_case("cpu", group=4, context_lens=[5])
    with pytest.raises(RuntimeError, match=r"only on AMD gfx950.*device cpu"):
        F.pa_decode(case.out, case.q, case.k_cache, case.v_cache, case.tables, case.context_lens,
                    softmax_scale=case.softmax_scale, query_scale=None, plan=None)
    assert torch.isnan(case.out.float()).all()  # nothing written


@pytest.mark.parametrize("rows,width,group", [(1, 16, 16), (4, 3, 8), (600, 16, 1)])
def test_make_plan_matches_choose_splits_and_sizes_the_workspace(rows, width, group):
    plan = F.make_plan(rows, width, group, "cpu")
    assert (plan.num_splits, plan.partition_tokens) == L.choose_splits(rows, width)
    if plan.num_splits == 1:
        assert plan.ws_o is None and plan.ws_ml is None
    else:
        assert plan.ws_o.shape == (rows, plan.num_splits, group, L.HEAD_DIM) and plan.ws_o.dtype == torch.float32
        assert plan.ws_ml.shape == (rows, plan.num_splits, group, 2)


def test_a_plan_that_does_not_cover_the_batch_is_rejected_by_name():
    plan = F.make_plan(4, 8, 16, "cpu")
    with pytest.raises(ValueError, match=r"plan.num_rows must be >= rows \(5\), got 4"):
        _check_plan(plan, 5, 8, 16)
    with pytest.raises(ValueError, match=r"plan.max_table_width must be >= tables.shape\[1\] \(9\), got 8"):
        _check_plan(plan, 4, 9, 16)
    with pytest.raises(ValueError, match=r"plan.group must be 8 \(q.shape\[1\]\), got 16"):
        _check_plan(plan, 4, 8, 8)
    with pytest.raises(TypeError, match="plan must be None or a plan"):
        _check_plan(object(), 4, 8, 16)
    _check_plan(plan, 3, 2, 16)  # a larger plan serves a smaller batch


def test_kernel_builder_refuses_other_architectures():
    pytest.importorskip("flydsl", reason="flydsl not installed (scripts/install.d/20-flydsl.sh)")
    from atom_mxfp4.kernels.flydsl.pa_decode_kernel import build_merge, build_pa_decode

    with pytest.raises(ValueError, match=r"gfx950.*got 'gfx942'"):
        build_pa_decode(16, True, False, False, arch="gfx942")
    with pytest.raises(ValueError, match=r"gfx950.*got 'gfx90a'"):
        build_merge(8, arch="gfx90a")
    with pytest.raises(ValueError, match=r"group must be in \[1, 16\], got 17"):
        build_pa_decode(17, True, False, False)
