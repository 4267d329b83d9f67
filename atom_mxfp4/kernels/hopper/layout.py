"""Every index map of the Hopper (sm_90, Gluon) pa_decode, as plain data and integer functions.

The kernel (``pa_decode.py`` and its helpers) builds its Gluon layouts and permutations from these constants; the
CPU tests (tests/test_hopper_layout.py) evaluate the same constants on the host against the DESIGN §4 record and
against the compiler's own linear layouts. Nothing here imports triton.

Record (DESIGN §4): per (page, head) 8704 B = ``[128 tokens x 64 B e2m1 codes][128 tokens x 4 B e8m0 scales]``; code
byte ``b`` of a token holds elements ``2b`` (low nibble) and ``2b + 1`` (high nibble); scale byte ``k`` covers
elements ``32k .. 32k + 31``. The kernel reads records as int32 words: 2176 words per record, codes in words
``16 t .. 16 t + 15`` of token ``t``, the token's 4 scale bytes in word ``2048 + t``.

Work split: one program = 4 warps per (row, KV split) (or 8: ``SMALL_BATCH_WARPS``; every map that depends on the
count is a function of it below, ``WARP_MAPS`` holds their values, the 4-warp ones keep their constant names); one
loop trip = one 128-token page; warp ``w`` owns tokens ``32 w .. 32 w + 31`` (8 warps: ``16 w .. 16 w + 15``) of the
page for both products and keeps its own online-softmax state (m, l, O) until the end of the program, where the warps
are merged. Tensors carry the warp as a leading batch dimension, so the MMA layout is
``NVMMADistributedLayout(version [2, 0], warps_per_cta [warps, 1, 1], instr_shape [1, 16, 8])``
(``mma.sync.m16n8k16`` bf16, fp32 accumulate). Per lane ``c = lane & 3``, ``g = lane >> 2``.

The K dimension of a product may be visited in any order, provided both operands use the same order:
- QK^T: K dimension = head dims. Operand row ``k`` of K^T (and column ``k`` of Q) is head dim ``qk_dim(k)``
  (``QK_DIM_BITS``): this lets lane ``c`` decode the 16 contiguous code bytes ``16 c .. 16 c + 15`` of its token
  (one 128-bit load, exactly scale block ``c``) straight into its B-operand registers.
- P.V: K dimension = tokens, in page order (P comes from the QK accumulator registers as they are). The N dimension
  (output columns) is permuted instead: output column ``n`` is head dim ``pv_dim(n)`` (``PV_DIM_BITS``), so lane
  ``g`` decodes the 8 contiguous code bytes ``8 g .. 8 g + 7`` (one 64-bit load, scale block ``g >> 1``) of its
  tokens; the output is un-permuted in registers before it is stored.
"""

from __future__ import annotations

from atom_mxfp4.layout import (DATA_BYTES, FP8_DATA_BYTES, FP8_RECORD_BYTES, FP8_SCALE_OFFSET,  # noqa: F401
                               HEAD_DIM, MAX_GROUP, PAGE_SIZE, RECORD_BYTES, SCALE_BYTES, SCALE_OFFSET)

WARPS = 4  # the default program: 4 warps, 32 tokens of each page per warp
SMALL_BATCH_WARPS = 8  # 8 warps x 16 tokens, for long programs one per SM (docs/hopper.md "8 warps per program")
PROGRAM_WARPS = (WARPS, SMALL_BATCH_WARPS)  # the warp counts every map below is written for
LANES = 32
THREADS = WARPS * LANES
TOKENS_PER_WARP = PAGE_SIZE // WARPS  # 32
BLOCK_H = MAX_GROUP  # query heads per program (the GQA group padded to 16 = the MMA's M)
WORD_BYTES = 4
RECORD_WORDS = RECORD_BYTES // WORD_BYTES  # 2176
CODE_WORDS = DATA_BYTES // WORD_BYTES  # 16 words of codes per token
SCALE_WORD = SCALE_OFFSET // WORD_BYTES  # 2048: the word index of token 0's 4 scale bytes

MMA_INSTR_SHAPE = [1, 16, 8]
K_WIDTH = 2  # bf16 operand elements per 32-bit register


