"""The pa_decode plan protocol (atom_mxfp4.plan) on every backend that runs here (torch; Triton under the
interpreter; FlyDSL's host side is tests/test_flydsl_host.py): every make_plan returns a DecodePlan of its backend,
ops.pa_decode refuses a plan that does not cover the call (naming the field, the expected and the actual value, with
check=True and check=False, before anything is written), and a plan made for more rows and wider tables gives the
output of plan=None bit for bit.
"""

from __future__ import annotations

import dataclasses
import math

import pytest
import torch

import _helpers as H
from test_ops_decode import make_problem

from atom_mxfp4 import ops
from atom_mxfp4.plan import DecodePlan
from atom_mxfp4.registry import registered

SCALE = 128 ** -0.5
BACKENDS = H.backends_here()  # small shapes: Triton runs under the interpreter too


def decode(prob, backend, plan, check=True):
    out = torch.full(prob["q"].shape, math.nan, dtype=torch.bfloat16)  # poison: refused calls must leave it
    ops.pa_decode(out, prob["q"], prob["k"], prob["v"], prob["tables"], prob["lens"], softmax_scale=SCALE, plan=plan,
                  backend=backend, check=check)
    return out


@pytest.mark.parametrize("name", list(registered()))
def test_every_backend_make_plan_returns_a_plan_of_its_own(name):
    """Every registered backend (FlyDSL too: its make_plan needs no GPU) returns the protocol's type, carrying the
    name it is registered under (the name ops.pa_decode checks)."""
    make_plan = registered()[name].load().make_plan
    plan = make_plan(5, 3, 8, torch.device("cpu"))
    assert isinstance(plan, DecodePlan)
    assert (plan.backend, plan.num_rows, plan.max_table_width, plan.group, plan.device) == (
        name, 5, 3, 8, torch.device("cpu"))


@pytest.mark.parametrize("backend", BACKENDS)
def test_plan_pa_decode_makes_the_backends_plan(backend):
    plan = ops.plan_pa_decode(4, 2, 16, "cpu", backend=backend)
    assert isinstance(plan, DecodePlan) and plan.backend == backend
    with pytest.raises(ValueError, match="max_table_width must be an int >= 1, got 0"):
        ops.plan_pa_decode(4, 0, 16, "cpu", backend=backend)


def _other_backend(backend):
    return next(name for name in registered() if name != backend)


REFUSALS = {  # name -> (change to the plan or the call, the message)
    "rows": (dict(rows=5), r"plan.num_rows must be >= q.shape\[0\] = 5 \(the call's rows\), got 4"),
    "width": (dict(width=4), r"plan.max_table_width must be >= tables.shape\[1\] = 4, got 3"),
    "group": (dict(group=8), r"plan.group must be q.shape\[1\] = 8, got 16"),
    "device": (dict(device="meta"), r"plan.device must be q.device = cpu, got meta"),
    "backend": (dict(backend=True),
                r"plan.backend must be '{backend}' \(the backend running pa_decode\), got '{other}'"),
}


