"""pa_decode (Triton): paged attention of one query token per row over MXFP4 K/V, GQA group <= 16 per program.

Row r (one KV head, heads folded into pages) attends over tokens t < context_lens[r]; token t is at folded page
``tables[r, t // 128]`` (record ``page * 8704`` bytes into the cache), offset ``t % 128``.
Sentinels / guarantees:
- tokens t >= context_lens[r] are never loaded (masked loads), so NaN / Inf / scale 255 there cannot reach ``out``;
  table entries past ``ceil(context_lens[r] / 128)`` are never read (they may be 0 or garbage);
- ``context_lens[r] == 0`` writes zeros;
- non-finite logits follow docs/api.md: a NaN or +inf logit of a token the row attends makes that head's row NaN, a
  -inf logit gives its token weight 0, a row whose logits are all -inf is NaN (0 / 0).
Two paths, one kernel: *split-KV* (grid rows x splits, each split a run of the row's own pages, partial (out, lse)
in the plan's workspace, then an LSE merge of the splits that hold pages) when rows are few; *direct* (one program
per row, bf16 written at once) when many.
The split count depends only on the launch's (rows, table width), never on the plan's size, so a plan made once per
batch (atom_mxfp4.plan: any plan that covers the call) gives the output of plan=None, bit for bit, at every replay.
Not checked at run time: page ids in range (``atom_mxfp4.ops`` checks with check=True). A length past 128 * width
(or below 0) passes under check=False: both kernels read it as the whole table (as 0), so that no entry past the row
and no partial slot past the row's is read (``_row_context``).
"""

from dataclasses import dataclass
import functools

import torch
import triton
import triton.language as tl

from atom_mxfp4.errors import expect, expect_contiguous, fail
from atom_mxfp4.launch import cdiv, launcher
from atom_mxfp4.plan import (DecodePlan, check_forced_splits, check_plan, checked_split, plan_device, sm_count,
                             split_pages)

from . import INTERPRETER_SMS, NAME
from ._options import FUSED
from ._mxfp4 import HEAD_DIM, PAGE_SIZE, RECORD_BYTES, decode_variant, load_tokens, mma_bf16, mma_operand, qk_tile, \
    to_bf16_rne

assert int(PAGE_SIZE) == 128, "TILES_PER_PAGE in _decode_kernel spells PAGE_SIZE as 128"
BLOCK_H = tl.constexpr(16)  # query heads per program (GQA group padded to 16: the smallest tl.dot M)
RECORD_WIDTH, GROUP_MAX = int(RECORD_BYTES), int(BLOCK_H)  # the launcher's ints (a constexpr's int() is a call)
LOG2E = 1.4426950408889634


@triton.jit
def _pages_a_split(num_pages, num_splits, pages_per_split):
    """The pages each split of a row of ``num_pages`` pages attends (the last may take fewer, later ones none): the
    row's own pages divided over the launch's splits, so a short row in a wide table (a served dense layer's table is
    the server's maximum context wide) spreads over them all; at most the plan's pages_per_split (a full row)."""
    return tl.minimum(tl.cdiv(num_pages, num_splits), pages_per_split)


@triton.jit
def _row_context(context_lens_ptr, row, width):
    """Row ``row``'s length as both kernels read it: inside [0, 128 x width] (an unchecked length past the table is
    the whole table, a negative one no token; the reference's token mask reads them so)."""
    return tl.maximum(tl.minimum(tl.load(context_lens_ptr + row), width * PAGE_SIZE), 0)


