"""The wgmma decision probe's kernel (issue 42, item 1): a swap-AB wgmma page loop with the real MXFP4 decode.

One program = one warpgroup (4 warps) streaming ``pages`` full 128-token pages of one (row, KV head), 16 query heads:
- the records (``layout``: per page+head [128 x 64 B codes][128 x 4 B e8m0]) come through a ring of cp.async copies
  (``_pages._issue_page``, the shipped kernel's copy code; STAGES slots of K codes / scales / V codes / scales);
- S^T [128 tokens, 16 heads] = sum over the 4 head-dim groups g of c_g[token] x (K_g . Q_g^T): K_g = the group's
  32 dims of K decoded e2m1 -> e4m3 by bit placement (``e4m3_byte``: the byte is e2m1(code) x 2**-6, exact, the
  subnormal 0.5 included), Q_g^T e4m3 in shared memory (hi, and lo = e4m3(Q - hi) with Variant.q_terms == 2), one
  wgmma m64n16k32 pair per group into its own fp32 accumulator; c_g = 2**(e - 127 + 6 - qshift) (the e8m0 byte, the
  placement's 2**6, the per-program power of two that scales Q into e4m3 range) on the score side;
- softmax over the tokens (M: across the warpgroup), P^T bf16 through shared memory;
- O^T [128 dims, 16 heads] += V^T [128 dims, 128 tokens] . P^T: V^T decoded to bf16 in registers (the shipped
  one-multiply decode: ``_decode._pair``, window scale pairs), 8 async wgmma of 16 tokens.
Head-dim orders are permuted so each thread decodes whole code words (K: operand column k of group g is head dim
``qk_dim(k)``; V^T: operand row m is head dim ``pv_dim(m)``); Q is laid out, and O stored, in the same orders.
"""

from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import fence_async_shared, warpgroup_mma, warpgroup_mma_wait

from atom_mxfp4.kernels.hopper import layout as L
from atom_mxfp4.kernels.hopper._decode import pair_layout, unpack_bf16x2
from atom_mxfp4.kernels.hopper._gluon import cta_barrier
from atom_mxfp4.kernels.hopper._pages import _issue_page
from atom_mxfp4.evals.bench import _wgmma_probe_bits as M

TOKENS = gl.constexpr(128)
DIMS = gl.constexpr(128)
HEADS = gl.constexpr(16)
CODE_WORDS = gl.constexpr(L.CODE_WORDS)
ACC = gl.constexpr(gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, 16, 16]))
ACC8 = gl.constexpr(gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, 16, 32]))
A_FP8 = gl.constexpr(gl.DotOperandLayout(operand_index=0, parent=ACC8.value, k_width=4))
A_BF16 = gl.constexpr(gl.DotOperandLayout(operand_index=0, parent=ACC.value, k_width=2))
# K code words of one group [128 tokens, 4 words]: lane & 3 = word c, lane >> 2 = token bits 0..2 (the A fragment's
# rows g), register bits = tokens + 8 / + 64, warps = tokens + 16 / + 32
K_WORDS = gl.constexpr(gl.DistributedLinearLayout(reg_bases=[[8, 0], [64, 0]],
                                                  lane_bases=[[0, 1], [0, 2], [1, 0], [2, 0], [4, 0]],
                                                  warp_bases=[[16, 0], [32, 0]], block_bases=[], shape=[128, 4]))
# V half-words of one 16-token chunk [4 w, 8 g, 8 token pairs pp]: half-word 8 w + g (dims 4 (8 w + g) .. + 3) of
# tokens 16 c + 2 pp (+ 1); pp = (lane & 3) + 4 x register bit (the A fragment's k = 2 (lane & 3) + 8 q + {0, 1})
V_HALVES = gl.constexpr(gl.DistributedLinearLayout(reg_bases=[[0, 0, 4]],
                                                   lane_bases=[[0, 0, 1], [0, 0, 2], [0, 1, 0], [0, 2, 0], [0, 4, 0]],
                                                   warp_bases=[[1, 0, 0], [2, 0, 0]], block_bases=[],
                                                   shape=[4, 8, 8]))
