"""The FlyDSL backend's host side without a GPU: refusal off gfx950, plans, plan validation, availability."""

from __future__ import annotations

import dataclasses
import importlib

import pytest
import torch

from atom_mxfp4.kernels import flydsl as F
from atom_mxfp4.kernels.flydsl import cases as C
from atom_mxfp4.kernels.flydsl import layout as L
from atom_mxfp4.kernels.flydsl.pa_decode import launch_split, partial_slots
from atom_mxfp4.plan import DecodePlan


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


def _shifted(t, elements):
    """The same values, contiguous, ``elements`` elements past an aligned base."""
    flat = torch.zeros(t.numel() + elements, dtype=t.dtype)
    flat[elements:] = t.reshape(-1)
    return flat[elements:].view(t.shape)


@pytest.mark.parametrize("name, elements", [("q", 1), ("q", 4), ("out", 2), ("k_cache", 1), ("k_cache", 8),
                                            ("v_cache", 4), ("q", "strided"), ("tables", "strided")])
def test_the_launcher_refuses_layouts_the_kernel_cannot_read_before_any_launch(monkeypatch, name, elements):
    """The kernel reads q, out and the records as 16-byte vectors whose alignment it declares, and every tensor by
    its data_ptr with unit strides: an unaligned or strided tensor is refused by name (under check=False too: this is
    the launcher), never read (the device check is lifted here so that the CPU reaches the layout checks)."""
    pytest.importorskip("flydsl")
    P = importlib.import_module("atom_mxfp4.kernels.flydsl.pa_decode")  # the module (the package exports the function)

    monkeypatch.setattr(P, "require_gfx950", lambda device: None)
    monkeypatch.setattr(P, "launch_split", lambda *a: pytest.fail("launched past a refused layout"))
    case = C.make_case("cpu", group=4, context_lens=[5, 300])
    args = dict(out=case.out, q=case.q, k_cache=case.k_cache, v_cache=case.v_cache, tables=case.tables,
                context_lens=case.context_lens)
    if elements == "strided":
        wide = torch.zeros(*args[name].shape[:-1], 2 * args[name].shape[-1], dtype=args[name].dtype)
        wide[..., ::2] = args[name]
        args[name] = wide[..., ::2]
        expected = "contiguous"
    else:
        args[name] = _shifted(args[name], elements)
        expected = "16-byte aligned"
    with pytest.raises(ValueError) as excinfo:
        P.pa_decode(**args, softmax_scale=case.softmax_scale, query_scale=None, plan=None)
    message = str(excinfo.value)
    assert name in message and expected in message and "got" in message, message


@pytest.mark.parametrize("name, dtype", [("q", torch.float16), ("q", torch.float32), ("out", torch.float32),
                                         ("tables", torch.int64), ("context_lens", torch.int64),
                                         ("query_scale", torch.float64), ("k_cache", torch.int8)])
def test_the_launcher_refuses_dtypes_the_kernel_would_misread_before_any_launch(monkeypatch, name, dtype):
    """The kernel reads raw addresses as bf16 / e4m3 q (any other q as e4m3), bf16 out, int32 tables and lengths, an
    fp32 query_scale: another dtype (possible under ops' check=False) is refused by name, never read."""
    pytest.importorskip("flydsl")
    P = importlib.import_module("atom_mxfp4.kernels.flydsl.pa_decode")
    monkeypatch.setattr(P, "require_gfx950", lambda device: None)
    monkeypatch.setattr(P, "launch_split", lambda *a: pytest.fail("launched past a refused dtype"))
    case = C.make_case("cpu", group=4, context_lens=[5, 300])
    args = dict(out=case.out, q=case.q, k_cache=case.k_cache, v_cache=case.v_cache, tables=case.tables,
                context_lens=case.context_lens, query_scale=torch.ones(2))
    args[name] = args[name].to(dtype)
    with pytest.raises(TypeError) as excinfo:
        P.pa_decode(**args, softmax_scale=case.softmax_scale, plan=None)
    message = str(excinfo.value)
    assert f"{name}.dtype" in message and str(dtype) in message and "got" in message, message


@pytest.mark.parametrize("rows,width,group", [(1, 16, 16), (4, 3, 8), (600, 16, 1)])
def test_make_plan_follows_the_protocol_and_the_split_policy(rows, width, group):
    plan = F.make_plan(rows, width, group, "cpu")
    assert isinstance(plan, DecodePlan) and plan.backend == "flydsl" == F.NAME
    assert (plan.num_rows, plan.max_table_width, plan.group, plan.device) == (rows, width, group, torch.device("cpu"))
    assert plan.splits_for(rows, width) == L.choose_splits(rows, width)
    slots = partial_slots(rows, width, 256, None)  # 600 rows never split, but fewer rows of a covered call do
    assert slots > 0 and plan.ws_o.shape == (slots, group, L.HEAD_DIM) and plan.ws_o.dtype == torch.float32
    assert plan.ws_ml.shape == (slots, group, 2) and plan.ws_ml.dtype == torch.float32