@triton.jit(do_not_specialize=("table_stride", "pages_per_split", "num_splits"))
def _pa_decode_kernel(
    out_ptr, q_ptr, k_ptr, v_ptr, tables_ptr, context_lens_ptr, query_scale_ptr,
    part_out_ptr, part_lse_ptr,
    table_stride, group, pages_per_split, num_splits, logit_scale,
    HAS_QUERY_SCALE: tl.constexpr, SPLIT: tl.constexpr, BLOCK_N: tl.constexpr, MMA_BF16: tl.constexpr,
    DECODE: tl.constexpr,
):
    tl.static_assert(PAGE_SIZE % BLOCK_N == 0)  # tiles never straddle a page
    row = tl.program_id(0).to(tl.int64)
    split = tl.program_id(1)
    head = tl.arange(0, BLOCK_H)
    dim = tl.arange(0, HEAD_DIM)
    head_ok = head < group
    context = _row_context(context_lens_ptr, row, table_stride)  # tables are contiguous: stride = width
    num_pages = tl.cdiv(context, PAGE_SIZE)
    per_split = _pages_a_split(num_pages, num_splits, pages_per_split)  # the row's own pages over the splits
    page_begin = split * per_split
    page_end = tl.minimum(page_begin + per_split, num_pages)

    # q [BLOCK_H, D] bf16 (e4m3 widened exactly); logits in log2 units: q.k * softmax_scale * query_scale * log2(e)
    q = tl.load(q_ptr + (row * group + head[:, None]) * HEAD_DIM + dim[None, :], mask=head_ok[:, None], other=0.0)
    q = mma_operand(q.to(tl.float32), MMA_BF16)
    scale = logit_scale
    if HAS_QUERY_SCALE:
        scale = scale * tl.load(query_scale_ptr + row).to(tl.float32)  # fp64 would make the loop state fp64

    m_i = tl.full([BLOCK_H], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_H], tl.float32)
    acc = tl.zeros([BLOCK_H, HEAD_DIM], tl.float32)
    token_in_tile = tl.arange(0, BLOCK_N)
    TILES_PER_PAGE: tl.constexpr = 128 // BLOCK_N  # PAGE_SIZE // BLOCK_N as an int (the interpreter's % needs one)
    tile_begin = page_begin * TILES_PER_PAGE
    tile_end = page_end * TILES_PER_PAGE
    for tile in range(tile_begin, tile_end):
        page_index = tile // TILES_PER_PAGE
        page = tl.load(tables_ptr + row * table_stride + page_index).to(tl.int64)
        offset = (tile % TILES_PER_PAGE) * BLOCK_N + token_in_tile  # token offsets in the page
        valid = page_index * PAGE_SIZE + offset < context  # tokens past context_lens are never loaded
        logits = qk_tile(q, k_ptr + page * RECORD_BYTES, offset, valid, BLOCK_N, MMA_BF16, DECODE) * scale
        logits = tl.where(valid[None, :], logits, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(logits, axis=1))
        m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)  # all -inf so far: weights 0, not NaN
        alpha = tl.exp2(m_i - m_safe)
        p = tl.exp2(logits - m_safe[:, None])
        l_i = l_i * alpha + tl.sum(p, axis=1)
        v = load_tokens(v_ptr + page * RECORD_BYTES, offset, valid, BLOCK_N, MMA_BF16, DECODE)  # 0 if invalid
        acc = acc * alpha[:, None] + tl.dot(mma_operand(p, MMA_BF16), mma_operand(v, MMA_BF16))
        m_i = m_new

    # l_i > 0: a softmax; l_i == 0: no token, or every logit -inf; l_i NaN: a NaN or +inf logit (docs/api.md)
    has_tokens = l_i > 0.0
    out = acc / tl.where(has_tokens, l_i, 1.0)[:, None]
    if SPLIT:  # partial (out, lse) of this split: lse -inf (weight 0) when l_i == 0, NaN when l_i is NaN
        lse = tl.where(has_tokens, m_i + tl.log2(tl.where(has_tokens, l_i, 1.0)),
                       tl.where(l_i == 0.0, float("-inf"), float("nan")))
        base = (row * num_splits + split) * BLOCK_H
        tl.store(part_out_ptr + (base + head[:, None]) * HEAD_DIM + dim[None, :], out)
        tl.store(part_lse_ptr + base + head, lse)
    else:  # no token: zeros; tokens but no weight (all logits -inf) or NaN: NaN
        out = tl.where(has_tokens[:, None], out, tl.where(context > 0, float("nan"), 0.0))
        tl.store(out_ptr + (row * group + head[:, None]) * HEAD_DIM + dim[None, :], to_bf16_rne(out),
                 mask=head_ok[:, None])