# a 16-token chunk's V half-words [16 tokens, 32 halves] / scale bytes [16 tokens, 4]: token bit 0 (the parity) and 3
# in registers, bits 1, 2 = lane & 3; half-word 8 w + g (lane >> 2 = g, warp w), scale byte w (broadcast over g)
V_TOKENS = gl.constexpr(gl.DistributedLinearLayout(reg_bases=[[1, 0], [8, 0]],
                                                   lane_bases=[[2, 0], [4, 0], [0, 1], [0, 2], [0, 4]],
                                                   warp_bases=[[0, 8], [0, 16]], block_bases=[], shape=[16, 32]))
V_SCALES = gl.constexpr(gl.DistributedLinearLayout(reg_bases=[[1, 0], [8, 0]],
                                                   lane_bases=[[2, 0], [4, 0], [0, 0], [0, 0], [0, 0]],
                                                   warp_bases=[[0, 1], [0, 2]], block_bases=[], shape=[16, 4]))
PLAIN2 = gl.constexpr(gl.SwizzledSharedLayout(1, 1, 1, [1, 0]))
RING_CODES = gl.constexpr(gl.SwizzledSharedLayout(1, 1, 1, [1, 0]))
RING_SCALES = gl.constexpr(gl.SwizzledSharedLayout(1, 1, 1, [0]))
Q_SMEM = gl.constexpr(gl.NVMMASharedLayout(swizzle_byte_width=32, element_bitwidth=8, rank=2))  # [4 g x 16 h, 32 k]
K_SMEM = gl.constexpr(gl.NVMMASharedLayout(swizzle_byte_width=32, element_bitwidth=8, rank=2))  # [4 g x 128 t, 32 k]
P_SMEM = gl.constexpr(gl.NVMMASharedLayout(swizzle_byte_width=32, element_bitwidth=16, rank=2))  # [128 t, 16 h]
SIGN_MASK = gl.constexpr(M.SIGN_MASK - 2 ** 32)  # 0x80808080 as an int32
MAG_MASK = gl.constexpr(M.MAG_MASK)
WINDOW_PAIR_BIAS = gl.constexpr(L.WINDOW_PAIR_BIAS)
V_ASM = gl.constexpr(M.v_half_asm())
K_REGISTERS = gl.constexpr(M.K_REGISTERS)
K_SHARED = gl.constexpr(M.K_SHARED)


@gluon.jit
def _e4m3_words(x):
    """int32 code words (8 e2m1 nibbles) -> (even, odd) int32 words of 4 e4m3 bytes: elements 0 2 4 6 / 1 3 5 7."""
    even = ((x << 2) & MAG_MASK) | ((x << 4) & SIGN_MASK)
    odd = ((x >> 2) & MAG_MASK) | (x & SIGN_MASK)
    return even, odd


@gluon.jit
def _bytes_as_e4m3(x):
    """int32 [...] -> float8e4nv [..., 2, 2] (byte 2 i1 + i0 at [..., i1, i0]): a register rename."""
    doubled = gl.convert_layout(gl.join(x, x), pair_layout(gl.to_linear_layout(x.type.layout, x.shape)),
                                assert_trivial=True)
    quad = gl.convert_layout(gl.join(doubled, doubled),
                             pair_layout(gl.to_linear_layout(doubled.type.layout, doubled.shape)), assert_trivial=True)
    out = gl.inline_asm_elementwise("mov.b32 $0, $1;", "=r,r,r,r,r", [quad], dtype=gl.float8e4nv, is_pure=True,
                                    pack=4)
    return out


@gluon.jit
def _k_group(k_codes, slot, g: gl.constexpr):
    """Group g's K operand [128 tokens, 32] e4m3 (column k = dim 32 g + qk_dim(k)) in the fp8 A layout."""
    words = k_codes.index(slot).slice(4 * g, 4, dim=1).load(K_WORDS)
    even, odd = _e4m3_words(words)
    e8 = gl.reshape(_bytes_as_e4m3(gl.join(even, odd)), [TOKENS, 4, 2, 4])  # [128, 4 c, 2 par, 4 i]
    k = gl.reshape(gl.permute(e8, [0, 2, 1, 3]), [TOKENS, 32])  # k = 16 par + 4 c + i
    return gl.convert_layout(k, A_FP8)