@pytest.mark.parametrize("check", [True, False], ids=["check", "unchecked"])
@pytest.mark.parametrize("case", list(REFUSALS))
@pytest.mark.parametrize("backend", BACKENDS)
def test_a_plan_that_does_not_cover_the_call_is_refused_by_name(backend, case, check):
    change, message = REFUSALS[case]
    rows, width, group = change.get("rows", 4), change.get("width", 3), change.get("group", 16)
    prob = make_problem([129, 0, 300, 7][:rows] + [5] * (rows - 4), group, 1, seed=3, width=width)
    plan = ops.plan_pa_decode(4, 3, 16, "cpu", backend=backend)
    other = _other_backend(backend)
    if "device" in change:
        plan = dataclasses.replace(plan, device=torch.device(change["device"]))
    if "backend" in change:
        plan = dataclasses.replace(plan, backend=other)
    out = torch.full(prob["q"].shape, math.nan, dtype=torch.bfloat16)
    with pytest.raises(ValueError, match=message.format(backend=backend, other=other)):
        ops.pa_decode(out, prob["q"], prob["k"], prob["v"], prob["tables"], prob["lens"], softmax_scale=SCALE,
                      plan=plan, backend=backend, check=check)
    assert torch.isnan(out.float()).all(), "a refused call wrote to out"


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_plan_must_be_a_plan(backend):
    prob = make_problem([129, 0, 300, 7], 16, 1, seed=3)
    with pytest.raises(TypeError, match="plan must be None or a DecodePlan .*, got dict"):
        decode(prob, backend, {"num_rows": 4})


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_larger_plan_gives_the_output_of_plan_none_bit_for_bit(backend):
    """One plan per batch: made for more rows and wider tables than the call (40 x 13 for 4 x 6), it gives what the
    backend's own plan for the call gives. Triton: the call's split is its own (3 splits of 2 pages); a split fixed
    by the plan's shape (2 splits of 7 pages) gives other bits, as the forced direct path below shows."""
    prob = make_problem([129, 0, 700, 7], 16, 1, seed=5, width=6)
    base = decode(prob, backend, None)
    large = ops.plan_pa_decode(40, 13, 16, "cpu", backend=backend)
    assert torch.equal(decode(prob, backend, large).view(torch.int16), base.view(torch.int16))
    assert torch.equal(decode(prob, backend, large, check=False).view(torch.int16), base.view(torch.int16))
    if backend == "triton":
        from atom_mxfp4.kernels.triton.pa_decode import make_plan
        assert large.splits_for(4, 6) == make_plan(4, 6, 16, "cpu").splits_for(4, 6) == (3, 2)
        direct = decode(prob, backend, make_plan(4, 6, 16, "cpu", num_splits=1))
        assert not torch.equal(direct.view(torch.int16), base.view(torch.int16)), "the comparison cannot fail here"


def test_triton_workspace_holds_every_launch_the_plan_covers(monkeypatch):
    """Brute force over every covered (rows, width) with the H200's split policy on a small machine (6 SMs, 2
    programs each): the launch's split fits the plan's workspace. Sizing it for the plan's own shape fails at (30, 9)
    (fewer rows split more); for the widest table only, at (5, 4): 5 rows take 3 splits of 1 page over 3 pages, but
    2 splits of 2 over 4."""
    import importlib
    decode_module = importlib.import_module("atom_mxfp4.kernels.triton.pa_decode")
    monkeypatch.setattr(decode_module, "_num_sms", lambda index: 6)
    config = decode_module.DecodeConfig(programs_per_sm=2)
    cpu = torch.device("cpu")
    for rows, width in [(1, 1), (5, 4), (30, 9), (7, 64), (120, 70), (200, 3)]:
        plan = decode_module.make_plan(rows, width, 16, cpu, config=config)
        slots = 0 if plan.part_out is None else plan.part_out.shape[0]
        needed = [r * s for r in range(1, rows + 1) for w in range(1, width + 1)
                  for s in [plan.splits_for(r, w)[0]] if s > 1]
        assert max(needed, default=0) <= slots, (rows, width)
        own = plan.splits_for(rows, width)[0]
        widest = max((r * s for r in range(1, rows + 1) for s in [plan.splits_for(r, width)[0]] if s > 1), default=0)
        if (rows, width) == (30, 9):
            assert max(needed) > (rows * own if own > 1 else 0)
        if (rows, width) == (5, 4):
            assert max(needed) > widest


def test_sm_count_of_a_device_without_an_index_is_the_current_devices(monkeypatch):
    """torch.device("cuda") means the current device: its SMs are counted (cuda:0's were, when the policies passed
    ``device.index or 0``), once per device index."""
    from atom_mxfp4.plan import sm_count

    asked = []

    def properties(index):
        asked.append(index)
        return type("P", (), {"multi_processor_count": 100 + index})

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 2)
    monkeypatch.setattr(torch.cuda, "get_device_properties", properties)
    sm_count.cache_clear()
    try:
        assert sm_count(None, 132) == 102 and sm_count(2, 132) == 102 and sm_count(0, 132) == 100
        assert asked == [2, 0]  # cached per index: None and 2 are one device
    finally:
        sm_count.cache_clear()
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert sm_count(None, 132) == 132
