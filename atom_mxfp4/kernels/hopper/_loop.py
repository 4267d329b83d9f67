"""The Hopper pa_decode kernel's main loop (Gluon, sm_90; pa_decode.py): a split's pages -> the program's (m, l, O).

The program's MMA layouts by its warp count; Q loaded once and relabelled to the operand's column order
(``_load_query``, ``_q_operand``); K^T and V of a ring stage decoded straight into the B-operand registers of
``mma.sync`` (``_k_operand``, ``_v_load``, ``_v_operand``; the PTX decodes: _decode.py); one page's logits, per-warp
online softmax with its skippable O rescale and P.V product (``_logits``, ``_p_operand``, ``_rescale``,
``_attend_page``); the split's pages through the ``cp.async`` ring, with the one-multiply decode's window check
(``_stream``); and the w warps' states merged into the program's (``_combine_warps``). The pages and their copies come
from _pages.py; the kernel hands the program's (m, l, O) to its epilogue (_merge.py, _cluster.py). Why each piece is
built so: pa_decode.py's docstring and docs/hopper.md.
"""

from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.ampere import async_copy, mma_v2

from . import layout as L
from ._decode import (BYTE_TOPS, decode_k_operand, decode_v_operand, scale_bf16x2, warp_map, window_misses,
                      window_probabilities, window_query, window_scale_bf16x2)
from ._gluon import cta_barrier
from ._pages import PAGE, SPARSE, _block_of, _copy_scales, _issue_page, _page_id

HEAD_DIM = gl.constexpr(L.HEAD_DIM)
BLOCK_H = gl.constexpr(L.BLOCK_H)
V_PARITY_LAST = gl.constexpr(L.V_PARITY_LAST)
OUT_COLUMNS_ORDER = gl.constexpr(L.OUT_COLUMNS_ORDER)
Q_BITS_SHAPE = gl.constexpr(L.Q_BITS_SHAPE)
Q_BITS_ORDER = gl.constexpr(L.Q_BITS_ORDER)
RESCALE_SLACK = gl.constexpr(float(L.RESCALE_SLACK))  # log2 units: a running maximum moves when passed by more
COMBINE_SMEM = gl.constexpr(gl.SwizzledSharedLayout(4, 1, 8, [2, 1, 0]))
STATE_SMEM = gl.constexpr(gl.SwizzledSharedLayout(1, 1, 1, [1, 0]))  # [2, w warps, 16]: m and l ([w, 16] stages)
Q_SMEM = gl.constexpr(gl.SwizzledSharedLayout(1, 1, 1, [1, 0]))  # [16, 128] bf16 Q, once per program
WINDOW_QUERY_MAX = gl.constexpr(L.WINDOW_QUERY_MAX)


# ---- the program's layouts, by its warp count (gl.num_warps(): 4, or 8 for small batches; layout.PROGRAM_WARPS) ------
@gluon.constexpr_function
def _mma(warps):
    """The MMA layout: mma.sync m16n8k16 with the warp as a leading batch dimension ([w, 16 heads, n])."""
    return gl.NVMMADistributedLayout(version=[2, 0], warps_per_cta=warp_map("mma_warps", warps),
                                     instr_shape=L.MMA_INSTR_SHAPE)


@gluon.constexpr_function
def _a_operand(warps):  # Q [w, 16, 128] and P [w, 16, 128 / w]
    return gl.DotOperandLayout(0, _mma(warps), L.K_WIDTH)


@gluon.constexpr_function
def _b_operand(warps):  # K^T [w, 128, 128 / w] and V [w, 128 / w, 128]
    return gl.DotOperandLayout(1, _mma(warps), L.K_WIDTH)


@gluon.constexpr_function
def _rows_mma(warps):  # [w, 16] per-warp softmax state
    return gl.SliceLayout(2, _mma(warps))


@gluon.constexpr_function
def _k_words(warps):
    return gl.DistributedLinearLayout(**warp_map("k_words_bases", warps))


@gluon.constexpr_function
def _v_words(warps):
    return gl.DistributedLinearLayout(**warp_map("v_words_bases", warps))