@gluon.jit
def _v_chunk(v_codes, v_scales, slot, c: gl.constexpr):
    """V^T of tokens 16 c .. 16 c + 15 [128 rows, 16] bf16 (row m = dim pv_dim(m), values x 2**-63) in the A layout."""
    halves = v_codes.index(slot)._reinterpret(gl.int16, [TOKENS, 32], PLAIN2).slice(16 * c, 16).load(V_TOKENS)
    halves = gl.permute(gl.reshape(halves, [8, 2, 4, 8]), [2, 3, 0, 1])  # [w, g, pp, par]
    even, odd = gl.split(halves)
    even = gl.convert_layout(even, V_HALVES).to(gl.int32)  # the asm reads only bytes 0 and 1: no mask
    odd = gl.convert_layout(odd, V_HALVES).to(gl.int32)
    e = v_scales.index(slot)._reinterpret(gl.uint8, [TOKENS, 4], PLAIN2).slice(16 * c, 16).load(V_SCALES)
    e_even, e_odd = gl.split(gl.permute(gl.reshape(e, [8, 2, 4]), [2, 0, 1]))  # [G = w, pp]
    e_even = gl.convert_layout(e_even, gl.SliceLayout(1, V_HALVES)).to(gl.int32)
    e_odd = gl.convert_layout(e_odd, gl.SliceLayout(1, V_HALVES)).to(gl.int32)
    pair = gl.expand_dims(((e_even << 7) | (e_odd << 23)) + WINDOW_PAIR_BIAS, 1) + even * 0
    r0, r1, r2, r3 = gl.inline_asm_elementwise(V_ASM, "=r,=r,=r,=r,r,r,r", [even, odd, pair],
                                               dtype=(gl.int32, gl.int32, gl.int32, gl.int32), is_pure=True, pack=1)
    beta0 = gl.join(unpack_bf16x2(r0), unpack_bf16x2(r1))  # [4 w, 8 g, 8 pp, par, nib]
    beta1 = gl.join(unpack_bf16x2(r2), unpack_bf16x2(r3))
    v = gl.reshape(gl.join(beta0, beta1), [4, 8, 2, 4, 2, 2, 2])  # [w, g, q, c, par, nib, beta]
    # m = 64 beta + 16 w + 8 nib + g, k = 8 q + 2 c + par
    v = gl.reshape(gl.permute(v, [6, 0, 5, 1, 2, 3, 4]), [DIMS, 16])
    return gl.convert_layout(v, A_BF16)


@gluon.jit
def _query(q_ptr, qhi_smem, qlo_smem, Q_TERMS: gl.constexpr):
    """Q [16, 128] bf16 -> x 2**qshift (max |Q| in [128, 256)) -> e4m3 hi (+ lo) in shared memory as [4 g, 16, 32]
    (column k of group g = dim 32 g + qk_dim(k)); returns qshift."""
    QL: gl.constexpr = gl.BlockedLayout([1, 8], [4, 8], [4, 1], [1, 0])
    h = gl.arange(0, HEADS, layout=gl.SliceLayout(1, QL))
    d = gl.arange(0, DIMS, layout=gl.SliceLayout(0, QL))
    q = gl.load(q_ptr + h[:, None] * DIMS + d[None, :]).to(gl.float32)
    amax = gl.max(gl.max(gl.abs(q), axis=1), axis=0)
    qshift = 7 - (((amax.to(gl.int32, bitcast=True) >> 23) & 0xFF) - 127)
    q = q * ((qshift + 127) << 23).to(gl.float32, bitcast=True)  # x 2**qshift
    # [16, 4 g, 4 c, 4 i, 2 par] -> [4 g, 16, 2 par, 4 c, 4 i]: column k = 16 par + 4 c + i = dim 32 g + 8 c + 2 i + par
    q = gl.reshape(gl.permute(gl.reshape(q, [16, 4, 4, 4, 2]), [1, 0, 4, 2, 3]), [4 * HEADS, 32])
    hi = q.to(gl.float8e4nv)
    qhi_smem.store(hi)
    if Q_TERMS == 2:
        qlo_smem.store((q - hi.to(gl.float32)).to(gl.float8e4nv))
    fence_async_shared()
    return qshift


