"""pa_decode on AMD gfx950 through FlyDSL: plan, launch (decode kernel, then merge when split).

Arguments arrive validated by ``atom_mxfp4.ops.pa_decode`` (shapes, dtypes, devices, table ranges); this layer
checks only what the kernel itself needs: a gfx950 device, dense record caches, and a plan that covers the batch.
"""

from __future__ import annotations

import dataclasses
import functools

import torch

from atom_mxfp4.errors import expect, expect_contiguous

from . import layout as L


@dataclasses.dataclass(frozen=True)
class FlyDSLDecodePlan:
    """Graph-stable workspace of one batch shape (caller-owned; reuse it for every layer).

    num_splits == 1 is the direct path (no workspace). Otherwise the decode kernel writes, per (row, split,
    head), the split's normalized O to ``ws_o`` [rows, splits, group, 128] f32 and (m, l) to ``ws_ml``
    [rows, splits, group, 2] f32 (m in log2 units), and the merge kernel combines the splits that hold tokens.
    """

    num_rows: int
    max_table_width: int
    group: int
    num_splits: int
    partition_tokens: int
    ws_o: torch.Tensor | None
    ws_ml: torch.Tensor | None


@functools.cache
def device_arch(device_index: int) -> str:
    """The bare gfx name of a ROCm device ('' on CUDA)."""
    if getattr(torch.version, "hip", None) is None:
        return ""
    name = getattr(torch.cuda.get_device_properties(device_index), "gcnArchName", "")
    return name.split(":")[0]


def require_gfx950(device: torch.device) -> None:
    if device.type != "cuda" or device_arch(device.index or 0) != "gfx950":
        arch = device_arch(device.index or 0) if device.type == "cuda" else device.type
        raise RuntimeError(f"the FlyDSL backend runs only on AMD gfx950 (MI350/MI355X); device {device} is "
                           f"{arch or 'not a ROCm device'}: use backend='triton' or 'torch'")


def make_plan(num_rows: int, max_table_width: int, group: int, device) -> FlyDSLDecodePlan:
    device = torch.device(device)
    cus = torch.cuda.get_device_properties(device).multi_processor_count if device.type == "cuda" else 256
    splits, partition = L.choose_splits(num_rows, max_table_width, num_cus=cus)
    ws_o = ws_ml = None
    if splits > 1:
        ws_o = torch.empty(num_rows, splits, group, L.HEAD_DIM, dtype=torch.float32, device=device)
        ws_ml = torch.empty(num_rows, splits, group, 2, dtype=torch.float32, device=device)
    return FlyDSLDecodePlan(num_rows, max_table_width, group, splits, partition, ws_o, ws_ml)


def _check_plan(plan: FlyDSLDecodePlan, rows: int, width: int, group: int) -> None:
    expect(isinstance(plan, FlyDSLDecodePlan), "plan", "None or a plan from make_plan / plan_pa_decode "
           "(backend='flydsl')", type(plan).__name__, TypeError)
    expect(plan.num_rows >= rows, "plan.num_rows", f">= rows ({rows})", plan.num_rows)
    expect(plan.max_table_width >= width, "plan.max_table_width", f">= tables.shape[1] ({width})",
           plan.max_table_width)
    expect(plan.group == group, "plan.group", f"{group} (q.shape[1])", plan.group)


def pa_decode(out, q, k_cache, v_cache, tables, context_lens, *, softmax_scale, query_scale, plan):
    # out [R, G, 128] bf16; q [R, G, 128] bf16 | e4m3; k/v_cache [pages, heads, 8704] u8 (folded ids);
    # tables [R, W] i32; context_lens [R] i32; query_scale None | float | f32 [R]
    from .pa_decode_kernel import build_merge, build_pa_decode

    device = q.device
    require_gfx950(device)
    rows, group, _ = q.shape
    width = tables.shape[1]
    if rows == 0:
        return out
    for name, records in (("k_cache", k_cache), ("v_cache", v_cache)):
        expect(records.is_contiguous(), name, "dense contiguous records [pages, heads, 8704]",
               f"strides {tuple(records.stride())}")
    for name, tensor in (("q", q), ("out", out), ("tables", tables), ("context_lens", context_lens)) + (
            (("query_scale", query_scale),) if isinstance(query_scale, torch.Tensor) else ()):
        expect_contiguous(tensor, name)  # read by data_ptr with unit strides, even under check=False
    if plan is None:
        plan = make_plan(rows, max(width, 1), group, device)
    _check_plan(plan, rows, width, group)

    # ---- tuning / specialization (constexpr: group, query dtype, split, query_scale kind) ----
    q_bf16 = q.dtype == torch.bfloat16
    split = plan.num_splits > 1
    qscale_tensor = isinstance(query_scale, torch.Tensor)
    qscale_value = 1.0 if query_scale is None or qscale_tensor else float(query_scale)
    qscale_addr = query_scale.data_ptr() if qscale_tensor else 0
    ws_o_addr = plan.ws_o.data_ptr() if split else 0
    ws_ml_addr = plan.ws_ml.data_ptr() if split else 0
    stream = torch.cuda.current_stream(device)

    launch = build_pa_decode(group, q_bf16, split, qscale_tensor)
    launch(out.data_ptr(), q.data_ptr(), k_cache.data_ptr(), v_cache.data_ptr(), tables.data_ptr(),
           context_lens.data_ptr(), qscale_addr, ws_o_addr, ws_ml_addr, width, plan.partition_tokens,
           plan.num_splits, qscale_value, float(softmax_scale) * L.LOG2E, rows, stream=stream)
    if split:
        build_merge(group)(out.data_ptr(), ws_o_addr, ws_ml_addr, context_lens.data_ptr(), plan.partition_tokens,
                           plan.num_splits, rows, stream=stream)
    return out