@triton.jit(do_not_specialize=("width", "pages_per_split", "num_splits"))
def _merge_kernel(out_ptr, part_out_ptr, part_lse_ptr, context_lens_ptr, width, group, pages_per_split, num_splits):
    """out[r] = sum_s w_s * part_out[r, s] with w_s = 2**(lse_s - max lse) / sum; a NaN lse makes the head NaN;
    all -inf: zeros when the row has no token, NaN when it has tokens whose logits are all -inf. Only the splits
    that hold pages of the row are read (the others wrote lse -inf: weight 0)."""
    row = tl.program_id(0).to(tl.int64)
    context = _row_context(context_lens_ptr, row, width)  # as the decode kernel read it
    num_pages = tl.cdiv(context, PAGE_SIZE)
    used = tl.cdiv(num_pages, tl.maximum(_pages_a_split(num_pages, num_splits, pages_per_split), 1))
    head = tl.arange(0, BLOCK_H)
    dim = tl.arange(0, HEAD_DIM)
    m_i = tl.full([BLOCK_H], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_H], tl.float32)
    acc = tl.zeros([BLOCK_H, HEAD_DIM], tl.float32)
    for split in range(used):
        base = (row * num_splits + split) * BLOCK_H
        lse = tl.load(part_lse_ptr + base + head)
        m_new = tl.maximum(m_i, lse)
        m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)
        alpha = tl.exp2(m_i - m_safe)
        w = tl.exp2(lse - m_safe)
        part = tl.load(part_out_ptr + (base + head[:, None]) * HEAD_DIM + dim[None, :])
        acc = acc * alpha[:, None] + part * w[:, None]
        l_i = l_i * alpha + w
        m_i = m_new
    out = acc / tl.where(l_i > 0.0, l_i, 1.0)[:, None]
    out = tl.where((l_i > 0.0)[:, None], out, tl.where(context > 0, float("nan"), 0.0))
    tl.store(out_ptr + (row * group + head[:, None]) * HEAD_DIM + dim[None, :], to_bf16_rne(out),
             mask=(head < group)[:, None])


# ---- tuning -----------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class DecodeConfig:
    # defaults = the fastest config of the H200 sweep: 128-token tiles, 4 warps, K and V decoded by the PTX of
    # _mxfp4.E2M1_BF16X2_ASM, 1 stage, <= 128 registers (40 KB shared: 4 programs per SM). 8 warps and 64-token tiles
    # were slower; 2 stages and no register cap the same within the spread at 512 x 8192 and 4096 x 2048 (figures:
    # docs/triton.md "Tried and not kept ("Removed experiments")"; the stage / cap pairs: ledger rows "pa_decode" /
    # "triton 2 stages" and "triton 1 stage no register cap", docs/results/ledger.csv). Variants that lost and were
    # removed (tl.dot_scaled Q.K^T, register prefetch, the no-decode ablation): the same table.
    block_n: int = 128  # tokens per tile (divides 128)
    num_warps: int = 4
    num_stages: int = 1
    asm: bool = True  # decode with the PTX of _mxfp4.E2M1_BF16X2_ASM (GPU only; the interpreter keeps the Triton
    # decode): integer SIMD-in-register bit placement + two bf16x2 multiplies instead of per-element conversions
    maxnreg: int | None = 128  # register cap per thread (None: the compiler's choice)
    programs_per_sm: int = 4  # how many programs of this config an H200 SM holds (Nsight Compute: 4 for the default,
    # 121 registers and 40 KB shared; 3 for the 2-stage kernels, 58 KB): the unit of a wave for the split policy


def _num_sms(device_index: int | None) -> int:
    return sm_count(device_index, INTERPRETER_SMS)


def _sms_of(device: torch.device) -> int:
    return _num_sms(device.index) if device.type == "cuda" else _num_sms(0)


DEFAULT_CONFIG = DecodeConfig()  # the tuning of make_plan(config=None) and of plan=None (never shape-dependent)

WAVE_EFFICIENCY = 0.9  # the direct path splits until the last wave is at least this full (on average)


