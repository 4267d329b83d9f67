"""pa_decode (Gluon, Hopper sm_90): paged attention of one query token per row over MXFP4 K/V, GQA group <= 16.

Same signature and semantics as the Triton backend's pa_decode (DESIGN §5, docs/api.md): row r (one KV head, heads
folded into pages) attends over tokens t < context_lens[r]; token t is at folded page ``tables[r, t // 128]`` (record
``page * 8704`` bytes into the cache), offset ``t % 128``.
Sentinels / guarantees:
- tokens t >= context_lens[r] are never loaded: their 16-byte code chunks and 4-byte scale words are masked out of
  the global -> shared copies (cp.async zero-fills them), so NaN / Inf / scale 255 there cannot reach ``out``, and
  their logits are -inf before the softmax;
- table entries past ``ceil(context_lens[r] / 128)`` (and past the program's split) are never read;
- ``context_lens[r] == 0`` writes zeros;
- non-finite logits follow docs/api.md: a NaN or +inf logit of an attended token makes that head's row NaN, a -inf
  logit gives its token weight 0, a row whose logits are all -inf is NaN (0 / 0).
Structure (docs/hopper.md): one program = 4 warps per (row, split); the page records stream through a ring of
``HopperConfig.stages`` shared-memory stages with ``cp.async`` (commit / wait groups, one CTA barrier per page);
each warp decodes its 32 tokens of the page straight into the B-operand registers of ``mma.sync`` (``_decode``),
keeps its own online softmax, and feeds P to the P.V product from the QK accumulator registers. The 4 warps merge
(m, l, O) at the end. Split-KV (grid rows x splits, partial (out, lse) in the plan's workspace, then an LSE merge
kernel) when rows are few; direct (one program per row, bf16 out) otherwise. The split count depends only on
(rows, table width), so a plan made once is valid for every replay of a CUDA graph.
Not checked at run time: page ids in range, context_lens <= 128 * width (``atom_mxfp4.ops`` checks with check=True).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, replace

import torch
import triton
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.ampere import async_copy, mma_v2

from atom_mxfp4.errors import expect, expect_contiguous
from atom_mxfp4.plan import DecodePlan, check_forced_splits, check_plan, checked_split, plan_device, split_pages

from . import NAME
from . import layout as L
from ._decode import decode_k_operand, decode_v_operand, scale_bf16x2

LOG2E = 1.4426950408889634

PAGE = gl.constexpr(L.PAGE_SIZE)
HEAD_DIM = gl.constexpr(L.HEAD_DIM)
BLOCK_H = gl.constexpr(L.BLOCK_H)
WARPS = gl.constexpr(L.WARPS)
TOKENS_PER_WARP = gl.constexpr(L.TOKENS_PER_WARP)
RECORD_WORDS = gl.constexpr(L.RECORD_WORDS)
CODE_WORDS = gl.constexpr(L.CODE_WORDS)
SCALE_WORD = gl.constexpr(L.SCALE_WORD)
QK_DIM_BITS = gl.constexpr(L.QK_DIM_BITS)
V_PARITY_LAST = gl.constexpr(L.V_PARITY_LAST)
OUT_COLUMNS_SHAPE = gl.constexpr(L.OUT_COLUMNS_SHAPE)
OUT_COLUMNS_ORDER = gl.constexpr(L.OUT_COLUMNS_ORDER)

MMA = gl.constexpr(gl.NVMMADistributedLayout(version=[2, 0], warps_per_cta=L.MMA_WARPS, instr_shape=L.MMA_INSTR_SHAPE))
A_OPERAND = gl.constexpr(gl.DotOperandLayout(0, MMA.value, L.K_WIDTH))  # Q [4, 16, 128] and P [4, 16, 32]
B_OPERAND = gl.constexpr(gl.DotOperandLayout(1, MMA.value, L.K_WIDTH))  # K^T [4, 128, 32] and V [4, 32, 128]
K_WORDS = gl.constexpr(gl.DistributedLinearLayout(**L.K_WORDS_BASES))
V_WORDS = gl.constexpr(gl.DistributedLinearLayout(**L.V_WORDS_BASES))
ROWS_MMA = gl.constexpr(gl.SliceLayout(2, MMA.value))  # [4, 16] per-warp softmax state
COPY_CODES = gl.constexpr(gl.BlockedLayout([1, L.COPY_CODE_VEC], [8, 4], [L.WARPS, 1], [1, 0]))  # [128, 16] words
COPY_SCALES = gl.constexpr(gl.BlockedLayout([1], [32], [L.WARPS], [0]))  # [128] words
RING_CODES = gl.constexpr(gl.SwizzledSharedLayout(1, 1, 1, [1, 0]))  # [stages, 128, 16]: unswizzled [128, 16] stages
RING_SCALES = gl.constexpr(gl.SwizzledSharedLayout(1, 1, 1, [0]))  # [stages, 128]
MERGE = gl.constexpr(gl.BlockedLayout([1, 4], [4, 8], [L.WARPS, 1], [1, 0]))  # [16, 128] fp32


# ---- device code ---------------------------------------------------------------------------------------------------
@gluon.jit
def _issue_page(k_ptr, v_ptr, tables_ptr, table_base, context, page_index, page_end, slot,
                k_codes, k_scales, v_codes, v_scales):
    """cp.async the records of page ``page_index`` of the row into ring slot ``slot``; tokens past the context (and the
    whole page when page_index >= page_end) are masked: never read from global memory, zero-filled in the ring."""
    has_page = page_index < page_end
    page = gl.load(tables_ptr + table_base + page_index, mask=has_page, other=0).to(gl.int64)
    valid = gl.where(has_page, gl.minimum(context - page_index * PAGE, PAGE), 0)
    record = page * RECORD_WORDS
    token = gl.arange(0, PAGE, layout=gl.SliceLayout(1, COPY_CODES))
    word = gl.arange(0, CODE_WORDS, layout=gl.SliceLayout(0, COPY_CODES))
    code_offset = record + token[:, None] * CODE_WORDS + word[None, :]
    code_mask = (token < valid)[:, None] & (word < CODE_WORDS)[None, :]
    scale_token = gl.arange(0, PAGE, layout=COPY_SCALES)
    scale_offset = record + SCALE_WORD + scale_token
    scale_mask = scale_token < valid
    async_copy.async_copy_global_to_shared(k_codes.index(slot), k_ptr + code_offset, mask=code_mask)
    async_copy.async_copy_global_to_shared(k_scales.index(slot), k_ptr + scale_offset, mask=scale_mask)
    async_copy.async_copy_global_to_shared(v_codes.index(slot), v_ptr + code_offset, mask=code_mask)
    async_copy.async_copy_global_to_shared(v_scales.index(slot), v_ptr + scale_offset, mask=scale_mask)


@gluon.jit
def _load_query(q_ptr, row, group):
    """Q as the A operand [4 warps, 16 heads, 128]: column k holds head dim layout.qk_dim(k) (bf16; e4m3 widened
    exactly); heads >= group are 0."""
    head = gl.arange(0, BLOCK_H, layout=gl.SliceLayout(0, gl.SliceLayout(2, A_OPERAND)))
    k = gl.arange(0, HEAD_DIM, layout=gl.SliceLayout(0, gl.SliceLayout(1, A_OPERAND)))
    warp = gl.arange(0, WARPS, layout=gl.SliceLayout(1, gl.SliceLayout(2, A_OPERAND)))
    dim = gl.zeros_like(k)
    for i in gl.static_range(7):
        dim = dim | (((k >> i) & 1) << QK_DIM_BITS[i])
    offset = (row * group + head[None, :, None]) * HEAD_DIM + dim[None, None, :] + 0 * warp[:, None, None]
    q = gl.load(q_ptr + offset, mask=(head < group)[None, :, None], other=0.0)
    return q.to(gl.float32).to(gl.bfloat16)


@gluon.jit
def _k_operand(k_codes, k_scales, slot):
    """K^T of ring slot ``slot`` as the B operand of Q.K^T [4 warps, 128 (head dim layout.qk_dim(k)), 32 tokens]:
    words [w, n, c, j] + the scale byte of chunk c of each token, decoded in the registers that loaded them."""
    k_words = k_codes.index(slot).reshape(L.K_WORDS_SHAPE).load(K_WORDS)
    k_scale_layout: gl.constexpr = gl.SliceLayout(2, gl.SliceLayout(3, K_WORDS))
    k_scale_words = k_scales.index(slot).reshape([WARPS, TOKENS_PER_WARP]).load(k_scale_layout)
    chunk = gl.arange(0, 4, layout=gl.SliceLayout(0, gl.SliceLayout(1, gl.SliceLayout(3, K_WORDS))))
    k_scale = (k_scale_words[:, :, None] >> (8 * chunk[None, None, :])) & 0xFF
    k_pair = scale_bf16x2(k_scale, k_scale)
    return decode_k_operand(k_words, gl.broadcast(k_pair[:, :, :, None], k_words)[0], B_OPERAND)


@gluon.jit
def _v_operand(v_codes, v_scales, slot):
    """V of ring slot ``slot`` as the B operand of P.V [4 warps, 32 tokens, 128 (head dim layout.pv_dim(n))]: words
    [w, p, par, g, word], the token parity split into (even, odd) words, decoded in the registers that loaded them."""
    v_words = gl.permute(v_codes.index(slot).reshape(L.V_WORDS_SHAPE).load(V_WORDS), V_PARITY_LAST.value)
    v_scale_words = v_scales.index(slot).reshape([WARPS, TOKENS_PER_WARP // 2, 2]).load(
        gl.SliceLayout(3, gl.SliceLayout(4, V_WORDS)))
    group8 = gl.arange(0, 8, layout=gl.SliceLayout(0, gl.SliceLayout(1, gl.SliceLayout(2, gl.SliceLayout(4, V_WORDS)))))
    v_scale = (v_scale_words[:, :, :, None] >> (8 * (group8[None, None, None, :] >> 1))) & 0xFF  # [w, p, par, g]
    v_scale_even, v_scale_odd = gl.split(gl.permute(v_scale, [0, 1, 3, 2]))
    v_pair = scale_bf16x2(v_scale_even, v_scale_odd)  # [w, p, g]
    even_words, odd_words = gl.split(v_words)
    v_pair = gl.convert_layout(v_pair, gl.SliceLayout(3, even_words.type.layout), assert_trivial=True)
    v_pair = gl.broadcast(v_pair[:, :, :, None], even_words)[0]
    return decode_v_operand(even_words, odd_words, v_pair, B_OPERAND)


@gluon.jit
def _attend_page(q, slot, page_index, context, scale, m_i, l_i, acc, k_codes, k_scales, v_codes, v_scales):
    """One page (ring slot ``slot``): per warp, logits of its 32 tokens, online softmax update, P.V accumulate."""
    logits = mma_v2(q, _k_operand(k_codes, k_scales, slot),
                    gl.zeros([WARPS, BLOCK_H, TOKENS_PER_WARP], gl.float32, MMA)) * scale
    # ---- online softmax per warp (log2 units); tokens past the context: -inf
    warp = gl.arange(0, WARPS, layout=gl.SliceLayout(1, gl.SliceLayout(2, MMA)))
    token = gl.arange(0, TOKENS_PER_WARP, layout=gl.SliceLayout(0, gl.SliceLayout(1, MMA)))
    position = page_index * PAGE + warp[:, None, None] * TOKENS_PER_WARP + token[None, None, :]
    logits = gl.where(position < context, logits, float("-inf"))
    m_new = gl.maximum(m_i, gl.max(logits, axis=2))
    m_safe = gl.where(m_new == float("-inf"), 0.0, m_new)  # all -inf so far: weights 0, not NaN
    alpha = gl.exp2(m_i - m_safe)
    p = gl.exp2(logits - m_safe[:, :, None])
    l_i = l_i * alpha + gl.sum(p, axis=2)
    p_operand = gl.convert_layout(p.to(gl.bfloat16), A_OPERAND, assert_trivial=True)  # the QK registers as they are
    acc = mma_v2(p_operand, _v_operand(v_codes, v_scales, slot), acc * alpha[:, :, None])
    return m_new, l_i, acc


@gluon.jit
def _pa_decode_kernel(
    out_ptr, q_ptr, k_ptr, v_ptr, tables_ptr, context_lens_ptr, query_scale_ptr,
    part_out_ptr, part_lse_ptr,
    table_stride, group, pages_per_split, num_splits, logit_scale,
    HAS_QUERY_SCALE: gl.constexpr, SPLIT: gl.constexpr, STAGES: gl.constexpr,
):
    gl.static_assert(STAGES >= 2)
    row = gl.program_id(0).to(gl.int64)
    split = gl.program_id(1)
    context = gl.load(context_lens_ptr + row)
    num_pages = gl.cdiv(context, PAGE)
    page_begin = split * pages_per_split
    page_end = gl.minimum(page_begin + pages_per_split, num_pages)
    table_base = row * table_stride

    k_codes = gl.allocate_shared_memory(gl.int32, [STAGES, PAGE, CODE_WORDS], RING_CODES)
    k_scales = gl.allocate_shared_memory(gl.int32, [STAGES, PAGE], RING_SCALES)
    v_codes = gl.allocate_shared_memory(gl.int32, [STAGES, PAGE, CODE_WORDS], RING_CODES)
    v_scales = gl.allocate_shared_memory(gl.int32, [STAGES, PAGE], RING_SCALES)
    for s in gl.static_range(STAGES - 1):  # prologue: the first STAGES - 1 pages in flight
        _issue_page(k_ptr, v_ptr, tables_ptr, table_base, context, page_begin + s, page_end, s,
                    k_codes, k_scales, v_codes, v_scales)
        async_copy.commit_group()

    q = _load_query(q_ptr, row, group)
    scale = logit_scale
    if HAS_QUERY_SCALE:
        scale = scale * gl.load(query_scale_ptr + row)
    m_i = gl.full([WARPS, BLOCK_H], float("-inf"), gl.float32, ROWS_MMA)
    l_i = gl.zeros([WARPS, BLOCK_H], gl.float32, ROWS_MMA)
    acc = gl.zeros([WARPS, BLOCK_H, HEAD_DIM], gl.float32, MMA)
    for page_index in range(page_begin, page_end):
        i = page_index - page_begin
        async_copy.wait_group(STAGES - 2)  # this thread's copies of page i landed
        gl.thread_barrier()  # everyone's did, and every warp is done with page i - 1's slot
        _issue_page(k_ptr, v_ptr, tables_ptr, table_base, context, page_index + STAGES - 1, page_end,
                    (i + STAGES - 1) % STAGES, k_codes, k_scales, v_codes, v_scales)
        async_copy.commit_group()
        m_i, l_i, acc = _attend_page(q, i % STAGES, page_index, context, scale, m_i, l_i, acc,
                                     k_codes, k_scales, v_codes, v_scales)
    async_copy.wait_group(0)  # no copy may still write the ring when the program's shared memory is reused

    # ---- merge the 4 warps' (m, l, O) of each head
    m_all = gl.max(m_i, axis=0)  # [16]
    m_safe = gl.where(m_all == float("-inf"), 0.0, m_all)
    weight = gl.exp2(m_i - m_safe[None, :])  # [4, 16]; 0 for a warp without tokens
    l_sum = gl.sum(l_i * weight, axis=0)
    o = gl.sum(acc * weight[:, :, None], axis=0)  # [16, 128 (column n)]
    # columns n -> head dims layout.pv_dim(n) = 16 (n & 7) + (n >> 3): un-permute in registers
    o = gl.reshape(gl.permute(gl.reshape(o, OUT_COLUMNS_SHAPE.value), OUT_COLUMNS_ORDER.value), [BLOCK_H, HEAD_DIM])
    o = gl.convert_layout(o, MERGE)
    l_sum = gl.convert_layout(l_sum, gl.SliceLayout(1, MERGE))
    m_all = gl.convert_layout(m_all, gl.SliceLayout(1, MERGE))
    head = gl.arange(0, BLOCK_H, layout=gl.SliceLayout(1, MERGE))
    dim = gl.arange(0, HEAD_DIM, layout=gl.SliceLayout(0, MERGE))
    # l > 0: a softmax; l == 0: no token, or every logit -inf; l NaN: a NaN or +inf logit (docs/api.md)
    has_tokens = l_sum > 0.0
    out = o / gl.where(has_tokens, l_sum, 1.0)[:, None]
    if SPLIT:  # partial (out, lse) of this split: lse -inf (weight 0) when l == 0, NaN when l is NaN
        lse = gl.where(has_tokens, m_all + gl.log2(gl.where(has_tokens, l_sum, 1.0)),
                       gl.where(l_sum == 0.0, float("-inf"), float("nan")))
        base = (row * num_splits + split) * BLOCK_H
        gl.store(part_out_ptr + (base + head[:, None]) * HEAD_DIM + dim[None, :], out)
        gl.store(part_lse_ptr + base + head, lse)
    else:  # no token: zeros; tokens but no weight (all logits -inf) or NaN: NaN
        out = gl.where(has_tokens[:, None], out, gl.where(context > 0, float("nan"), 0.0))
        gl.store(out_ptr + (row * group + head[:, None]) * HEAD_DIM + dim[None, :], out.to(gl.bfloat16),
                 mask=(head < group)[:, None])


@gluon.jit
def _merge_kernel(out_ptr, part_out_ptr, part_lse_ptr, context_lens_ptr, group, num_splits):
    """out[r] = sum_s w_s * part_out[r, s], w_s = 2**(lse_s - max lse) / sum; a NaN lse makes the head NaN; all -inf:
    zeros when the row has no token, NaN when it has tokens whose logits are all -inf."""
    row = gl.program_id(0).to(gl.int64)
    context = gl.load(context_lens_ptr + row)
    head = gl.arange(0, BLOCK_H, layout=gl.SliceLayout(1, MERGE))
    dim = gl.arange(0, HEAD_DIM, layout=gl.SliceLayout(0, MERGE))
    m_i = gl.full([BLOCK_H], float("-inf"), gl.float32, gl.SliceLayout(1, MERGE))
    l_i = gl.zeros([BLOCK_H], gl.float32, gl.SliceLayout(1, MERGE))
    acc = gl.zeros([BLOCK_H, HEAD_DIM], gl.float32, MERGE)
    for split in range(num_splits):
        base = (row * num_splits + split) * BLOCK_H
        lse = gl.load(part_lse_ptr + base + head)
        m_new = gl.maximum(m_i, lse)
        m_safe = gl.where(m_new == float("-inf"), 0.0, m_new)
        alpha = gl.exp2(m_i - m_safe)
        weight = gl.exp2(lse - m_safe)
        part = gl.load(part_out_ptr + (base + head[:, None]) * HEAD_DIM + dim[None, :])
        acc = acc * alpha[:, None] + part * weight[:, None]
        l_i = l_i * alpha + weight
        m_i = m_new
    out = acc / gl.where(l_i > 0.0, l_i, 1.0)[:, None]
    out = gl.where((l_i > 0.0)[:, None], out, gl.where(context > 0, float("nan"), 0.0))
    gl.store(out_ptr + (row * group + head[:, None]) * HEAD_DIM + dim[None, :], out.to(gl.bfloat16),
             mask=(head < group)[:, None])


# ---- tuning -----------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class HopperConfig:
    # Chosen before any GPU run (docs/hopper.md): 4 warps (one 32-token quarter of the page each), 4 ring stages
    # (4 x 17408 B = 68 KB of records in flight per program), no register cap. programs_per_sm is what the split
    # policy counts as one wave per SM: 3 from the sm_90 compile (168 registers x 128 threads -> 3 programs in the
    # 64K-register file; 3 x 69 KB shared fits the 228 KB), not yet measured on the H200.
    stages: int = 4
    programs_per_sm: int = 3
    maxnreg: int | None = 168  # the direct kernel's own count: keeps the query_scale variant (191 uncapped) at 3
    # programs per SM without spills (evals/bench/hopper_sass.py; a 128 cap spills 120 B of stack)


DEFAULT_CONFIG = HopperConfig()
NUM_WARPS = L.WARPS  # the layouts are written for 4 warps
MIN_PAGES_PER_SPLIT = 2  # a split of one page would spend its time in the prologue / epilogue
WAVE_FILL = 0.9  # rows >= one wave: split until the programs' last wave is on average at least this full
MAX_WAVE_SPLITS = 4


@functools.cache
def _num_sms(device_index: int) -> int:
    return torch.cuda.get_device_properties(device_index).multi_processor_count


def num_splits_for(num_rows: int, max_table_width: int, device: torch.device, programs_per_sm: int) -> int:
    """Splits per row; depends only on (rows, table width), so a plan stays valid for every graph replay.

    A wave = ``programs_per_sm`` x SMs programs (132 SMs assumed off-GPU). Fewer rows than a wave: split to fill one
    wave, each split keeping at least MIN_PAGES_PER_SPLIT pages. A wave or more: the fewest splits (<= 4) whose waves
    are on average WAVE_FILL full (512 rows at 3 x 132 slots are 1.29 waves unsplit, 65% full; 3 splits: 97%), else
    the fullest; rows that fill their waves run unsplit (the direct path: no workspace, no merge launch).
    """
    if num_rows == 0:
        return 1
    slots = programs_per_sm * (_num_sms(device.index or 0) if device.type == "cuda" else 132)
    most = max(1, max_table_width // MIN_PAGES_PER_SPLIT)
    if num_rows < slots:
        return max(1, min(triton.cdiv(slots, num_rows), most))

    def fill(splits):
        waves = num_rows * splits / slots
        return waves / math.ceil(waves)

    candidates = range(1, min(MAX_WAVE_SPLITS, most) + 1)
    return next((c for c in candidates if fill(c) >= WAVE_FILL), max(candidates, key=fill))


# ---- plan -------------------------------------------------------------------------------------------------------
def partial_slots(num_rows: int, max_table_width: int, device: torch.device, config: HopperConfig,
                  num_splits: int | None) -> int:
    """Partial (row, split) slots enough for every launch of <= num_rows rows over tables <= max_table_width wide (0:
    none of them splits). Forced splits: rows x splits. The policy (``num_splits_for``): fewer rows than a wave split
    to at most fill it (rows x splits < wave + rows), a wave or more at most MAX_WAVE_SPLITS ways; never more than
    width // MIN_PAGES_PER_SPLIT ways."""
    if num_splits is not None:
        wanted = split_pages(max_table_width, num_splits)[0]
        return num_rows * wanted if wanted > 1 else 0
    most = max(1, max_table_width // MIN_PAGES_PER_SPLIT)
    if most == 1 or num_rows == 0:
        return 0
    wave = config.programs_per_sm * (_num_sms(device.index or 0) if device.type == "cuda" else 132)
    below = min(num_rows, wave - 1)  # launches of fewer rows than a wave
    bound = min(below * most, below + wave - 1)
    if num_rows >= wave:
        bound = max(bound, num_rows * min(MAX_WAVE_SPLITS, most))
    return bound


@dataclass(frozen=True, eq=False)
class HopperDecodePlan(DecodePlan):
    """The Hopper backend's plan (the protocol of atom_mxfp4.plan): tuning + split-KV workspace.

    part_out [slots, 16, 128] fp32 and part_lse [slots, 16] fp32: slot ``row * splits + split`` of a split launch
    (``partial_slots``: enough for every launch the plan covers); None when no launch it covers splits.
    ``num_splits`` / ``pages_per_split``: what a launch of the plan's own shape does (benchmarks report them).
    """

    config: HopperConfig
    forced_splits: int | None  # None: each launch takes num_splits_for(its rows, its width); an int: every launch
    num_splits: int
    pages_per_split: int
    part_out: torch.Tensor | None
    part_lse: torch.Tensor | None

    def splits_for(self, rows: int, width: int) -> tuple[int, int]:
        """(splits, pages_per_split) of a launch of ``rows`` x ``width``: the same for every plan that covers it."""
        wanted = (self.forced_splits if self.forced_splits is not None
                  else num_splits_for(rows, width, self.device, self.config.programs_per_sm))
        return split_pages(width, wanted)


def make_plan(num_rows, max_table_width, group, device, *, num_splits=None, config=None) -> HopperDecodePlan:
    """A plan for calls of <= num_rows rows and tables <= max_table_width wide (atom_mxfp4.plan). ``config``: the
    tuning (None: DEFAULT_CONFIG); ``num_splits``: None (the split policy, per launch) or a forced split count."""
    device = plan_device(device)
    config = DEFAULT_CONFIG if config is None else config
    check_forced_splits(num_splits)
    own = split_pages(max_table_width, num_splits if num_splits is not None
                 else num_splits_for(num_rows, max_table_width, device, config.programs_per_sm))
    slots = partial_slots(num_rows, max_table_width, device, config, num_splits)
    part_out = part_lse = None
    if slots > 0:
        part_out = torch.empty(slots, L.BLOCK_H, L.HEAD_DIM, dtype=torch.float32, device=device)
        part_lse = torch.empty(slots, L.BLOCK_H, dtype=torch.float32, device=device)
    return HopperDecodePlan(NAME, num_rows, max_table_width, group, device, config, num_splits, *own, part_out,
                            part_lse)


def with_config(plan: HopperDecodePlan, config: HopperConfig) -> HopperDecodePlan:
    """The same plan with another tuning config (benchmarks and tests override tuning this way)."""
    return replace(plan, config=config)


# ---- launcher ---------------------------------------------------------------------------------------------------
def pa_decode(out, q, k_cache, v_cache, tables, context_lens, *, softmax_scale, query_scale, plan):
    # out [R, G, 128] bf16; q [R, G, 128] bf16|e4m3; caches [pages, heads, 8704] u8; tables [R, W] i32; lens [R] i32
    # ---- validate (launch invariants; user input was checked by atom_mxfp4.ops)
    rows, group, _ = q.shape
    width = tables.shape[1]
    expect(group <= L.BLOCK_H, "q.shape[1] (GQA group)", f"<= {L.BLOCK_H}", group)
    expect(q.dtype in (torch.bfloat16, torch.float8_e4m3fn), "q.dtype", "torch.bfloat16 or torch.float8_e4m3fn",
           q.dtype, TypeError)
    for name, tensor in (("q", q), ("out", out), ("tables", tables), ("context_lens", context_lens)) + (
            (("query_scale", query_scale),) if isinstance(query_scale, torch.Tensor) else ()):
        expect_contiguous(tensor, name)  # read by pointer with unit strides
    for name, cache in (("k_cache", k_cache), ("v_cache", v_cache)):
        expect(cache.is_contiguous() and cache.shape[-1] == L.RECORD_BYTES and cache.data_ptr() % 16 == 0,
               f"{name} layout", f"contiguous [pages, heads, {L.RECORD_BYTES}] uint8 records, 16-byte aligned",
               f"{list(cache.shape)} strides {cache.stride()} at address {cache.data_ptr():#x}")
    if plan is not None:  # even under check=False: a plan too small would be written past its workspace
        check_plan(plan, backend=NAME, rows=rows, width=width, group=group, device=q.device, kind=HopperDecodePlan)
    # ---- flatten: records as int32 words; a tensor query_scale is read per row, a number (or None = 1) is folded
    k_words = k_cache.view(torch.int32)
    v_words = v_cache.view(torch.int32)
    has_query_scale = isinstance(query_scale, torch.Tensor)
    query_scale_arg = query_scale if has_query_scale else context_lens  # never read when not has_query_scale
    scalar_scale = 1.0 if query_scale is None or has_query_scale else float(query_scale)
    # ---- allocate (the plan's workspace; one is made here when the caller passed none)
    if rows == 0 or width == 0:  # ---- early return
        out.zero_()
        return out
    plan = make_plan(rows, width, group, q.device) if plan is None else plan
    # ---- tuning: the plan's config; the split of this call's own shape (the same under any plan that covers it)
    cfg = plan.config
    splits, pages_per_split = checked_split(plan, rows, width)
    split = splits > 1
    # ---- launch
    _pa_decode_kernel[(rows, splits)](
        out, q, k_words, v_words, tables, context_lens, query_scale_arg,
        plan.part_out if split else out, plan.part_lse if split else out,
        width, group, pages_per_split, splits, float(softmax_scale) * scalar_scale * LOG2E,
        HAS_QUERY_SCALE=has_query_scale, SPLIT=split, STAGES=cfg.stages, num_warps=NUM_WARPS,
        **({"maxnreg": cfg.maxnreg} if cfg.maxnreg is not None else {}),
    )
    if split:
        _merge_kernel[(rows,)](out, plan.part_out, plan.part_lse, context_lens, group, splits,
                               num_warps=NUM_WARPS)
    return out


# ---- compile without a GPU (tests/test_hopper_compile.py, evals/bench/hopper_sass.py) ----------------------------
SIGNATURE = {
    "out_ptr": "*bf16", "q_ptr": "*bf16", "k_ptr": "*i32", "v_ptr": "*i32", "tables_ptr": "*i32",
    "context_lens_ptr": "*i32", "query_scale_ptr": "*fp32", "part_out_ptr": "*fp32", "part_lse_ptr": "*fp32",
    "table_stride": "i32", "group": "i32", "pages_per_split": "i32", "num_splits": "i32", "logit_scale": "fp32",
    "HAS_QUERY_SCALE": "constexpr", "SPLIT": "constexpr", "STAGES": "constexpr",
}


def compile_for_sm90(config: HopperConfig = DEFAULT_CONFIG, *, split: bool = False, query_scale: bool = False):
    """Compile the decode kernel for sm_90 with the ptxas Triton ships (no GPU needed); returns the CompiledKernel.

    Pointer arguments get the 16-byte divisibility the launcher specialises on at run time (the caches are checked
    16-byte aligned; 8704-byte records keep every page 16-byte aligned)."""
    from triton.backends.compiler import GPUTarget
    from triton.experimental.gluon._runtime import GluonASTSource

    constants = {"HAS_QUERY_SCALE": query_scale, "SPLIT": split, "STAGES": config.stages}
    pointers = [i for i, kind in enumerate(SIGNATURE.values()) if kind.startswith("*")]
    attrs = {(i,): [["tt.divisibility", 16]] for i in pointers}
    options = {"num_warps": NUM_WARPS, **({"maxnreg": config.maxnreg} if config.maxnreg is not None else {})}
    return triton.compile(GluonASTSource(_pa_decode_kernel, SIGNATURE, constants, attrs),
                          target=GPUTarget("cuda", 90, 32), options=options)
