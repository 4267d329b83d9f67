"""pa_decode on AMD gfx950 through FlyDSL: plan, launch (decode kernel, then merge when split).

Arguments arrive validated by ``atom_mxfp4.ops.pa_decode`` (shapes, dtypes, devices, table ranges); this layer
checks only what the kernel itself needs: a gfx950 device, dense record caches, and a plan that covers the batch.
"""

from __future__ import annotations

import dataclasses
import functools

import torch

from atom_mxfp4.errors import expect, expect_aligned, expect_contiguous, expect_dtype
from atom_mxfp4.plan import DecodePlan, check_forced_splits, check_plan, plan_device

from . import NAME
from . import layout as L


@dataclasses.dataclass(frozen=True, eq=False)
class FlyDSLDecodePlan(DecodePlan):
    """The FlyDSL backend's plan (the protocol of atom_mxfp4.plan): the split policy's inputs + split-KV workspace.

    A split launch writes, per (row, split, head), the split's normalized O to ``ws_o`` [slots, group, 128] f32 and
    (m, l) to ``ws_ml`` [slots, group, 2] f32 (m in log2 units), slot ``row * num_splits + split`` (``partial_slots``:
    enough for every launch the plan covers), and the merge kernel combines the splits that hold tokens. None when no
    launch it covers splits.
    """

    num_cus: int  # compute units the split policy fills (the device's; 256 off a GPU)
    num_splits: int | None  # None: each launch takes layout.wanted_splits(its rows, its width); an int: every launch
    # asks for this many (the self-check forces the direct path with 1)
    ws_o: torch.Tensor | None
    ws_ml: torch.Tensor | None

    def splits_for(self, rows: int, width: int) -> tuple[int, int]:
        """(num_splits, partition_tokens) of a launch of ``rows`` x ``width``: the same for every plan covering it."""
        wanted = self.num_splits if self.num_splits is not None else L.wanted_splits(rows, width, self.num_cus)
        return L.partition(width, wanted)


@functools.cache
def _most_partials(width: int, num_cus: int) -> tuple[int, ...]:
    """most[r] = the largest ``r' * splits`` over split launches of r' <= r rows, ``width`` pages (wanted_splits never
    falls when the table widens and ``layout.partition`` never splits more than asked, so the plan's width bounds
    every narrower launch). From 2 * num_cus rows on nothing splits: the table stops there."""
    most, best = [0], 0
    for rows in range(1, 2 * num_cus + 1):
        splits = L.wanted_splits(rows, width, num_cus)
        best = max(best, rows * splits) if splits > 1 else best
        most.append(best)
    return tuple(most)


def partial_slots(num_rows: int, max_table_width: int, num_cus: int, num_splits: int | None) -> int:
    """Workspace slots so that every launch of <= num_rows rows over tables <= max_table_width wide fits (0: none
    of them splits)."""
    if num_splits is not None:
        wanted = min(num_splits, L.max_splits(max_table_width))
        return num_rows * wanted if wanted > 1 else 0
    most = _most_partials(max_table_width, num_cus)
    return most[min(num_rows, len(most) - 1)]


def device_arch(device_index: int | None) -> str:
    """The bare gfx name of a ROCm device (None: the current one; '' on CUDA), asked once per device."""
    if getattr(torch.version, "hip", None) is None:
        return ""
    return _arch(torch.cuda.current_device() if device_index is None else device_index)


@functools.cache
def _arch(device_index: int) -> str:  # cached per concrete index: None would keep the first current device's answer
    name = getattr(torch.cuda.get_device_properties(device_index), "gcnArchName", "")
    return name.split(":")[0]


def require_gfx950(device: torch.device) -> None:
    if device.type != "cuda" or device_arch(device.index) != "gfx950":
        arch = device_arch(device.index) if device.type == "cuda" else device.type
        raise RuntimeError(f"the FlyDSL backend runs only on AMD gfx950 (MI350/MI355X); device {device} is "
                           f"{arch or 'not a ROCm device'}: use backend='triton' or 'torch'")


def make_plan(num_rows: int, max_table_width: int, group: int, device, *, num_splits: int | None = None
              ) -> FlyDSLDecodePlan:
    """A plan for calls of <= num_rows rows and tables <= max_table_width wide (atom_mxfp4.plan); ``num_splits``:
    None (the split policy, per launch) or a forced split count."""
    device = plan_device(device)
    check_forced_splits(num_splits)
    cus = torch.cuda.get_device_properties(device).multi_processor_count if device.type == "cuda" else 256
    slots = partial_slots(num_rows, max_table_width, cus, num_splits)
    ws_o = ws_ml = None
    if slots > 0:
        ws_o = torch.empty(slots, group, L.HEAD_DIM, dtype=torch.float32, device=device)
        ws_ml = torch.empty(slots, group, 2, dtype=torch.float32, device=device)
    return FlyDSLDecodePlan(NAME, num_rows, max_table_width, group, device, cus, num_splits, ws_o, ws_ml)