def num_splits_for(num_rows: int, max_table_width: int, device: torch.device, programs_per_sm: int) -> int:
    """Splits per row of a launch of (rows, table width); a function of shapes only, so it is the same at every
    replay of a CUDA graph.

    Few rows (< SMs): enough programs for ~2 waves of the SMs. Many rows: the fewest splits (<= 8) whose programs fill
    their waves (``programs_per_sm`` x SMs programs each) to WAVE_EFFICIENCY. H200 measurements (sweep_decode --splits /
    --occupancy; ledger rows "pa_decode" / "triton pre-PTX kernel 3 splits" and "triton 1 stage maxnreg=128 1 split" /
    "2 splits", docs/results/ledger.csv): at 3 programs per SM, 512 rows are 1.29 waves unsplit (Nsight Compute's tail
    warning) and 3 splits made 512 x 8192 faster; at 4 per SM (the default config) 512 rows fill 97% of one wave and
    stay unsplit (as fast as 3 splits), 256 rows take 2 splits (faster than unsplit), 4096 rows stay unsplit.
    """
    return _split_policy(num_rows, max_table_width, _sms_of(device), programs_per_sm)


def _split_policy(num_rows: int, max_table_width: int, sms: int, programs_per_sm: int) -> int:
    if num_rows == 0:
        return 1
    if num_rows < sms:
        return max(1, min(max_table_width, cdiv(2 * sms, num_rows), 64))
    slots = programs_per_sm * sms

    def filled(splits):  # mean fullness of the waves that num_rows * splits programs take
        waves = num_rows * splits / slots
        return waves / -(-waves // 1)

    candidates = range(1, max(1, min(8, max_table_width)) + 1)
    return next((s for s in candidates if filled(s) >= WAVE_EFFICIENCY), max(candidates, key=filled))


@functools.cache
def _most_partials(width: int, sms: int, programs_per_sm: int) -> tuple[int, ...]:
    """most[r] = the largest ``r' * splits`` over split launches (splits > 1) of r' <= r rows, ``width`` pages.

    The policy's split count never falls when the table widens (a wider table only adds candidates), and
    ``split_pages`` never splits more than asked, so ``width`` = the plan's width bounds every narrower launch. Rows
    past 9 waves of the SMs never split (unsplit, their last wave is >= 90% full): the table stops there."""
    most, best = [0], 0
    for rows in range(1, 9 * programs_per_sm * sms + 1):
        splits = _split_policy(rows, width, sms, programs_per_sm)
        best = max(best, rows * splits) if splits > 1 else best
        most.append(best)
    return tuple(most)


def partial_slots(num_rows: int, max_table_width: int, device: torch.device, config: DecodeConfig,
                  num_splits: int | None) -> int:
    """Partial (row, split) slots the workspace needs so that every launch a plan covers fits: the most that a
    launch of <= num_rows rows over tables <= max_table_width wide takes (0: none of them splits)."""
    if num_splits is not None:
        wanted = min(num_splits, max_table_width)
        return num_rows * wanted if wanted > 1 else 0
    most = _most_partials(min(max_table_width, 64), _sms_of(device), config.programs_per_sm)  # splits <= 64
    return most[min(num_rows, len(most) - 1)]


# ---- plan -------------------------------------------------------------------------------------------------------
@dataclass(frozen=True, eq=False)
class TritonDecodePlan(DecodePlan):
    """The Triton backend's plan (the protocol of atom_mxfp4.plan): tuning + split-KV workspace.

    part_out [slots, 16, 128] fp32 and part_lse [slots, 16] fp32: slot ``row * splits + split`` of a split launch
    (``partial_slots``: enough for every launch the plan covers); None when no launch it covers splits.
    """

    config: DecodeConfig
    num_splits: int | None  # None: each launch takes num_splits_for(its rows, its width); an int: every launch asks
    # for this many (tests and benchmarks force a path this way)
    part_out: torch.Tensor | None
    part_lse: torch.Tensor | None

    def splits_for(self, rows: int, width: int) -> tuple[int, int]:
        """(splits, pages_per_split) of a launch of ``rows`` x ``width``: the same for every plan that covers it."""
        wanted = (self.num_splits if self.num_splits is not None
                  else num_splits_for(rows, width, self.device, self.config.programs_per_sm))
        return split_pages(width, wanted)


def make_plan(num_rows, max_table_width, group, device, *, num_splits=None, config=None) -> TritonDecodePlan:
    """A plan for calls of <= num_rows rows and tables <= max_table_width wide (atom_mxfp4.plan).

    ``config``: the tuning (None: DEFAULT_CONFIG); ``num_splits``: None (the split policy, per launch) or a forced
    split count."""
    device = plan_device(device)
    config = DEFAULT_CONFIG if config is None else config
    check_forced_splits(num_splits)
    slots = partial_slots(num_rows, max_table_width, device, config, num_splits)
    part_out = part_lse = None
    if slots > 0:
        part_out = torch.empty(slots, int(BLOCK_H), int(HEAD_DIM), dtype=torch.float32, device=device)
        part_lse = torch.empty(slots, int(BLOCK_H), dtype=torch.float32, device=device)
    return TritonDecodePlan(NAME, num_rows, max_table_width, group, device, config, num_splits, part_out, part_lse)


# ---- launcher ---------------------------------------------------------------------------------------------------
def pa_decode(out, q, k_cache, v_cache, tables, context_lens, *, softmax_scale, query_scale, plan):
    # out [R, G, 128] bf16; q [R, G, 128] bf16|e4m3; caches [pages, heads, 8704] u8; tables [R, W] i32; lens [R] i32
    # ---- validate (launch invariants; user input was checked by atom_mxfp4.ops)
    rows, group, _ = q.shape
    width = tables.shape[1]
    expect(group <= GROUP_MAX, "q.shape[1] (GQA group)", f"<= {GROUP_MAX}", group)
    for name, tensor in (("q", q), ("out", out), ("tables", tables), ("context_lens", context_lens)) + (
            (("query_scale", query_scale),) if isinstance(query_scale, torch.Tensor) else ()):
        expect_contiguous(tensor, name)  # read by pointer with unit strides
    for name, cache in (("k_cache", k_cache), ("v_cache", v_cache)):
        if not (cache.is_contiguous() and cache.shape[-1] == RECORD_WIDTH):
            fail(f"{name} layout", f"contiguous [pages, heads, {RECORD_WIDTH}] records",
                 f"{list(cache.shape)} {cache.stride()}")
    if plan is not None:  # even under check=False: a plan too small would be written past its workspace
        check_plan(plan, backend=NAME, rows=rows, width=width, group=group, device=q.device, kind=TritonDecodePlan)
    # ---- flatten: a tensor query_scale is read per row; a number (or None = 1) is folded into the logit scale
    has_query_scale = isinstance(query_scale, torch.Tensor)
    query_scale_arg = query_scale if has_query_scale else context_lens  # never read when not has_query_scale
    scalar_scale = 1.0 if query_scale is None or has_query_scale else float(query_scale)
    # ---- allocate (the plan's workspace; plan=None: a plan of exactly this call's shape, made here)
    if rows == 0 or width == 0:  # ---- early return
        out.zero_()
        return out
    plan = make_plan(rows, width, group, q.device) if plan is None else plan
    # ---- tuning: the plan's config; the split of this call's own shape (the same under any plan that covers it)
    cfg = plan.config
    splits, pages_per_split = checked_split(plan, rows, width)
    split = splits > 1
    # ---- launch
    launcher(_pa_decode_kernel)[(rows, splits)](
        out, q, k_cache, v_cache, tables, context_lens, query_scale_arg,
        plan.part_out if split else out, plan.part_lse if split else out,
        width, group, pages_per_split, splits, float(softmax_scale) * scalar_scale * LOG2E,
        HAS_QUERY_SCALE=has_query_scale, SPLIT=split, BLOCK_N=cfg.block_n, MMA_BF16=mma_bf16(),
        DECODE=decode_variant(cfg.asm).value, num_warps=cfg.num_warps, num_stages=cfg.num_stages, **FUSED,
        **({"maxnreg": cfg.maxnreg} if cfg.maxnreg is not None else {}),
    )
    if split:
        launcher(_merge_kernel)[(rows,)](out, plan.part_out, plan.part_lse, context_lens, width, group,
                                         pages_per_split, splits, num_warps=4, **FUSED)
    return out