@gluon.constexpr_function
def _q_load(warps):  # [16, 128] bf16, 16 B per load
    return gl.BlockedLayout([1, 8], [2, 16], [warps, 1], [1, 0])


@gluon.constexpr_function
def _combine(warps):
    """The warp combine: [w, 16, 128] fp32 with the warp dimension in each thread's registers, so the sum over warps
    is register-only after one trip through shared memory (COMBINE_SMEM: 16-byte units swizzled by row)."""
    return gl.BlockedLayout([warps, 1, 4], [1, 4, 8], [1, 4, warps // 4], [2, 1, 0])


@gluon.constexpr_function
def _combine_out(warps):  # [16, 128]: 4 consecutive head dims per thread
    return gl.SliceLayout(0, _combine(warps))


# ---- device code ---------------------------------------------------------------------------------------------------
@gluon.jit
def _load_query(q_ptr, row, group):
    """Q [16 heads, 128] in the operand's column order (column k holds head dim layout.qk_dim(k); bf16, e4m3 widened
    exactly; heads >= group are 0): one coalesced 16-byte load per 8 dims, relabelled in registers (layout.Q_BITS_*)."""
    WARPS: gl.constexpr = gl.num_warps()
    Q_LOAD: gl.constexpr = _q_load(WARPS)
    head = gl.arange(0, BLOCK_H, layout=gl.SliceLayout(1, Q_LOAD))
    dim = gl.arange(0, HEAD_DIM, layout=gl.SliceLayout(0, Q_LOAD))
    q = gl.load(q_ptr + (row * group + head[:, None]) * HEAD_DIM + dim[None, :], mask=(head < group)[:, None],
                other=0.0)
    q = q.to(gl.float32).to(gl.bfloat16)
    return gl.reshape(gl.permute(gl.reshape(q, Q_BITS_SHAPE.value), Q_BITS_ORDER.value), [BLOCK_H, HEAD_DIM])


@gluon.jit
def _q_operand(q):
    """Q [16, 128] in operand column order -> the A operand [w warps, 16, 128] (every warp holds all of it): one trip
    through shared memory (a convert_layout took 8 rounds through the compiler's scratch, 16 CTA barriers)."""
    WARPS: gl.constexpr = gl.num_warps()
    A_OPERAND: gl.constexpr = _a_operand(WARPS)
    one = gl.allocate_shared_memory(gl.bfloat16, [BLOCK_H, HEAD_DIM], Q_SMEM, q).load(gl.SliceLayout(0, A_OPERAND))
    return gl.broadcast(gl.expand_dims(one, 0), gl.zeros([WARPS, BLOCK_H, HEAD_DIM], gl.bfloat16, A_OPERAND))[0]


@gluon.jit
def _k_operand(k_codes, k_scales, slot, FAST: gl.constexpr, k_words=None, k_scale_words=None):
    """K^T of ring slot ``slot`` as the B operand of Q.K^T [w warps, 128 (head dim layout.qk_dim(k)), 128 / w tokens]:
    words [w, n, c, j] + the scale byte of chunk c of each token, decoded in the registers that loaded them (FAST:
    the one-multiply decode, values x 2**-WINDOW_SHIFT). ``k_words`` / ``k_scale_words``: those of the slot loaded
    already (``_k_ahead``: the in-warp page overlap), None to load them here."""
    WARPS: gl.constexpr = gl.num_warps()
    K_WORDS: gl.constexpr = _k_words(WARPS)
    B_OPERAND: gl.constexpr = _b_operand(WARPS)
    TOKENS_PER_WARP: gl.constexpr = warp_map("tokens_per_warp", WARPS)
    if k_words is None:
        k_words = k_codes.index(slot).reshape(warp_map("k_words_shape", WARPS)).load(K_WORDS)
    k_scale_layout: gl.constexpr = gl.SliceLayout(2, gl.SliceLayout(3, K_WORDS))
    if k_scale_words is None:
        k_scale_words = k_scales.index(slot).reshape([WARPS, TOKENS_PER_WARP]).load(k_scale_layout)
    chunk = gl.arange(0, 4, layout=gl.SliceLayout(0, gl.SliceLayout(1, gl.SliceLayout(3, K_WORDS))))
    k_scale = (k_scale_words[:, :, None] >> (8 * chunk[None, None, :])) & 0xFF
    k_pair = window_scale_bf16x2(k_scale, k_scale) if FAST else scale_bf16x2(k_scale, k_scale)
    return decode_k_operand(k_words, gl.broadcast(k_pair[:, :, :, None], k_words)[0], B_OPERAND, FAST)


@gluon.jit
def _k_ahead(k_codes, k_scales, slot):
    """Ring slot ``slot``'s K code words [w, n, c, j] and scale words [w, n] as ``_k_operand`` takes them: loaded a
    trip ahead by the in-warp page overlap (``_stream``)."""
    WARPS: gl.constexpr = gl.num_warps()
    K_WORDS: gl.constexpr = _k_words(WARPS)
    k_words = k_codes.index(slot).reshape(warp_map("k_words_shape", WARPS)).load(K_WORDS)
    k_scale_words = k_scales.index(slot).reshape([WARPS, warp_map("tokens_per_warp", WARPS)]).load(
        gl.SliceLayout(2, gl.SliceLayout(3, K_WORDS)))
    return k_words, k_scale_words


@gluon.jit
def _v_load(v_codes, v_scales, slot):
    """V of ring slot ``slot`` as loaded from shared memory: words [w, p, par, g, word] with the token parity split
    into (even, odd) words, and the (even, odd) scale bytes of each (p, g) (``_v_operand`` decodes them)."""
    WARPS: gl.constexpr = gl.num_warps()
    V_WORDS: gl.constexpr = _v_words(WARPS)
    TOKENS_PER_WARP: gl.constexpr = warp_map("tokens_per_warp", WARPS)
    v_words = gl.permute(v_codes.index(slot).reshape(warp_map("v_words_shape", WARPS)).load(V_WORDS),
                         V_PARITY_LAST.value)
    v_scale_words = v_scales.index(slot).reshape([WARPS, TOKENS_PER_WARP // 2, 2]).load(
        gl.SliceLayout(3, gl.SliceLayout(4, V_WORDS)))
    group8 = gl.arange(0, 8, layout=gl.SliceLayout(0, gl.SliceLayout(1, gl.SliceLayout(2, gl.SliceLayout(4, V_WORDS)))))
    v_scale = (v_scale_words[:, :, :, None] >> (8 * (group8[None, None, None, :] >> 1))) & 0xFF  # [w, p, par, g]
    v_scale_even, v_scale_odd = gl.split(gl.permute(v_scale, [0, 1, 3, 2]))
    even_words, odd_words = gl.split(v_words)
    return even_words, odd_words, v_scale_even, v_scale_odd


@gluon.jit
def _v_operand(even_words, odd_words, v_scale_even, v_scale_odd, FAST: gl.constexpr):
    """V as the B operand of P.V [w warps, 128 / w tokens, 128 (head dim layout.pv_dim(n))] from ``_v_load``'s words
    and scale bytes, decoded in the registers that loaded them (FAST: the one-multiply decode, values x
    2**-WINDOW_SHIFT)."""
    WARPS: gl.constexpr = gl.num_warps()
    B_OPERAND: gl.constexpr = _b_operand(WARPS)
    v_pair = (window_scale_bf16x2(v_scale_even, v_scale_odd) if FAST
              else scale_bf16x2(v_scale_even, v_scale_odd))  # [w, p, g]
    v_pair = gl.convert_layout(v_pair, gl.SliceLayout(3, even_words.type.layout), assert_trivial=True)
    v_pair = gl.broadcast(v_pair[:, :, :, None], even_words)[0]
    return decode_v_operand(even_words, odd_words, v_pair, B_OPERAND, FAST)


@gluon.jit
def _logits(q, slot, first_token, context, scale, k_codes, k_scales, FAST: gl.constexpr, k_words=None,
            k_scale_words=None):
    """Q.K^T of ring slot ``slot`` (tokens first_token + (128 / w) x warp + n) in log2 units; tokens past the context:
    -inf. ``k_words`` / ``k_scale_words``: ``_k_operand``'s."""
    WARPS: gl.constexpr = gl.num_warps()
    MMA: gl.constexpr = _mma(WARPS)
    TOKENS_PER_WARP: gl.constexpr = warp_map("tokens_per_warp", WARPS)
    logits = mma_v2(q, _k_operand(k_codes, k_scales, slot, FAST, k_words, k_scale_words),
                    gl.zeros([WARPS, BLOCK_H, TOKENS_PER_WARP], gl.float32, MMA)) * scale
    warp = gl.arange(0, WARPS, layout=gl.SliceLayout(1, gl.SliceLayout(2, MMA)))
    token = gl.arange(0, TOKENS_PER_WARP, layout=gl.SliceLayout(0, gl.SliceLayout(1, MMA)))
    position = first_token + warp[:, None, None] * TOKENS_PER_WARP + token[None, None, :]
    return gl.where(position < context, logits, float("-inf"))


@gluon.jit
def _p_operand(p, FAST: gl.constexpr):
    """P (fp32, the QK accumulator layout) as the A operand of P.V: rounded to bf16 in the registers as they are
    (FAST: then x 2**WINDOW_SHIFT, exactly, for the one-multiply V)."""
    WARPS: gl.constexpr = gl.num_warps()
    A_OPERAND: gl.constexpr = _a_operand(WARPS)
    p = p.to(gl.bfloat16)
    if FAST:
        p = window_probabilities(p)
    return gl.convert_layout(p, A_OPERAND, assert_trivial=True)


@gluon.constexpr_function
def rescale_vote_registers(reg_bases, head_dim=1):
    """The registers of one thread whose factors ``_rescale``'s vote tests, for an accumulator whose linear layout has
    these register bases ([w, 16 heads, n]: the head is dimension ``head_dim``): one register per distinct head the
    thread holds, those made of the head-moving register bits only (mma.sync's C fragment: registers 0 and 2, heads
    g and g + 8). Every other register repeats the head, hence the factor, of one of them (tests/test_hopper_layout.py
    checks it against the compiler's layout)."""
    head_bits = [i for i, basis in enumerate(reg_bases) if basis[head_dim] != 0]
    return sorted({sum(1 << bit for j, bit in enumerate(head_bits) if combo >> j & 1)
                   for combo in range(2 ** len(head_bits))})


@gluon.constexpr_function
def _rescale_asm(layout):
    """The PTX of ``_rescale`` for an accumulator in the linear layout ``layout`` ([w, 16 heads, n]; all of a thread's
    R registers in one call): ``$0 .. $(R-1)`` the accumulator (tied to the inputs ``$R .. $(2R-1)``), ``$2R ..`` the
    factor of each register's head. The vote tests one register per distinct head (``rescale_vote_registers``)."""
    regs = 2 ** len(layout.reg_bases)
    tested = rescale_vote_registers(layout.reg_bases)
    lines = ["{", ".reg .pred p;", f"setp.neu.f32 p, ${2 * regs + tested[0]}, 0f3F800000;"]
    lines += [f"setp.neu.or.f32 p, ${2 * regs + i}, 0f3F800000, p;" for i in tested[1:]]
    lines += ["vote.sync.any.pred p, p, 0xffffffff;", "@!p bra.uni SKIP;"]
    lines += [f"mul.f32 ${i}, ${regs + i}, ${2 * regs + i};" for i in range(regs)]
    return "\n".join(lines + ["SKIP:", "}"])


@gluon.constexpr_function
def _rescale_constraints(regs):  # regs outputs, each tied to its input, then regs factors
    return ",".join(["=f"] * regs + [str(i) for i in range(regs)] + ["f"] * regs)


@gluon.jit
def _rescale(acc, alpha):
    """acc x alpha[:, :, None], where a warp none of whose rows' factors differs from 1 skips the multiplies (one
    vote and a uniform branch): with the running maximum moved only by more than RESCALE_SLACK (``_attend_page``),
    most pages of a long row keep every factor at 1. x * 1 is x bit for bit (NaN, Inf, -0 included), so skipping
    changes nothing."""
    linear: gl.constexpr = gl.to_linear_layout(acc.type.layout, acc.shape)
    pack: gl.constexpr = 2 ** len(linear.reg_bases)  # all of a thread's registers in one call
    return gl.inline_asm_elementwise(_rescale_asm(linear), _rescale_constraints(pack),
                                     [acc, gl.broadcast(alpha[:, :, None], acc)[0]],
                                     dtype=gl.float32, is_pure=True, pack=pack)


@gluon.jit
def _attend_page(q, slot, page_index, context, scale, m_i, l_i, acc, k_codes, k_scales, v_codes, v_scales,
                 FAST: gl.constexpr, SKIP: gl.constexpr, k_words=None, k_scale_words=None):
    """One page (ring slot ``slot``): per warp, logits of its 128 / w tokens, online softmax update, P.V accumulate.
    ``k_words`` / ``k_scale_words``: the slot's K words loaded already (the in-warp page overlap, ``_stream``).

    The running maximum m moves only when a page's maximum passes it by more than RESCALE_SLACK (log2 units), so the
    weights ``2**(logit - m)`` stay <= 2**RESCALE_SLACK and most pages rescale nothing (``_rescale``); l and O are
    relative to the same m, which the warp combine and the split merge read as they did the exact maximum.
    SKIP: the rescale as a skippable block. V's shared-memory loads are issued before it, so that their latency
    overlaps its branch; V is decoded after it (64 decoded registers live across the branch spilled at the
    168-register cap). The sparse one-launch loop (1-2 pages per program, where a skip is rare) multiplies always, as
    before: with the branch it was 2-6% slower at batches 1-64 (and spilled a register with V loaded early). x * 1 is
    x, so both give the same bits."""
    logits = _logits(q, slot, page_index * PAGE, context, scale, k_codes, k_scales, FAST, k_words, k_scale_words)
    page_max = gl.max(logits, axis=2)
    grow = page_max > m_i + RESCALE_SLACK  # -inf + slack = -inf; a NaN maximum never moves m
    m_new = gl.where(grow, page_max, m_i)
    m_safe = gl.where(m_new == float("-inf"), 0.0, m_new)  # all -inf so far: weights 0, not NaN
    # m -inf so far: O holds only +-0 (or NaN), which x 0 leaves as they are: factor 1, no multiply
    alpha = gl.where(grow & (m_i > float("-inf")), gl.exp2(m_i - m_safe), 1.0)
    p = gl.exp2(logits - m_safe[:, :, None])
    l_i = l_i * alpha + gl.sum(p, axis=2)
    even_words, odd_words, v_scale_even, v_scale_odd = _v_load(v_codes, v_scales, slot)  # before the rescale
    acc = _rescale(acc, alpha) if SKIP else acc * alpha[:, :, None]
    acc = mma_v2(_p_operand(p, FAST), _v_operand(even_words, odd_words, v_scale_even, v_scale_odd, FAST), acc)
    return m_new, l_i, acc


@gluon.jit
def _stream(q_ptr, k_ptr, v_ptr, tables_ptr, topk_ptr, row, group, table_base, ids_base, head, num_kv_heads,
            table_stride, table_end, context, page_begin, page_end, scale, k_codes, k_scales, v_codes, v_scales,
            STAGES: gl.constexpr, FAST: gl.constexpr, SOURCE: gl.constexpr, PPB: gl.constexpr,
            OVERLAP: gl.constexpr = False):
    """Pages [page_begin, page_end) of the row through the ring -> per warp (m, l, O) and whether the pass was exact:
    always with FAST False; with FAST (the one-multiply decode) only if every scale byte streamed and every query
    element is inside the window (layout.WINDOW_*), else the caller redoes the pass with FAST False.

    OVERLAP (``HopperConfig.overlap``; off by default): each warp loads the next page's K code and scale words from
    shared memory at the end of a page's trip (``_k_ahead``) rather than after the next trip's barrier, so that page's
    decode and Q.K^T need nothing from shared memory: under triton 3.6 ptxas runs them before the trip's CTA barriers
    and copy issue, where the warp otherwise waits (the loop is issue-bound with about one eligible warp per
    scheduler, docs/hopper.md "The final profile"). Trip i then needs page i + 1 landed: each trip waits for one more
    copy group (the copies keep one trip less of lead, as a ring one stage shorter). Page i's slot is still read (V,
    the window check) and is not overwritten before trip i + 1's barrier. The same words decode to the same
    operands: the output bits are the default's. The kernel passes it to its first pass only (the rare exact
    fallback pass runs without it)."""
    WARPS: gl.constexpr = gl.num_warps()
    MMA: gl.constexpr = _mma(WARPS)
    ROWS_MMA: gl.constexpr = _rows_mma(WARPS)
    COPY_SCALES: gl.constexpr = _copy_scales(WARPS)
    q = _load_query(q_ptr, row, group)  # first: its latency overlaps the table loads and copies below
    for s in gl.static_range(STAGES - 1):  # prologue: the first STAGES - 1 pages in flight
        block = _block_of(topk_ptr, ids_base, page_begin + s, table_end, SOURCE, PPB)
        _issue_page(k_ptr, v_ptr, _page_id(tables_ptr, table_base, head, num_kv_heads, table_stride, block,
                                           page_begin + s, table_end, SOURCE, PPB), context,
                    page_begin + s, page_end, s, k_codes, k_scales, v_codes, v_scales)
        async_copy.commit_group()
    # the table entry of the next page to copy, loaded one loop trip before its copy is issued (a copy's addresses
    # need its page id: loaded just before, the load's latency stalled every trip)
    next_id = _page_id(tables_ptr, table_base, head, num_kv_heads, table_stride,
                       _block_of(topk_ptr, ids_base, page_begin + STAGES - 1, table_end, SOURCE, PPB),
                       page_begin + STAGES - 1, table_end, SOURCE, PPB)

    misses = gl.zeros([PAGE], gl.int32, COPY_SCALES)  # the window check: bit 7 of a byte = a scale byte outside
    if FAST:  # a query element outside the window counts as a miss (one register live over the loop, not two)
        magnitude = gl.abs(q.to(gl.float32))
        q_outside = gl.max(gl.max(((magnitude >= WINDOW_QUERY_MAX) & (magnitude < float("inf"))).to(gl.int32),
                                  axis=1), axis=0)
        misses = misses + gl.where(q_outside > 0, BYTE_TOPS, 0)
        q = window_query(q)
    q = _q_operand(q)  # once per program: the loop reads the operand registers as they are
    m_i = gl.full([WARPS, BLOCK_H], float("-inf"), gl.float32, ROWS_MMA)
    l_i = gl.zeros([WARPS, BLOCK_H], gl.float32, ROWS_MMA)
    acc = gl.zeros([WARPS, BLOCK_H, HEAD_DIM], gl.float32, MMA)
    if OVERLAP:  # page 0's K words before the loop (the copies of pages 0 .. STAGES - 2 are in flight)
        gl.static_assert(STAGES >= 3)  # slots: page i (read), i + 1 (read ahead), the copies in flight
        async_copy.wait_group(STAGES - 2)
        cta_barrier()
        ahead_words, ahead_scales = _k_ahead(k_codes, k_scales, 0)
    for page_index in range(page_begin, page_end):
        i = page_index - page_begin
        if OVERLAP:
            async_copy.wait_group(STAGES - 3)  # this thread's copies of pages i and i + 1 (read ahead) landed
        else:
            async_copy.wait_group(STAGES - 2)  # this thread's copies of page i landed
        cta_barrier()  # everyone's did, and every warp is done with page i - 1's slot
        _issue_page(k_ptr, v_ptr, next_id, context, page_index + STAGES - 1, page_end, (i + STAGES - 1) % STAGES,
                    k_codes, k_scales, v_codes, v_scales)
        async_copy.commit_group()
        next_id = _page_id(tables_ptr, table_base, head, num_kv_heads, table_stride,
                           _block_of(topk_ptr, ids_base, page_index + STAGES, table_end, SOURCE, PPB),
                           page_index + STAGES, table_end, SOURCE, PPB)
        if FAST:  # each thread checks the K and V scale words of one token of the page
            misses = misses | window_misses(k_scales.index(i % STAGES).load(COPY_SCALES)) \
                | window_misses(v_scales.index(i % STAGES).load(COPY_SCALES))
        if OVERLAP:  # page i's K words, loaded at the end of the last trip (or before the loop)
            m_i, l_i, acc = _attend_page(q, i % STAGES, page_index, context, scale, m_i, l_i, acc,
                                         k_codes, k_scales, v_codes, v_scales, FAST, SOURCE != SPARSE,
                                         ahead_words, ahead_scales)
            # page i + 1's, issued after this page's P.V: in flight over the next trip's wait and barrier, live only
            # there (issued at the top of the trip instead, triton 3.9 spilled in the loop and 3.8 outside it)
            ahead_words, ahead_scales = _k_ahead(k_codes, k_scales, (i + 1) % STAGES)
        else:
            m_i, l_i, acc = _attend_page(q, i % STAGES, page_index, context, scale, m_i, l_i, acc,
                                         k_codes, k_scales, v_codes, v_scales, FAST, SOURCE != SPARSE)
    async_copy.wait_group(0)  # no copy may still write the ring when the program's shared memory is reused
    exact = True
    if FAST:
        exact = gl.max(((misses & BYTE_TOPS) != 0).to(gl.int32), axis=0) == 0
    return m_i, l_i, acc, exact


@gluon.jit
def _combine_warps(m_i, l_i, acc):
    """The w warps' (m, l, O) of each head -> the program's (m [16], l [16], O [16, 128 head dims]) in COMBINE_OUT:
    every warp stores its state to shared memory once (O with its columns n relabelled to head dims pv_dim(n) in
    registers first), and after one barrier each thread reads every warp's values of its outputs and combines them in
    registers (the compiler's cross-warp reductions and layout conversions took ~1000 instructions and 19 barriers).
    A warp without tokens (m -inf) gets weight 0."""
    WARPS: gl.constexpr = gl.num_warps()
    COMBINE: gl.constexpr = _combine(WARPS)
    COMBINE_OUT: gl.constexpr = _combine_out(WARPS)
    acc = gl.reshape(gl.permute(gl.reshape(acc, warp_map("out_columns_shape", WARPS)), OUT_COLUMNS_ORDER.value),
                     [WARPS, BLOCK_H, HEAD_DIM])
    state = gl.allocate_shared_memory(gl.float32, [2, WARPS, BLOCK_H], STATE_SMEM)  # m, l: live beside O (one
    state.index(0).store(m_i)  # barrier for all three; buffers allocated one after the other were aliased, each
    state.index(1).store(l_i)  # behind its own pair of barriers)
    o_smem = gl.allocate_shared_memory(gl.float32, [WARPS, BLOCK_H, HEAD_DIM], COMBINE_SMEM, acc)
    state_layout: gl.constexpr = gl.SliceLayout(2, COMBINE)
    m_w = state.index(0).load(state_layout)
    l_w = state.index(1).load(state_layout)
    o_w = o_smem.load(COMBINE)
    m_all = gl.max(m_w, axis=0)  # [16]
    m_safe = gl.where(m_all == float("-inf"), 0.0, m_all)
    weight = gl.exp2(m_w - m_safe[None, :])  # [w, 16]; 0 for a warp without tokens
    l_sum = gl.sum(l_w * weight, axis=0)
    o = gl.sum(o_w * weight[:, :, None], axis=0)  # [16, 128 head dims]
    head_layout: gl.constexpr = gl.SliceLayout(1, COMBINE_OUT)
    return (gl.convert_layout(m_all, head_layout, assert_trivial=True),
            gl.convert_layout(l_sum, head_layout, assert_trivial=True), o)