def launch_split(plan, rows: int, width: int, group: int, device) -> tuple[FlyDSLDecodePlan, int, int]:
    """The host side of a launch (no GPU needed): the plan (one of exactly this call's shape when None) checked
    against the call, even under check=False, and the call's (num_splits, partition_tokens), which do not depend on
    the plan's size. Refuses a plan whose workspace is too small for the split (a hand-built one)."""
    if plan is None:
        plan = make_plan(rows, max(width, 1), group, device)
    check_plan(plan, backend=NAME, rows=rows, width=width, group=group, device=device, kind=FlyDSLDecodePlan)
    num_splits, partition_tokens = plan.splits_for(rows, max(width, 1))
    if num_splits > 1:
        slots = 0 if plan.ws_o is None else min(plan.ws_o.shape[0], plan.ws_ml.shape[0])
        expect(rows * num_splits <= slots, "plan workspace (ws_o / ws_ml rows)",
               f">= {rows * num_splits} partial slots ({rows} rows x {num_splits} splits)", slots)
    return plan, num_splits, partition_tokens


def pa_decode(out, q, k_cache, v_cache, tables, context_lens, *, softmax_scale, query_scale, plan):
    # out [R, G, 128] bf16; q [R, G, 128] bf16 | e4m3; k/v_cache [pages, heads, 8704] u8 (folded ids);
    # tables [R, W] i32; context_lens [R] i32; query_scale None | float | f32 [R]
    from .pa_decode_kernel import build_merge, build_pa_decode

    device = q.device
    require_gfx950(device)
    rows, group, _ = q.shape
    width = tables.shape[1]
    for name, records in (("k_cache", k_cache), ("v_cache", v_cache)):
        expect(records.is_contiguous(), name, "dense contiguous records [pages, heads, 8704]",
               f"strides {tuple(records.stride())}")
    for name, tensor in (("q", q), ("out", out), ("tables", tables), ("context_lens", context_lens)) + (
            (("query_scale", query_scale),) if isinstance(query_scale, torch.Tensor) else ()):
        expect_contiguous(tensor, name)  # read by data_ptr with unit strides, even under check=False
    for name, tensor in (("q", q), ("out", out), ("k_cache", k_cache), ("v_cache", v_cache)):
        # the kernel declares 16-byte alignment for its vector loads / stores of these (pa_decode_kernel: _ir.load)
        expect_aligned(tensor, name, 16, "read / written as 16-byte vectors")
    # the kernel reads raw addresses as these dtypes (a q that is not bf16 is read as e4m3, int64 tables as pairs of
    # int32 words): another dtype, possible under ops' check=False, is refused, never misread
    dtypes = (("q", q, (torch.bfloat16, torch.float8_e4m3fn)), ("out", out, (torch.bfloat16,)),
              ("k_cache", k_cache, (torch.uint8,)), ("v_cache", v_cache, (torch.uint8,)),
              ("tables", tables, (torch.int32,)), ("context_lens", context_lens, (torch.int32,))) + (
        (("query_scale", query_scale, (torch.float32,)),) if isinstance(query_scale, torch.Tensor) else ())
    for name, tensor, allowed in dtypes:
        expect_dtype(tensor, f"{name}.dtype", allowed)
    plan, num_splits, partition_tokens = launch_split(plan, rows, width, group, device)
    if rows == 0:
        return out

    # ---- tuning / specialization (constexpr: group, query dtype, split, query_scale kind) ----
    q_bf16 = q.dtype == torch.bfloat16
    split = num_splits > 1
    qscale_tensor = isinstance(query_scale, torch.Tensor)
    qscale_value = 1.0 if query_scale is None or qscale_tensor else float(query_scale)
    qscale_addr = query_scale.data_ptr() if qscale_tensor else 0
    ws_o_addr = plan.ws_o.data_ptr() if split else 0
    ws_ml_addr = plan.ws_ml.data_ptr() if split else 0
    stream = torch.cuda.current_stream(device)

    launch = build_pa_decode(group, q_bf16, split, qscale_tensor)
    launch(out.data_ptr(), q.data_ptr(), k_cache.data_ptr(), v_cache.data_ptr(), tables.data_ptr(),
           context_lens.data_ptr(), qscale_addr, ws_o_addr, ws_ml_addr, width, partition_tokens, num_splits,
           qscale_value, float(softmax_scale) * L.LOG2E, rows, stream=stream)
    if split:
        build_merge(group)(out.data_ptr(), ws_o_addr, ws_ml_addr, context_lens.data_ptr(), width, partition_tokens,
                           num_splits, rows, stream=stream)
    return out