@gluon.jit
def wgmma_probe_kernel(q_ptr, k_ptr, v_ptr, tables_ptr, out_ptr, pages, scale_log2e,
                       K_SOURCE: gl.constexpr, Q_TERMS: gl.constexpr, STAGES: gl.constexpr):
    """Program p: Q rows q[p] [16, 128] bf16 against pages tables[p, :pages] (folded ids into the [pages, 8704 B]
    K / V caches, read as int32 words) -> out[p] [16, 128] bf16."""
    pid = gl.program_id(0)
    k_codes = gl.allocate_shared_memory(gl.int32, [STAGES, TOKENS, CODE_WORDS], RING_CODES)
    k_scales = gl.allocate_shared_memory(gl.int32, [STAGES, TOKENS], RING_SCALES)
    v_codes = gl.allocate_shared_memory(gl.int32, [STAGES, TOKENS, CODE_WORDS], RING_CODES)
    v_scales = gl.allocate_shared_memory(gl.int32, [STAGES, TOKENS], RING_SCALES)
    qhi_smem = gl.allocate_shared_memory(gl.float8e4nv, [4 * HEADS, 32], Q_SMEM)
    qlo_smem = gl.allocate_shared_memory(gl.float8e4nv, [4 * HEADS, 32], Q_SMEM)
    pt_smem = gl.allocate_shared_memory(gl.bfloat16, [TOKENS, HEADS], P_SMEM)
    if K_SOURCE == K_SHARED:
        k_smem = gl.allocate_shared_memory(gl.float8e4nv, [4 * TOKENS, 32], K_SMEM)
    table = tables_ptr + pid.to(gl.int64) * pages
    context = pages * TOKENS
    for s in gl.static_range(STAGES - 1):
        _issue_page(k_ptr, v_ptr, gl.load(table + gl.minimum(s, pages - 1)), context, s, pages, s,
                    k_codes, k_scales, v_codes, v_scales)
        gl.nvidia.ampere.async_copy.commit_group()
    qshift = _query(q_ptr + pid.to(gl.int64) * HEADS * DIMS, qhi_smem, qlo_smem, Q_TERMS)
    exp_bias = 6 - qshift  # c_g = 2**(e - 127 + 6 - qshift)
    ROWS: gl.constexpr = gl.SliceLayout(1, ACC8)
    m_i = gl.full([HEADS], float("-inf"), gl.float32, gl.SliceLayout(0, ACC8))
    l_t = gl.zeros([TOKENS, HEADS], gl.float32, ACC8)
    o_t = gl.zeros([DIMS, HEADS], gl.float32, ACC)
    zero = gl.zeros([TOKENS, HEADS], gl.float32, ACC8)
    for i in range(pages):
        slot = i % STAGES
        gl.nvidia.ampere.async_copy.wait_group(STAGES - 2)
        cta_barrier()
        nxt = i + STAGES - 1
        _issue_page(k_ptr, v_ptr, gl.load(table + gl.minimum(nxt, pages - 1)), context, nxt, pages, nxt % STAGES,
                    k_codes, k_scales, v_codes, v_scales)
        gl.nvidia.ampere.async_copy.commit_group()
        k0 = _k_group(k_codes, slot, 0)
        k1 = _k_group(k_codes, slot, 1)
        k2 = _k_group(k_codes, slot, 2)
        k3 = _k_group(k_codes, slot, 3)
        if K_SOURCE == K_SHARED:
            k_smem.slice(0, 128).store(k0)
            k_smem.slice(128, 128).store(k1)
            k_smem.slice(256, 128).store(k2)
            k_smem.slice(384, 128).store(k3)
            fence_async_shared()
            cta_barrier()
            a0 = k_smem.slice(0, 128)
            a1 = k_smem.slice(128, 128)
            a2 = k_smem.slice(256, 128)
            a3 = k_smem.slice(384, 128)
        else:
            a0 = k0
            a1 = k1
            a2 = k2
            a3 = k3
        s0 = warpgroup_mma(a0, qhi_smem.slice(0, 16).permute((1, 0)), zero, is_async=True)
        s1 = warpgroup_mma(a1, qhi_smem.slice(16, 16).permute((1, 0)), zero, is_async=True)
        s2 = warpgroup_mma(a2, qhi_smem.slice(32, 16).permute((1, 0)), zero, is_async=True)
        s3 = warpgroup_mma(a3, qhi_smem.slice(48, 16).permute((1, 0)), zero, is_async=True)
        if Q_TERMS == 2:
            s0 = warpgroup_mma(a0, qlo_smem.slice(0, 16).permute((1, 0)), s0, is_async=True)
            s1 = warpgroup_mma(a1, qlo_smem.slice(16, 16).permute((1, 0)), s1, is_async=True)
            s2 = warpgroup_mma(a2, qlo_smem.slice(32, 16).permute((1, 0)), s2, is_async=True)
            s3 = warpgroup_mma(a3, qlo_smem.slice(48, 16).permute((1, 0)), s3, is_async=True)
        ks = k_scales.index(slot).load(ROWS)  # the token's 4 e8m0 bytes
        c0 = ((((ks >> 0) & 0xFF) + exp_bias) << 23).to(gl.float32, bitcast=True)
        c1 = ((((ks >> 8) & 0xFF) + exp_bias) << 23).to(gl.float32, bitcast=True)
        c2 = ((((ks >> 16) & 0xFF) + exp_bias) << 23).to(gl.float32, bitcast=True)
        c3 = ((((ks >> 24) & 0xFF) + exp_bias) << 23).to(gl.float32, bitcast=True)
        # the register A operands (k0..k3) cannot be deps here: triton 3.6 fails "Unexpected bitwidth in
        # WGMMAWaitGroupOp: 8" for e4m3 tensors; ptxas keeps in-flight wgmma registers live by itself
        s0, s1, s2, s3 = warpgroup_mma_wait(num_outstanding=0, deps=[s0, s1, s2, s3])
        s_t = (s0 * c0[:, None] + s1 * c1[:, None] + s2 * c2[:, None] + s3 * c3[:, None]) * scale_log2e
        m_new = gl.maximum(m_i, gl.max(s_t, axis=0))  # over the tokens: across the warpgroup
        alpha = gl.exp2(m_i - m_new)
        p_t = gl.exp2(s_t - m_new[None, :])
        l_t = l_t * alpha[None, :] + p_t
        pt_smem.store(p_t.to(gl.bfloat16))
        fence_async_shared()
        o_t = o_t * gl.convert_layout(alpha, gl.SliceLayout(0, ACC))[None, :]
        for c in gl.static_range(8):
            o_t = warpgroup_mma(_v_chunk(v_codes, v_scales, slot, c), pt_smem.slice(16 * c, 16, dim=0), o_t,
                                is_async=True)
        o_t = warpgroup_mma_wait(num_outstanding=0, deps=[o_t])
        m_i = m_new
    gl.nvidia.ampere.async_copy.wait_group(0)
    l_i = gl.sum(l_t, axis=0)
    o_t = o_t * gl.convert_layout(9.223372036854775808e18 / l_i, gl.SliceLayout(0, ACC))[None, :]  # 2**63 back
    m = gl.arange(0, DIMS, layout=gl.SliceLayout(1, ACC))
    dim = 32 * ((m >> 4) & 3) + 4 * (m & 7) + 2 * (m >> 6) + ((m >> 3) & 1)  # pv_dim(m)
    h = gl.arange(0, HEADS, layout=gl.SliceLayout(0, ACC))
    gl.store(out_ptr + pid.to(gl.int64) * HEADS * DIMS + h[None, :] * DIMS + dim[:, None], o_t.to(gl.bfloat16))