@pytest.mark.parametrize("num_cus", [256, 5])
@pytest.mark.parametrize("rows,width", [(1, 1), (3, 2), (9, 5), (40, 16), (11, 64), (700, 3), (2, 7), (227, 7)])
def test_the_workspace_holds_every_launch_the_plan_covers(rows, width, num_cus):
    """Brute force over every covered (rows, width): the launch's split fits the workspace. Sizing it for the plan's
    own shape (rows x its splits) fails at (700, 3): fewer rows split more; sizing it for the widest table only fails
    at (227, 7): 227 rows take 3 splits over 6 pages (681 slots) but 2 over 7 (partitions round up to 256 tokens)."""
    slots = partial_slots(rows, width, num_cus, None)
    needed = [r * s for r in range(1, rows + 1) for w in range(1, width + 1)
              for s in [L.partition(w, L.wanted_splits(r, w, num_cus))[0]] if s > 1]
    assert max(needed, default=0) <= slots <= rows * L.max_splits(width)


def test_a_larger_plan_gives_the_launch_of_plan_none():
    big = F.make_plan(300, 40, 16, "cpu")
    for rows, width in [(1, 1), (7, 16), (300, 40), (129, 3), (256, 40)]:
        _, *own = launch_split(None, rows, width, 16, torch.device("cpu"))
        _, *with_big = launch_split(big, rows, width, 16, torch.device("cpu"))
        assert with_big == own, (rows, width)


def test_a_plan_that_does_not_cover_the_batch_is_refused_by_name():
    plan = F.make_plan(4, 8, 16, "cpu")
    cpu = torch.device("cpu")
    with pytest.raises(ValueError, match=r"plan.num_rows must be >= q.shape\[0\] = 5 \(the call's rows\), got 4"):
        launch_split(plan, 5, 8, 16, cpu)
    with pytest.raises(ValueError, match=r"plan.max_table_width must be >= tables.shape\[1\] = 9, got 8"):
        launch_split(plan, 4, 9, 16, cpu)
    with pytest.raises(ValueError, match=r"plan.group must be q.shape\[1\] = 8, got 16"):
        launch_split(plan, 4, 8, 8, cpu)
    with pytest.raises(ValueError, match=r"plan.device must be q.device = meta, got cpu"):
        launch_split(plan, 4, 8, 16, torch.device("meta"))
    with pytest.raises(TypeError, match="plan must be None or a FlyDSLDecodePlan"):
        launch_split(object(), 4, 8, 16, cpu)
    other = DecodePlan("torch", 4, 8, 16, cpu)  # the protocol's base: another backend's plan
    with pytest.raises(TypeError, match="FlyDSLDecodePlan.*got DecodePlan"):
        launch_split(other, 4, 8, 16, cpu)
    with pytest.raises(ValueError, match=r"plan.backend must be 'flydsl' \(the backend running pa_decode\), got "
                                         r"'triton'"):
        launch_split(dataclasses.replace(plan, backend="triton"), 4, 8, 16, cpu)
    launch_split(plan, 3, 2, 16, cpu)  # a larger plan serves a smaller batch


def test_a_hand_built_plan_too_small_for_the_split_is_refused():
    plan = F.make_plan(4, 8, 16, "cpu")
    assert plan.splits_for(4, 8)[0] > 1
    small = dataclasses.replace(plan, ws_o=plan.ws_o[:3], ws_ml=plan.ws_ml[:3])
    with pytest.raises(ValueError, match=r"plan workspace \(ws_o / ws_ml rows\) must be >= \d+ partial slots"):
        launch_split(small, 4, 8, 16, torch.device("cpu"))


def test_a_forced_split_count_is_taken_by_every_launch():
    direct = F.make_plan(4, 8, 16, "cpu", num_splits=1)
    assert direct.ws_o is None and launch_split(direct, 4, 8, 16, torch.device("cpu"))[1] == 1
    three = F.make_plan(4, 8, 16, "cpu", num_splits=3)
    assert three.splits_for(2, 8) == L.partition(8, 3) and three.ws_o.shape[0] >= 4 * 3
    with pytest.raises(ValueError, match=r"num_splits must be None or an int >= 1, got 0"):
        F.make_plan(4, 8, 16, "cpu", num_splits=0)


def test_kernel_builder_refuses_other_architectures():
    pytest.importorskip("flydsl", reason="flydsl not installed (scripts/install.d/20-flydsl.sh)")
    from atom_mxfp4.kernels.flydsl.pa_decode_kernel import build_merge, build_pa_decode

    with pytest.raises(ValueError, match=r"gfx950.*got 'gfx942'"):
        build_pa_decode(16, True, False, False, arch="gfx942")
    with pytest.raises(ValueError, match=r"gfx950.*got 'gfx90a'"):
        build_merge(8, arch="gfx90a")
    with pytest.raises(ValueError, match=r"group must be in \[1, 16\], got 17"):
        build_pa_decode(17, True, False, False)


def test_device_arch_of_no_index_is_the_current_devices(monkeypatch):
    """device_arch(None) (torch.device("cuda")'s index) asks the current device each time, cached per concrete index:
    a cache keyed on None kept the first current device's answer after torch.cuda.set_device."""
    P = importlib.import_module("atom_mxfp4.kernels.flydsl.pa_decode")
    archs = {0: "gfx942:sramecc+:xnack-", 1: "gfx950:sramecc+:xnack-"}
    current = {"index": 0}
    monkeypatch.setattr(torch.version, "hip", "7.2", raising=False)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: current["index"])
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda index: type("P", (), {"gcnArchName": archs[index]}))
    P._arch.cache_clear()
    try:
        assert P.device_arch(None) == "gfx942"
        current["index"] = 1
        assert P.device_arch(None) == "gfx950" and P.device_arch(0) == "gfx942"
    finally:
        P._arch.cache_clear()