def _log2(n: int) -> int:
    if n < 1 or n & (n - 1):
        raise ValueError(f"expected a power of two, got {n}")
    return n.bit_length() - 1


def tokens_per_warp(warps: int) -> int:
    """Tokens of each page one warp owns (warp ``w``: tokens ``w * tokens_per_warp .. + tokens_per_warp - 1``); the
    MMAs need at least 16 (P.V's k-step), so 4 or 8 warps."""
    if warps not in PROGRAM_WARPS:
        raise ValueError(f"warps: expected one of {PROGRAM_WARPS}, got {warps}")
    return PAGE_SIZE // warps


def mma_warps(warps: int = WARPS) -> list[int]:
    return [warps, 1, 1]


def _warp_bases(warps: int, rank: int) -> list[list[int]]:
    return [[1 << i] + [0] * (rank - 1) for i in range(_log2(warps))]


# ---- K: the words each lane loads (shared memory -> registers) ------------------------------------------------------
# tensor [w, n, c, j]: word j (0..3) of the 16-byte chunk c (0..3) of token tokens_per_warp x w + n; bytes 16 c + 4 j
def k_words_shape(warps: int = WARPS) -> list[int]:
    return [warps, tokens_per_warp(warps), 4, 4]


def k_words_bases(warps: int = WARPS) -> dict:
    """j first (one 128-bit load per token), c = lane & 3, n = g + 8 r (r: the 8-token groups of the warp's tokens)."""
    groups = [[0, 8 << i, 0, 0] for i in range(_log2(tokens_per_warp(warps) // 8))]
    return dict(reg_bases=[[0, 0, 0, 1], [0, 0, 0, 2]] + groups,
                lane_bases=[[0, 0, 1, 0], [0, 0, 2, 0], [0, 1, 0, 0], [0, 2, 0, 0], [0, 4, 0, 0]],
                warp_bases=_warp_bases(warps, 4), block_bases=[], shape=k_words_shape(warps))


# after the decode (4 bf16x2 outputs per word, see _decode.K_PAIR_OFFSETS) and the joins, the tensor is
# [w, n, c, j1, j0, b, m0, m1] (b: the element inside a bf16x2 register, m = m0 + 2 m1: which output of the word);
# this permutation and reshape make it the B operand K^T [w, k, n] with k = b + 2 c + 8 m0 + 16 m1 + 32 j
def k_chain_shape(warps: int = WARPS) -> list[int]:
    return [warps, tokens_per_warp(warps), 4, 2, 2, 2, 2, 2]


K_CHAIN_ORDER = [0, 3, 4, 7, 6, 2, 5, 1]
# head dim bit of each bit of the operand index k (bit i of k is bit QK_DIM_BITS[i] of the head dim):
# k0 = b -> d1, k1 k2 = c -> d5 d6, k3 = m0 -> d0, k4 = m1 -> d2, k5 k6 = j -> d3 d4
QK_DIM_BITS = (1, 5, 6, 0, 2, 3, 4)
# Q [16, 128] in head-dim order viewed as [16, d6, d5, ..., d0] (one axis per head-dim bit, most significant first),
# permuted to [16, k6, ..., k0] and flattened: column k holds head dim qk_dim(k) (the coalesced load of Q is relabelled
# in registers this way, then converted to the A operand once per program)
Q_BITS_SHAPE = [BLOCK_H] + [2] * 7
Q_BITS_ORDER = [0] + [1 + 6 - QK_DIM_BITS[j] for j in range(6, -1, -1)]


# ---- V: the words each lane loads ------------------------------------------------------------------------------------
# tensor [w, p, par, g, word]: word (0..1) of the 8-byte chunk g (0..7) of token tokens_per_warp x w + 2 p + par;
# bytes 8 g + 4 word
def v_words_shape(warps: int = WARPS) -> list[int]:
    return [warps, tokens_per_warp(warps) // 2, 2, 8, 2]


def v_words_bases(warps: int = WARPS) -> dict:
    """One 64-bit load per token; p = c (lane & 3) + 4 r: the m16n8k16 B fragment's rows 2 c, 2 c + 1 (+ 8), then
    one k-step of 16 tokens per further register bit; g = lane >> 2."""
    steps = [[0, 4 << i, 0, 0, 0] for i in range(_log2(tokens_per_warp(warps) // 8))]
    return dict(reg_bases=[[0, 0, 0, 0, 1], [0, 0, 1, 0, 0]] + steps,
                lane_bases=[[0, 1, 0, 0, 0], [0, 2, 0, 0, 0], [0, 0, 0, 1, 0], [0, 0, 0, 2, 0], [0, 0, 0, 4, 0]],
                warp_bases=_warp_bases(warps, 5), block_bases=[], shape=v_words_shape(warps))


# after splitting the token parity (even, odd words -> one decode call, outputs (even, odd) bf16x2 pairs per element,
# see _decode.V_PAIR_OFFSETS) and the joins: [w, p, g, word, par, nib, beta0, beta1] (element 2 beta + nib of the word);
# this permutation and reshape make it the B operand V [w, k, n] with k = 2 p + par (token in the warp's tokens) and
# n = g + 8 (nib + 2 beta0 + 4 beta1 + 8 word)
V_PARITY_LAST = [0, 1, 3, 4, 2]  # [w, p, par, g, word] -> [w, p, g, word, par]: split into even / odd token words


def v_chain_shape(warps: int = WARPS) -> list[int]:
    return [warps, tokens_per_warp(warps) // 2, 8, 2, 2, 2, 2, 2]


V_CHAIN_ORDER = [0, 1, 4, 3, 7, 6, 5, 2]
# head dim bit of each bit of the output column n: n0 n1 n2 = g -> d4 d5 d6; n3..n6 = the element of the 8-byte
# chunk -> d0..d3, i.e. pv_dim(n) = 16 (n & 7) + (n >> 3)
PV_DIM_BITS = (4, 5, 6, 0, 1, 2, 3)


# each warp's output accumulator columns n (head dim pv_dim(n)) back in head-dim order, in registers before the warps
# combine: [w, 16, 128] viewed as [w, 16, n >> 3, n & 7], permuted to [w, 16, n & 7, n >> 3] and flattened is index
# 16 (n & 7) + (n >> 3) = pv_dim(n)
def out_columns_shape(warps: int = WARPS) -> list[int]:
    return [warps, BLOCK_H, 16, 8]


OUT_COLUMNS_ORDER = [0, 1, 3, 2]

# every map above per program warp count, as plain data (the kernel's constexpr functions read them: a Gluon
# constexpr function may only call other Gluon functions, not these)
WARP_MAPS = {warps: dict(tokens_per_warp=tokens_per_warp(warps), mma_warps=mma_warps(warps),
                         k_words_shape=k_words_shape(warps), k_words_bases=k_words_bases(warps),
                         k_chain_shape=k_chain_shape(warps), v_words_shape=v_words_shape(warps),
                         v_words_bases=v_words_bases(warps), v_chain_shape=v_chain_shape(warps),
                         out_columns_shape=out_columns_shape(warps))
             for warps in PROGRAM_WARPS}
# the 4-warp program's maps by name (tests and tools read these)
MMA_WARPS = mma_warps(WARPS)
K_WORDS_SHAPE = k_words_shape(WARPS)
K_WORDS_BASES = k_words_bases(WARPS)
K_CHAIN_SHAPE = k_chain_shape(WARPS)
V_WORDS_SHAPE = v_words_shape(WARPS)
V_WORDS_BASES = v_words_bases(WARPS)
V_CHAIN_SHAPE = v_chain_shape(WARPS)
OUT_COLUMNS_SHAPE = out_columns_shape(WARPS)

# ---- the one-multiply decode ("window"; docs/hopper.md "One multiply per pair") --------------------------------------
# The exact decode multiplies each placed pair (e2m1 x 2**-126) by 2**126 and by the scale 2**(e - 127). The window
# decode multiplies once, by 2**(e - 127 + 126 - WINDOW_SHIFT) = 2**(e - 64): the decoded K and V are the exact values
# x 2**-WINDOW_SHIFT, and Q and P are scaled by 2**WINDOW_SHIFT (exactly), so every product of both MMAs, hence every
# logit and output bit, equals the exact decode's. That holds while the one constant stays a normal bf16 and the
# decoded values stay normal: scale bytes in [WINDOW_LOW, WINDOW_HIGH] (block scales 2**-62 .. 2**64), plus 0 (the
# zero-filled tokens past the context: code 0 decodes to +0 under any scale), and |q| < WINDOW_QUERY_MAX. A program that
# sees anything else (any byte of a page's scale words it streams, any query element) redoes its pages with the exact
# decode, so every input gives the same answer.
WINDOW_SHIFT = 63
WINDOW_LOW = 65  # 0.5 x 2**(65 - 190) = 2**-126: the smallest decoded magnitude is a normal bf16
WINDOW_HIGH = 191  # 2**(191 - 64) = 2**127: the largest scale constant that is a bf16
WINDOW_PAIR_BIAS = (WINDOW_SHIFT << 7) | (WINDOW_SHIFT << 23)  # added to (e << 7 | e << 23): bf16x2 2**(e - 64)
WINDOW_QUERY_MAX = 2.0 ** 64  # |q| x 2**63 < 2**127: no bf16 overflow
BF16X2_WINDOW = ((WINDOW_SHIFT + 127) << 7) * 0x10001  # bf16x2 (2**63, 2**63)


def window_miss(byte: int) -> bool:
    """Whether the one-multiply decode cannot take this scale byte (what _decode.window_misses flags)."""
    return byte != 0 and not WINDOW_LOW <= byte <= WINDOW_HIGH


# ---- the O rescale (_loop._attend_page / _rescale; docs/hopper.md "Rescaling O only when the maximum moves") --------
# A warp's running maximum of a head moves only when a page's maximum passes it by more than RESCALE_SLACK (log2
# units), so the softmax weights 2**(logit - m) stay <= 2**RESCALE_SLACK (bf16 P and its window multiply hold them
# exactly) and on most pages no factor differs from 1: a warp whose factors are all 1 skips the 64 multiplies.
RESCALE_SLACK = 8


# ---- shared memory ring and the global -> shared copies --------------------------------------------------------------
# per stage: K codes [128, 16] + K scales [128] + V codes [128, 16] + V scales [128] int32 words = 17408 B
STAGE_BYTES = 2 * RECORD_BYTES
COPY_CODE_VEC = 4  # words per cp.async of codes (16 B)


def permute_bits(index: int, bits: tuple[int, ...]) -> int:
    """The index whose bit ``bits[i]`` is bit ``i`` of ``index``."""
    return sum(((index >> i) & 1) << b for i, b in enumerate(bits))


def qk_dim(k: int) -> int:
    """Head dim of row ``k`` of the K^T operand (and of column ``k`` of the Q operand)."""
    return permute_bits(k, QK_DIM_BITS)


def pv_dim(n: int) -> int:
    """Head dim of column ``n`` of the V operand and of the output accumulator."""
    return permute_bits(n, PV_DIM_BITS)


def linear_layout_apply(bases: dict, reg: int, lane: int, warp: int) -> tuple[int, ...]:
    """Evaluate a linear layout (``reg_bases`` / ``lane_bases`` / ``warp_bases`` as in gl.DistributedLinearLayout) at
    one (register, lane, warp): the XOR of the bases of the set bits (out-of-range bits are broadcasts)."""
    out = [0] * len(bases["shape"])
    for key, value in (("reg_bases", reg), ("lane_bases", lane), ("warp_bases", warp)):
        for i, basis in enumerate(bases[key]):
            if (value >> i) & 1:
                out = [o ^ b for o, b in zip(out, basis)]
    return tuple(out)


def k_word_offset(w: int, n: int, c: int, j: int, warps: int = WARPS) -> int:
    """Word offset in the record of element [w, n, c, j] of the K words tensor."""
    return (tokens_per_warp(warps) * w + n) * CODE_WORDS + 4 * c + j


def v_word_offset(w: int, p: int, par: int, g: int, word: int, warps: int = WARPS) -> int:
    """Word offset in the record of element [w, p, par, g, word] of the V words tensor."""
    return (tokens_per_warp(warps) * w + 2 * p + par) * CODE_WORDS + 2 * g + word


# ---- index_topk: the fp8 index-K scorer (index_topk.py) -------------------------------------------------------------
# Record (atom_mxfp4.index_k): per page 16896 B = [128 tokens x 128 B e4m3][128 tokens x 4 B e8m0], read as int32
# words: token t's codes in words 32 t .. 32 t + 31, its 4 scale bytes (one per 32 channels) in word 4096 + t.
# Work split: one program = 4 warps per (row, chunk of blocks); one loop trip = one 128-token page; warp w owns tokens
# 32 w .. 32 w + 31 and computes their scores as the A operand of mma.m16n8k16 (M = tokens: 2 m-tiles per warp, N =
# the index heads padded to 8, K = channels), one MMA chain per 32-channel block so that each partial score is
# multiplied by its token's block scale in fp32 (as the Triton scorer: _fp8.fp8_scores).
IDX_HEADS = 8  # index heads per program (the MMA's N); more heads: the Triton scorer
FP8_RECORD_WORDS = FP8_RECORD_BYTES // WORD_BYTES  # 4224
FP8_CODE_WORDS = FP8_DATA_BYTES // WORD_BYTES  # 32 words of e4m3 codes per token
FP8_SCALE_WORD = FP8_SCALE_OFFSET // WORD_BYTES  # 4096: the word of token 0's 4 scale bytes
# tensor [w, n, beta, c, sigma]: word sigma (0..1) of the 8-byte chunk c (0..3) of the 32-channel block beta (0..3)
# of token 32 w + n; bytes 32 beta + 8 c + 4 sigma .. + 3 (one 64-bit load per (token, block))
IDX_WORDS_SHAPE = [WARPS, TOKENS_PER_WARP, 4, 4, 2]
IDX_WORDS_BASES = dict(
    reg_bases=[[0, 0, 0, 0, 1], [0, 0, 1, 0, 0], [0, 0, 2, 0, 0], [0, 8, 0, 0, 0], [0, 16, 0, 0, 0]],
    lane_bases=[[0, 0, 0, 1, 0], [0, 0, 0, 2, 0], [0, 1, 0, 0, 0], [0, 2, 0, 0, 0], [0, 4, 0, 0, 0]],
    warp_bases=[[1, 0, 0, 0, 0], [2, 0, 0, 0, 0]],
    block_bases=[],
    shape=IDX_WORDS_SHAPE,
)
# A word's 4 bytes decode to two bf16x2 registers (h = 0: bytes 0, 1; h = 1: bytes 2, 3; element b = the byte's
# parity); joined, the tensor is [w, n, beta, c, sigma, b, h]. Per block beta the A operand [w, 32 tokens, 32] has
# column kk = b + 2 c + 8 h + 16 sigma (lane c = lane & 3 holds columns 2 c, 2 c + 1, 2 c + 8, 2 c + 9 of each k-step,
# as the m16n8k16 A fragment wants), i.e. channel 32 beta + idx_channel(kk):
IDX_BLOCK_SPLIT_SHAPE = [WARPS, TOKENS_PER_WARP, 2, 2, 4, 2, 2, 2]  # [w, n, beta1, beta0, c, sigma, b, h]
IDX_BLOCK_SPLIT_ORDER = [0, 1, 4, 5, 6, 7, 2, 3]  # -> [w, n, c, sigma, b, h, beta1, beta0]: split beta0, then beta1
IDX_A_ORDER = [0, 1, 3, 5, 2, 4]  # [w, n, c, sigma, b, h] -> [w, n, sigma, h, c, b]: flattened, column kk
IDX_KK_BITS = (0, 3, 4, 1, 2)  # channel bit of each bit of kk: b -> 0, c -> 3 4, h -> 1, sigma -> 2


def idx_channel(kk: int) -> int:
    """Channel (inside its 32-channel block) of column ``kk`` of an index scorer A operand block (and row of q's)."""
    return permute_bits(kk, IDX_KK_BITS)


def idx_word_offset(w: int, n: int, beta: int, c: int, sigma: int) -> int:
    """Word offset in the fp8 record of element [w, n, beta, c, sigma] of the index scorer's words tensor."""
    return (TOKENS_PER_WARP * w + n) * FP8_CODE_WORDS + 8 * beta + 2 * c + sigma
