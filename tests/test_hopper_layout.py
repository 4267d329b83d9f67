"""The Hopper (Gluon, sm_90) pa_decode's index maps, evaluated on the host against the DESIGN §4 record.

``atom_mxfp4/kernels/hopper/layout.py`` holds every map the kernel builds its layouts from (the words each lane loads,
the relabelling of the decode outputs into MMA operands, the head-dim order of both products);
``atom_mxfp4/kernels/hopper/_decode.py`` holds the PTX. Here, without a GPU:
- the load layouts are evaluated lane by lane: which record words each (warp, lane, register) reads, vector widths,
  coverage, shared-memory wavefronts;
- the decode is run as the kernel runs it: the shipped PTX text through the numpy PTX interpreter of tests/_helpers.py,
  then the same joins / permutations / reshapes (numpy), giving the K^T and V operand tensors, compared bit for bit
  with ``format.dequantize_mxfp4`` of the record at (token, ``qk_dim(k)``) / (token, ``pv_dim(n)``);
- the operand lane map: the compiler's own linear layout of each MMA operand (Triton's Gluon builder, on the host)
  says which (warp, lane, register) holds which operand element; composed with the maps above it names the (token,
  head dim) every register holds, checked against the mma.m16n8k16 fragment of the PTX ISA and against the record,
  and the provenance of every register (the thread that loaded its word, one bf16x2 output of the decode) is traced;
- the whole per-page dataflow (Q in qk_dim order, warp-local online softmax, warp merge, column un-permutation) is
  emulated over the operands and compared with the fp64 oracle, tokens past the context zero-filled as cp.async does;
- deliberately wrong maps are caught.
What is not checked here: that the compiled kernel does this (tests/test_hopper_compile.py checks the compile, the
``assert_trivial`` layout conversions and the instruction mix; tests/gpu/test_hopper_gpu.py the numbers on a GPU).
"""

from __future__ import annotations

import importlib
import itertools
import math
from functools import partial

import numpy as np
import pytest
import torch

pytest.importorskip("triton.experimental.gluon", reason="needs triton >= 3.6 (Gluon)")

from atom_mxfp4.format import dequantize_mxfp4
from atom_mxfp4.kernels.hopper import _decode as D
from atom_mxfp4.kernels.hopper import layout as L
from atom_mxfp4.layout import data_view, scale_view

import _helpers as H

K_ASM = str(D.K_DECODE_ASM.value)
V_ASM = str(D.V_DECODE_ASM.value)
K_FAST_ASM = str(D.K_FAST_ASM.value)
V_FAST_ASM = str(D.V_FAST_ASM.value)
P_WINDOW_ASM = str(D.P_WINDOW_ASM.value)
WINDOW = 2.0 ** L.WINDOW_SHIFT
WARPS = pytest.mark.parametrize("warps", L.PROGRAM_WARPS)  # every map is checked for both programs


def operand_regs(warps: int) -> int:
    """bf16 elements of each B operand per lane: 128 (4 warps), 64 (8)."""
    return L.HEAD_DIM * L.tokens_per_warp(warps) // L.LANES


def load_regs(warps: int) -> int:
    """Words of each page record per thread: 16 (4 warps), 8 (8)."""
    return L.PAGE_SIZE * L.CODE_WORDS // (warps * L.LANES)


# ---- the record and its reference values -----------------------------------------------------------------------------
def random_record(gen: torch.Generator, lo: int = 1, hi: int = 254) -> np.ndarray:
    """One [8704] uint8 record: every code byte random, scale bytes in [lo, hi]."""
    record = torch.randint(0, 256, (L.RECORD_BYTES,), generator=gen, dtype=torch.int32).to(torch.uint8)
    record[L.SCALE_OFFSET:] = torch.randint(lo, hi + 1, (L.PAGE_SIZE * L.SCALE_BYTES,), generator=gen,
                                            dtype=torch.int32).to(torch.uint8)
    return record.numpy()


def reference_bits(record: np.ndarray) -> np.ndarray:
    """bf16 bits [128 tokens, 128 head dims] of the record, through the DESIGN §4 views and the codec."""
    records = torch.from_numpy(record).view(1, 1, L.RECORD_BYTES)
    values = dequantize_mxfp4(data_view(records)[0, 0], scale_view(records)[0, 0], torch.bfloat16)
    return values.view(torch.int16).numpy().astype(np.uint16)


def words_of(record: np.ndarray) -> np.ndarray:
    """The record as the kernel reads it: 2176 little-endian int32 words (as uint64 for the PTX interpreter)."""
    return record.view(np.uint32).astype(np.uint64)


def unpack(register: np.ndarray) -> np.ndarray:
    """bf16x2 register -> [..., 2] (element 0 = low half), as _decode.unpack_bf16x2."""
    return np.stack([register & 0xFFFF, register >> 16], axis=-1)


# ---- the kernel's dataflow, in numpy ---------------------------------------------------------------------------------
def k_inputs(words: np.ndarray, fast: bool = False, warps: int = L.WARPS):
    """(words [w, 128 / w, 4, 4], (s, s) bf16x2 scale pairs) as _attend_page builds them (fast: the window pairs)."""
    w, n, c, j = np.indices(L.k_words_shape(warps))
    k_words = words[L.k_word_offset(w, n, c, j, warps)]
    scale_words = words[L.SCALE_WORD + L.tokens_per_warp(warps) * w + n]
    e = (scale_words >> (8 * c).astype(np.uint64)) & 0xFF
    return k_words, ((e << 7) | (e << 23)) + (L.WINDOW_PAIR_BIAS if fast else 0)


def k_chain(outputs: list[np.ndarray]) -> np.ndarray:
    """The 4 decode outputs (bf16x2 [w, 128 / w, 4, 4], or any per-register ids) -> K^T [w, 128, 128 / w], as
    decode_k_operand."""
    warps = outputs[0].shape[0]
    halves = [unpack(x) for x in outputs]
    pairs = np.stack([np.stack(halves[0:2], axis=-1), np.stack(halves[2:4], axis=-1)], axis=-1)
    return pairs.reshape(L.k_chain_shape(warps)).transpose(L.K_CHAIN_ORDER).reshape(
        warps, L.HEAD_DIM, L.tokens_per_warp(warps))


def k_operand(record: np.ndarray, asm: str = K_ASM, warps: int = L.WARPS) -> np.ndarray:
    k_words, pair = k_inputs(words_of(record), asm == K_FAST_ASM, warps)
    regs = H.run_ptx(asm, {"$4": k_words, "$5": pair, **{f"${i}": 0 * k_words for i in range(4)}})
    return k_chain([regs[f"${i}"] for i in range(4)])


def v_inputs(words: np.ndarray, fast: bool = False, warps: int = L.WARPS):
    """(even words, odd words [w, 64 / w, 8, 2], (even, odd) bf16x2 scale pairs) as _attend_page builds them (fast:
    the window pairs)."""
    tokens = L.tokens_per_warp(warps)
    w, p, par, g, word = np.indices(L.v_words_shape(warps))
    v_words = words[L.v_word_offset(w, p, par, g, word, warps)].transpose(L.V_PARITY_LAST)
    even, odd = v_words[..., 0], v_words[..., 1]
    w, p, g, par = np.indices([warps, tokens // 2, 8, 2])
    scale_words = words[L.SCALE_WORD + tokens * w + 2 * p + par]
    e = (scale_words >> (8 * (g >> 1)).astype(np.uint64)) & 0xFF
    pair = ((e[..., 0] << 7) | (e[..., 1] << 23)) + (L.WINDOW_PAIR_BIAS if fast else 0)
    return even, odd, np.broadcast_to(pair[..., None], even.shape).copy()


def v_chain(outputs: list[np.ndarray]) -> np.ndarray:
    """The 8 decode outputs ([w, 64 / w, 8, 2] each) -> V [w, 128 / w, 128], as decode_v_operand."""
    warps = outputs[0].shape[0]
    halves = [unpack(x) for x in outputs]
    beta = [np.stack(halves[2 * b:2 * b + 2], axis=-1) for b in range(4)]
    pairs = np.stack([np.stack(beta[0:2], axis=-1), np.stack(beta[2:4], axis=-1)], axis=-1)
    return pairs.reshape(L.v_chain_shape(warps)).transpose(L.V_CHAIN_ORDER).reshape(
        warps, L.tokens_per_warp(warps), L.HEAD_DIM)


def v_operand(record: np.ndarray, asm: str = V_ASM, warps: int = L.WARPS) -> np.ndarray:
    even, odd, pair = v_inputs(words_of(record), asm == V_FAST_ASM, warps)
    regs = H.run_ptx(asm, {"$8": even, "$9": odd, "$10": pair, **{f"${i}": 0 * even for i in range(8)}})
    return v_chain([regs[f"${i}"] for i in range(8)])


def qk_dims() -> np.ndarray:
    return np.array([L.qk_dim(k) for k in range(L.HEAD_DIM)])


def pv_dims() -> np.ndarray:
    return np.array([L.pv_dim(n) for n in range(L.HEAD_DIM)])


def k_mismatches(record: np.ndarray, kt: np.ndarray) -> int:
    """Elements of K^T [w, k, n] that are not the record's value at (token (128 / w) w + n, head dim qk_dim(k))."""
    ref = reference_bits(record)
    w, k, n = np.indices(kt.shape)
    return int((kt != ref[kt.shape[2] * w + n, qk_dims()[k]]).sum())


def v_mismatches(record: np.ndarray, v: np.ndarray) -> int:
    """Elements of V [w, k, n] that are not the record's value at (token (128 / w) w + k, head dim pv_dim(n))."""
    ref = reference_bits(record)
    w, k, n = np.indices(v.shape)
    return int((v != ref[v.shape[1] * w + k, pv_dims()[n]]).sum())


@pytest.fixture(scope="module")
def record():
    return random_record(torch.Generator().manual_seed(14))


# ---- constants and the pure maps ------------------------------------------------------------------------------------
def test_constants_are_design_section_4():
    assert (L.PAGE_SIZE, L.HEAD_DIM, L.DATA_BYTES, L.SCALE_BYTES, L.RECORD_BYTES) == (128, 128, 64, 4, 8704)
    assert L.RECORD_WORDS * 4 == L.RECORD_BYTES and L.SCALE_WORD * 4 == L.SCALE_OFFSET == 128 * 64
    assert L.WARPS * L.TOKENS_PER_WARP == L.PAGE_SIZE and L.STAGE_BYTES == 2 * L.RECORD_BYTES
    assert all(w * L.tokens_per_warp(w) == L.PAGE_SIZE and L.tokens_per_warp(w) >= 16 for w in L.PROGRAM_WARPS)
    for w in L.PROGRAM_WARPS:  # the kernel's constexpr maps are the functions' values
        assert L.WARP_MAPS[w]["k_words_bases"] == L.k_words_bases(w) and L.WARP_MAPS[w]["mma_warps"] == [w, 1, 1]
    with pytest.raises(ValueError, match="warps"):
        L.tokens_per_warp(16)


@WARPS
def test_dim_orders_are_permutations_and_out_columns_undo_pv_dim(warps):
    assert sorted(qk_dims()) == list(range(128)) and sorted(pv_dims()) == list(range(128))
    assert all(L.pv_dim(n) == 16 * (n & 7) + (n >> 3) for n in range(128))
    columns = np.arange(warps * L.BLOCK_H * L.HEAD_DIM).reshape(warps, L.BLOCK_H, L.HEAD_DIM)  # [w, head, n]
    restored = columns.reshape(L.out_columns_shape(warps)).transpose(L.OUT_COLUMNS_ORDER).reshape(columns.shape)
    assert np.array_equal(restored[:, :, pv_dims()], columns)  # restored[w, :, d] is column n with pv_dim(n) = d


# ---- the loads: which words each lane reads ------------------------------------------------------------------------
def _load_map(bases, offset_of, regs, warps=L.WARPS):
    """{(warp, lane): [word offsets by register]} of a load layout."""
    return {(warp, lane): [offset_of(*L.linear_layout_apply(bases, reg, lane, warp)) for reg in range(regs)]
            for warp in range(warps) for lane in range(L.LANES)}


@WARPS
def test_k_loads_are_128_bit_chunks_of_the_lanes_scale_block_covering_the_page_once(warps):
    loads = _load_map(L.k_words_bases(warps), partial(L.k_word_offset, warps=warps), load_regs(warps), warps)
    everything = sorted(o for offsets in loads.values() for o in offsets)
    assert everything == list(range(L.PAGE_SIZE * L.CODE_WORDS))  # every code word of the page, once
    for (warp, lane), offsets in loads.items():
        for vector in range(load_regs(warps) // 4):  # registers 4v .. 4v+3: one token, 4 consecutive aligned words
            chunk = offsets[4 * vector:4 * vector + 4]
            assert chunk == list(range(chunk[0], chunk[0] + 4)) and chunk[0] % 4 == 0
            token, byte = divmod(4 * chunk[0], L.DATA_BYTES)
            assert token // L.tokens_per_warp(warps) == warp and token % 8 == lane >> 2
            assert byte == 16 * (lane & 3)  # lane c holds code bytes 16c..16c+15: head dims of scale block c


@WARPS
def test_v_loads_are_64_bit_chunks_covering_the_page_once(warps):
    loads = _load_map(L.v_words_bases(warps), partial(L.v_word_offset, warps=warps), load_regs(warps), warps)
    everything = sorted(o for offsets in loads.values() for o in offsets)
    assert everything == list(range(L.PAGE_SIZE * L.CODE_WORDS))
    for (warp, lane), offsets in loads.items():
        for vector in range(load_regs(warps) // 2):
            pair = offsets[2 * vector:2 * vector + 2]
            assert pair == [pair[0], pair[0] + 1] and pair[0] % 2 == 0
            token, byte = divmod(4 * pair[0], L.DATA_BYTES)
            assert token // L.tokens_per_warp(warps) == warp and byte == 8 * (lane >> 2)  # lane g: bytes 8g..8g+7


def _wavefronts(byte_addresses, width):
    """Shared-memory wavefronts of one warp-wide load of ``width`` bytes per lane (32 banks x 4 B)."""
    words = {a // 4 + i for a in byte_addresses for i in range(width // 4)}
    per_bank = {}
    for word in words:
        per_bank.setdefault(word % 32, set()).add(word)
    return max(len(v) for v in per_bank.values())


@WARPS
def test_shared_memory_wavefronts_of_the_operand_loads(warps):
    """K: the minimum (4 wavefronts for 512 B); V: 4 where 2 would do (4 tokens 128 B apart per load), a cost noted
    in docs/hopper.md (a token permutation inside the warp's 32 would remove it)."""
    for regs, width, bases, offset_of, expected in (
            (range(0, load_regs(warps), 4), 16, L.k_words_bases(warps), L.k_word_offset, 4),
            (range(0, load_regs(warps), 2), 8, L.v_words_bases(warps), L.v_word_offset, 4)):
        for reg in regs:
            addresses = [4 * offset_of(*L.linear_layout_apply(bases, reg, lane, 0), warps=warps)
                         for lane in range(L.LANES)]
            assert _wavefronts(addresses, width) == expected


# ---- the decode into operands, bit for bit --------------------------------------------------------------------------
@WARPS
def test_k_operand_holds_the_record_in_qk_dim_order(record, warps):
    assert k_mismatches(record, k_operand(record, warps=warps)) == 0


@WARPS
def test_v_operand_holds_the_record_in_pv_dim_order(record, warps):
    assert v_mismatches(record, v_operand(record, warps=warps)) == 0


def test_every_code_byte_and_scale_byte_through_the_operands():
    """Pages whose 8192 code bytes are 32 permutations of 0..255 and whose scale bytes sweep 1..254 (each in every
    block position over the pages)."""
    gen = torch.Generator().manual_seed(3)
    for page in range(4):
        record = random_record(gen)
        record[:L.SCALE_OFFSET] = torch.stack([torch.randperm(256, generator=gen) for _ in range(32)]).flatten().numpy()
        record[L.SCALE_OFFSET:] = (np.arange(512) + 128 * page) % 254 + 1
        assert k_mismatches(record, k_operand(record)) == 0
        assert v_mismatches(record, v_operand(record)) == 0


def test_zero_filled_tokens_decode_to_zero():
    """cp.async zero-fills the bytes of tokens past the context (code 0, scale byte 0): they must decode to +0."""
    record = np.zeros(L.RECORD_BYTES, np.uint8)
    assert not k_operand(record).any() and not v_operand(record).any()


# ---- the one-multiply decode ("window") ------------------------------------------------------------------------------
def window_misses(words: np.ndarray) -> np.ndarray:
    """numpy twin of _decode.window_misses (uint32 arithmetic): bit 7 of each byte set where the byte is outside."""
    x = words.astype(np.uint64) & 0xFFFFFFFF
    high = x & (x << 1)
    borrow = ((x | 0x80808080) - 0x01010101) & 0xFFFFFFFF
    low = ~x & borrow & ~(borrow << 1)
    return (high | low) & 0x80808080


def test_window_check_flags_exactly_the_bytes_the_one_multiply_decode_cannot_take():
    """Every byte value in every byte position of a word, beside random neighbours: flagged iff layout.window_miss."""
    rng = np.random.default_rng(5)
    for position in range(4):
        for byte in range(256):
            parts = rng.integers(0, 256, (64, 4)).astype(np.uint64)
            parts[:, position] = byte
            words = sum(parts[:, i] << (8 * i) for i in range(4))
            flagged = (window_misses(words) >> (8 * position + 7)) & 1
            assert (flagged == L.window_miss(byte)).all(), (position, byte)
    assert [b for b in range(256) if not L.window_miss(b)] == [0] + list(range(L.WINDOW_LOW, L.WINDOW_HIGH + 1))


def test_window_bounds_are_where_one_multiply_stays_exact():
    """The scale constant 2**(e - 64) is a finite bf16 up to WINDOW_HIGH and not one past it; the smallest decoded
    magnitude (code 1: 0.5 x 2**(e - 190)) is a normal bf16 from WINDOW_LOW and subnormal below it."""
    exponent_field = lambda e: (e + L.WINDOW_SHIFT)  # noqa: E731  bf16 exponent field of 2**(e - 64)
    assert exponent_field(L.WINDOW_HIGH) == 254 and exponent_field(L.WINDOW_HIGH + 1) == 255
    smallest = lambda e: 0.5 * 2.0 ** (e - 127 - L.WINDOW_SHIFT)  # noqa: E731
    assert smallest(L.WINDOW_LOW) == 2.0 ** -126 and smallest(L.WINDOW_LOW - 1) < 2.0 ** -126
    assert (L.WINDOW_PAIR_BIAS, L.BF16X2_WINDOW) == ((63 << 7) | (63 << 23), 0x5F005F00)
    assert 2.0 ** L.WINDOW_SHIFT * L.WINDOW_QUERY_MAX <= 2.0 ** 127


def window_record(gen: torch.Generator, page: int) -> np.ndarray:
    """Every code byte in every position; scale bytes sweeping 0 and WINDOW_LOW..WINDOW_HIGH over the pages."""
    record = random_record(gen)
    record[:L.SCALE_OFFSET] = torch.stack([torch.randperm(256, generator=gen) for _ in range(32)]).flatten().numpy()
    inside = np.array([0] + list(range(L.WINDOW_LOW, L.WINDOW_HIGH + 1)))
    record[L.SCALE_OFFSET:] = inside[(np.arange(512) + 128 * page) % len(inside)]
    return record


def _times_window(bits: np.ndarray) -> np.ndarray:
    """bf16 bits x 2**-WINDOW_SHIFT (exact: the results are normal or zero), as bf16 bits."""
    values = torch.from_numpy((_bf16(bits) / WINDOW).astype(np.float32)).bfloat16()
    return values.view(torch.int16).numpy().astype(np.uint16)


def test_one_multiply_operands_are_the_exact_values_times_2_to_the_minus_shift():
    gen = torch.Generator().manual_seed(8)
    for page in range(4):
        record = window_record(gen, page)
        ref = _times_window(reference_bits(record))
        w, k, n = np.indices((L.WARPS, L.HEAD_DIM, L.TOKENS_PER_WARP))
        assert (k_operand(record, K_FAST_ASM) == ref[L.TOKENS_PER_WARP * w + n, qk_dims()[k]]).all()
        w, k, n = np.indices((L.WARPS, L.TOKENS_PER_WARP, L.HEAD_DIM))
        assert (v_operand(record, V_FAST_ASM) == ref[L.TOKENS_PER_WARP * w + k, pv_dims()[n]]).all()


def test_p_window_multiply_is_exact():
    """Every bf16 softmax weight in [0, 2**RESCALE_SLACK] (all bit patterns up to it: the running maximum lags the
    page maxima by at most the slack) x 2**63 through the shipped PTX."""
    top = (127 + L.RESCALE_SLACK) << 7  # bf16 bits of 2**RESCALE_SLACK
    bits = np.arange(0, top + 1, dtype=np.uint64)
    regs = H.run_ptx(P_WINDOW_ASM, {"$1": bits | (bits << 16), "$0": 0 * bits})
    got = _bf16(regs["$0"] & 0xFFFF)
    assert (got == _bf16(bits) * WINDOW).all() and ((regs["$0"] >> 16) == (regs["$0"] & 0xFFFF)).all()


# ---- the operand lane map (the compiler's layouts, on the host) ------------------------------------------------------
def _compiler_bases(warps, shape, operand=None):
    """The compiler's linear layout over ``shape``, as a bases dict, of the program's MMA layout (mma v2, warps on the
    batch dimension): its accumulator (``operand`` None) or its A / B operand (0 / 1)."""
    from triton._C.libtriton import gluon_ir, ir
    from triton.experimental.gluon import language as gl

    context = ir.context()
    ir.load_dialects(context)
    builder = gluon_ir.GluonOpBuilder(context)
    layout = gl.NVMMADistributedLayout(version=[2, 0], warps_per_cta=L.mma_warps(warps), instr_shape=L.MMA_INSTR_SHAPE)
    if operand is not None:
        layout = gl.DotOperandLayout(operand, layout, L.K_WIDTH)
    found = builder.to_linear_layout(layout._to_ir(builder), shape)
    return dict(reg_bases=found.reg_bases, lane_bases=found.lane_bases, warp_bases=found.warp_bases, shape=shape)


@pytest.fixture(scope="module", params=L.PROGRAM_WARPS, ids=lambda w: f"{w}warps")
def operand_layouts(request):
    """The compiler's linear layouts of the two B operands, as bases dicts, for each program warp count (key
    "warps")."""
    warps = request.param
    tokens = L.tokens_per_warp(warps)
    return {"warps": warps, "k": _compiler_bases(warps, [warps, L.HEAD_DIM, tokens], operand=1),
            "v": _compiler_bases(warps, [warps, tokens, L.HEAD_DIM], operand=1)}


def _vote_covers_every_head(bases, tested):
    """Whether, in every (warp, lane), the tested registers hold distinct heads and every register's head is one of
    theirs (so the vote sees every factor the thread multiplies by)."""
    regs = 2 ** len(bases["reg_bases"])
    for warp, lane in itertools.product(range(bases["shape"][0]), range(L.LANES)):
        heads = [L.linear_layout_apply(bases, reg, lane, warp)[1] for reg in range(regs)]
        seen = [heads[t] for t in tested]
        if len(set(seen)) != len(seen) or not set(heads) <= set(seen):
            return False
    return True


@WARPS
def test_rescale_vote_tests_one_register_per_head(warps):
    """The O rescale skips a warp's 64 multiplies when the factors its vote tests are all 1: those registers
    (pa_decode.rescale_vote_registers of the compiler's accumulator layout) must cover every head a thread holds
    (heads g and g + 8: registers 0 and 2). A vote that tested register 0 alone (head g) fails the check."""
    pa_decode = importlib.import_module("atom_mxfp4.kernels.hopper.pa_decode")
    bases = _compiler_bases(warps, [warps, L.BLOCK_H, L.HEAD_DIM])  # the accumulator O
    tested = pa_decode.rescale_vote_registers(bases["reg_bases"])
    assert tested == [0, 2]
    assert _vote_covers_every_head(bases, tested)
    assert not _vote_covers_every_head(bases, [0])
    assert not _vote_covers_every_head(bases, [0, 1])  # 0 and 1 hold the same head


def k_lane_map(bases):
    """(warp, lane, register) -> (token in the page, head dim) of the K^T operand [w, 128, tokens per warp]."""
    def where(warp, lane, reg):
        w, k, n = L.linear_layout_apply(bases, reg, lane, warp)
        return bases["shape"][2] * w + n, L.qk_dim(k)
    return where


def v_lane_map(bases):
    """(warp, lane, register) -> (token in the page, head dim) of the V operand [w, tokens per warp, 128]."""
    def where(warp, lane, reg):
        w, k, n = L.linear_layout_apply(bases, reg, lane, warp)
        return bases["shape"][1] * w + k, L.pv_dim(n)
    return where


def test_operand_layouts_are_the_mma_m16n8k16_b_fragment(operand_layouts):
    """PTX ISA, mma.m16n8k16 .bf16, B fragment: register i of lane l holds row k = 2 (l % 4) + (i & 1) + 8 (i >> 1)
    and column n = l // 4 of each 16 x 8 tile; warp w holds batch w."""
    warps = operand_layouts["warps"]
    for name, (k_dim, n_dim) in (("k", (1, 2)), ("v", (1, 2))):
        bases = operand_layouts[name]
        for warp, lane, reg in itertools.product(range(warps), range(L.LANES), range(operand_regs(warps))):
            index = L.linear_layout_apply(bases, reg, lane, warp)
            assert index[0] == warp
            k, n = index[k_dim], index[n_dim]
            assert k % 16 == 2 * (lane % 4) + (reg & 1) + 8 * ((reg >> 1) & 1), (name, warp, lane, reg)
            assert n % 8 == lane // 4, (name, warp, lane, reg)


def test_operand_lane_maps_against_the_record(operand_layouts, record):
    """The lane map: K^T register (warp, lane, reg) holds token 32 warp + n at head dim qk_dim(k) where (k, n) is the
    compiler's operand index; lane c's dims are its own scale block c, lane g's tokens are g + 8 r of the warp's 32.
    V: token 32 warp + k at head dim pv_dim(n), lane g's dims are 16 g .. 16 g + 15. Values from the decode emulation,
    compared with the record at the (token, dim) the map names."""
    warps = operand_layouts["warps"]
    tokens = L.tokens_per_warp(warps)
    ref = reference_bits(record)
    kt, v = k_operand(record, warps=warps), v_operand(record, warps=warps)
    k_where, v_where = k_lane_map(operand_layouts["k"]), v_lane_map(operand_layouts["v"])
    for warp, lane, reg in itertools.product(range(warps), range(L.LANES), range(operand_regs(warps))):
        token, dim = k_where(warp, lane, reg)
        assert token // tokens == warp and token % 8 == lane >> 2 and dim // 32 == lane & 3
        w, k, n = L.linear_layout_apply(operand_layouts["k"], reg, lane, warp)
        assert kt[w, k, n] == ref[token, dim]
        token, dim = v_where(warp, lane, reg)
        assert token // tokens == warp and dim // 16 == lane >> 2
        assert (token % tokens) // 2 % 4 == lane & 3
        w, k, n = L.linear_layout_apply(operand_layouts["v"], reg, lane, warp)
        assert v[w, k, n] == ref[token, dim]


def _owner(bases, regs, warps):
    """tensor index -> (warp, lane) of a load layout."""
    return {L.linear_layout_apply(bases, reg, lane, warp): (warp, lane)
            for warp in range(warps) for lane in range(L.LANES) for reg in range(regs)}


def test_every_operand_register_is_one_decode_output_of_its_own_lanes_words(operand_layouts):
    """Provenance: running the joins / permutations on ids instead of values, each bf16x2 register (reg 2i, 2i+1) of
    each operand is the low / high half of one decode output, computed from words the same lane loaded: no data moves
    between lanes and no register is repacked (what assert_trivial asserts in the compiled kernel)."""
    warps = operand_layouts["warps"]
    regs = range(0, operand_regs(warps), 2)
    # K: id = (flat index of the word in [w, 128 / w, 4, 4]) * 4 + output m; halves from unpack
    k_shape = L.k_words_shape(warps)
    word_ids = np.arange(np.prod(k_shape)).reshape(k_shape).astype(np.uint64)
    tagged = k_chain([((word_ids * 4 + m) << 17) | ((word_ids * 4 + m) << 1) | (1 << 16) for m in range(4)])
    owner = _owner(L.k_words_bases(warps), load_regs(warps), warps)
    for warp, lane, reg in itertools.product(range(warps), range(L.LANES), regs):
        low = tagged[L.linear_layout_apply(operand_layouts["k"], reg, lane, warp)]
        high = tagged[L.linear_layout_apply(operand_layouts["k"], reg + 1, lane, warp)]
        assert (low & 1, high & 1) == (0, 1) and low >> 1 == high >> 1  # the two halves of one output
        word = np.unravel_index(int(low >> 1) // 4, k_shape)
        assert owner[tuple(int(i) for i in word)] == (warp, lane)
    # V: id = (flat index of the even word in [w, 64 / w, 8, 2]) * 8 + output; the odd word is the same lane's
    shape = [warps, L.tokens_per_warp(warps) // 2, 8, 2]
    word_ids = np.arange(np.prod(shape)).reshape(shape).astype(np.uint64)
    tagged = v_chain([((word_ids * 8 + i) << 17) | ((word_ids * 8 + i) << 1) | (1 << 16) for i in range(8)])
    owner = _owner(L.v_words_bases(warps), load_regs(warps), warps)
    for warp, lane, reg in itertools.product(range(warps), range(L.LANES), regs):
        low = tagged[L.linear_layout_apply(operand_layouts["v"], reg, lane, warp)]
        high = tagged[L.linear_layout_apply(operand_layouts["v"], reg + 1, lane, warp)]
        assert (low & 1, high & 1) == (0, 1) and low >> 1 == high >> 1
        w, p, g, word = (int(i) for i in np.unravel_index(int(low >> 1) // 8, shape))
        for parity in (0, 1):  # [w, p, par, g, word] of the even and the odd word
            assert owner[(w, p, parity, g, word)] == (warp, lane)


# ---- the page dataflow end to end -----------------------------------------------------------------------------------
def _bf16(bits: np.ndarray) -> np.ndarray:
    return (bits.astype(np.uint32) << 16).view(np.float32).astype(np.float64)


def _round_bf16(x: np.ndarray) -> np.ndarray:
    return torch.from_numpy(x.astype(np.float32)).bfloat16().float().numpy().astype(np.float64)


def emulate_row(q: np.ndarray, k_records: list, v_records: list, context: int, logit_scale: float,
                fast: bool = False, warps: int = L.WARPS) -> np.ndarray:
    """The direct path of one row: q [G, 128] bf16 values; records of the row's pages (bytes past the context are
    whatever the cache holds: they are zero-filled here as the masked cp.async does) -> out [G, 128] (fp64). fast: the
    one-multiply pass (Q and P x 2**WINDOW_SHIFT, the window decode)."""
    group = q.shape[0]
    q_operand = np.zeros((L.BLOCK_H, L.HEAD_DIM))
    q_operand[:group] = q[:, qk_dims()] * (WINDOW if fast else 1.0)  # column k = head dim qk_dim(k); heads >= group 0
    tokens = L.tokens_per_warp(warps)
    m = np.full((warps, L.BLOCK_H), -np.inf)
    l_sum = np.zeros((warps, L.BLOCK_H))
    acc = np.zeros((warps, L.BLOCK_H, L.HEAD_DIM))
    for page, (k_record, v_record) in enumerate(zip(k_records, v_records)):
        valid = min(context - page * L.PAGE_SIZE, L.PAGE_SIZE)
        k_record, v_record = k_record.copy(), v_record.copy()
        for rec in (k_record, v_record):  # the copy masks: 16-byte code chunks and 4-byte scale words per token
            rec[valid * L.DATA_BYTES:L.SCALE_OFFSET] = 0
            rec[L.SCALE_OFFSET + valid * L.SCALE_BYTES:] = 0
        kt = _bf16(k_operand(k_record, K_FAST_ASM if fast else K_ASM, warps))
        v = _bf16(v_operand(v_record, V_FAST_ASM if fast else V_ASM, warps))
        logits = np.einsum("hk,wkn->whn", q_operand, kt) * logit_scale  # [w, h, n]
        position = page * L.PAGE_SIZE + np.arange(warps)[:, None, None] * tokens + np.arange(tokens)
        logits = np.where(position < context, logits, -np.inf)
        m_new = np.maximum(m, logits.max(axis=2))
        m_safe = np.where(m_new == -np.inf, 0.0, m_new)
        alpha = np.exp2(m - m_safe)
        p = np.exp2(logits - m_safe[:, :, None])
        l_sum = l_sum * alpha + p.sum(axis=2)
        acc = acc * alpha[:, :, None] + np.einsum("whk,wkn->whn", _round_bf16(p) * (WINDOW if fast else 1.0), v)
        m = m_new
    acc = acc.reshape(L.out_columns_shape(warps)).transpose(L.OUT_COLUMNS_ORDER).reshape(acc.shape)  # as the kernel
    m_all = m.max(axis=0)
    weight = np.exp2(m - np.where(m_all == -np.inf, 0.0, m_all)[None, :])
    total = (l_sum * weight).sum(axis=0)
    o = (acc * weight[:, :, None]).sum(axis=0)
    out = np.where(total[:, None] > 0, o / np.where(total > 0, total, 1.0)[:, None], 0.0 if context == 0 else np.nan)
    return out[:group]


@WARPS
@pytest.mark.parametrize("context", [0, 1, 31, 97, 128, 129, 300, 512])
def test_emulated_page_dataflow_matches_the_fp64_oracle(context, warps):
    gen = torch.Generator().manual_seed(context + 1)
    pages, group, scale = -(-context // L.PAGE_SIZE), 7, L.HEAD_DIM ** -0.5
    k_records = [random_record(gen, 120, 134) for _ in range(max(1, pages))]
    v_records = [random_record(gen, 120, 134) for _ in range(max(1, pages))]
    tail = context - (max(1, pages) - 1) * L.PAGE_SIZE  # valid tokens of the last page
    for rec in (k_records[-1], v_records[-1]):  # garbage past the context: scales 255 (NaN) that must never decode
        rec[L.SCALE_OFFSET + tail * L.SCALE_BYTES:] = 255
        rec[tail * L.DATA_BYTES:L.SCALE_OFFSET] = 0x77
    q = _round_bf16(torch.randn(group, L.HEAD_DIM, generator=gen).numpy())
    got = emulate_row(q, k_records[:pages], v_records[:pages], context, scale * math.log2(math.e), warps=warps)
    records = lambda recs: torch.from_numpy(np.stack(recs)).view(len(recs), 1, L.RECORD_BYTES)  # noqa: E731
    ref = H.attention_rows(q[None], records(k_records), records(v_records), torch.arange(len(k_records))[None],
                           [context], scale)[0]
    fast = emulate_row(q, k_records[:pages], v_records[:pages], context, scale * math.log2(math.e), fast=True,
                       warps=warps)
    assert np.array_equal(fast, got, equal_nan=True)  # the one-multiply pass: the same products, the same bits
    if context == 0:
        assert np.array_equal(got, np.zeros_like(got))
        return
    assert np.isfinite(got).all()
    assert np.linalg.norm(got - ref) / np.linalg.norm(ref) < H.ATTN_REL_TOL


# ---- wrong maps are caught ------------------------------------------------------------------------------------------
def test_a_wrong_qk_dim_order_is_caught(record, monkeypatch):
    kt = k_operand(record)
    bits = list(L.QK_DIM_BITS)
    bits[0], bits[3] = bits[3], bits[0]  # swap which k bits give the pair / the nibble
    monkeypatch.setattr(L, "QK_DIM_BITS", tuple(bits))
    assert k_mismatches(record, kt) > 0


def test_a_wrong_pv_dim_order_is_caught(record, monkeypatch):
    v = v_operand(record)
    monkeypatch.setattr(L, "PV_DIM_BITS", (0, 1, 2, 3, 4, 5, 6))  # columns in plain head-dim order: wrong
    assert v_mismatches(record, v) > 0


def test_a_wrong_chain_order_is_caught(record, monkeypatch):
    order = list(L.K_CHAIN_ORDER)
    order[3], order[4] = order[4], order[3]  # m1 and m0 exchanged
    monkeypatch.setattr(L, "K_CHAIN_ORDER", order)
    assert k_mismatches(record, k_operand(record)) > 0


def test_a_wrong_v_byte_selector_is_caught(record):
    broken = V_ASM.replace("prmt.b32 x, $8, $9, 0x5511;", "prmt.b32 x, $8, $9, 0x5411;", 1)  # odd token's byte 0
    assert broken != V_ASM
    assert v_mismatches(record, v_operand(record, broken)) > 0


# ---- the index scorer (atom_mxfp4/kernels/hopper/index_topk.py): fp8 words -> the A operand of mma.m16n8k16 ------
IDX_LOAD_REGS = L.PAGE_SIZE * L.FP8_CODE_WORDS // L.THREADS  # 32 words of each fp8 page per thread


def _idx_a_entries(kk_bits=L.IDX_KK_BITS):
    """{(warp, lane): {(block, token row m in the warp, operand column kk)}} that the scorer's loads and decode put in
    each lane: word [w, n, beta, c, sigma] holds bytes 32 beta + 8 c + 4 sigma + (2 h + b), element (h, b) of its two
    bf16x2 outputs; channel ``ch`` inside the block is operand column kk with permute_bits(kk, kk_bits) == ch."""
    column = {L.permute_bits(kk, kk_bits): kk for kk in range(32)}
    out = {}
    for warp in range(L.WARPS):
        for lane in range(L.LANES):
            held = set()
            for reg in range(IDX_LOAD_REGS):
                w, n, beta, c, sigma = L.linear_layout_apply(L.IDX_WORDS_BASES, reg, lane, warp)
                assert w == warp
                for h in range(2):
                    for b in range(2):
                        held.add((beta, n, column[8 * c + 4 * sigma + 2 * h + b]))
            out[(warp, lane)] = held
    return out


def test_index_loads_are_64_bit_chunks_covering_the_fp8_page_once():
    loads = _load_map(L.IDX_WORDS_BASES, L.idx_word_offset, IDX_LOAD_REGS)
    everything = sorted(o for offsets in loads.values() for o in offsets)
    assert everything == list(range(L.PAGE_SIZE * L.FP8_CODE_WORDS))  # every e4m3 word of the page, once
    for (warp, lane), offsets in loads.items():
        for vector in range(IDX_LOAD_REGS // 2):  # registers 2v, 2v + 1: one 8-byte aligned chunk of one token
            pair = offsets[2 * vector:2 * vector + 2]
            assert pair == [pair[0], pair[0] + 1] and pair[0] % 2 == 0
            token, byte = divmod(4 * pair[0], L.FP8_DATA_BYTES)
            assert token // L.TOKENS_PER_WARP == warp and token % 8 == lane >> 2
            assert (byte % 32) == 8 * (lane & 3)  # lane c: bytes 8c .. 8c + 7 of every 32-channel block


def _a_fragment(lane):
    """PTX ISA, mma.m16n8k16 .bf16, A fragment of two m-tiles and two k-steps (one 32-channel block): lane l holds rows
    l // 4 + 8 i (i = 0..3: rows g, g + 8 of each m-tile) and columns 2 (l % 4) + {0, 1} + 8 j (j = 0..3)."""
    g, c = lane >> 2, lane & 3
    return {(m, kk) for m in (g, g + 8, g + 16, g + 24)
            for kk in (2 * c + b + 8 * j for j in range(4) for b in range(2))}


def test_index_a_operand_lanes_are_the_mma_a_fragment():
    for (warp, lane), held in _idx_a_entries().items():
        for beta in range(4):
            assert {(m, kk) for blk, m, kk in held if blk == beta} == _a_fragment(lane), (warp, lane, beta)


def test_index_query_order_matches_the_operand_columns():
    # q's B operand row kk must be the channel the A operand's column kk holds: both are layout.idx_channel
    assert sorted(L.idx_channel(kk) for kk in range(32)) == list(range(32))
    for (warp, lane), held in _idx_a_entries().items():
        g, c = lane >> 2, lane & 3
        for blk, m, kk in held:
            channel = L.idx_channel(kk)
            assert channel // 8 == c and m % 8 == g  # lane c's own 8 bytes of the block, its own tokens


def test_a_wrong_index_channel_order_is_caught():
    wrong = (0, 1, 4, 3, 2)  # bits h and c swapped: a lane would hold columns of another lane's fragment
    entries = _idx_a_entries(wrong)
    assert any({(m, kk) for blk, m, kk in held if blk == 0} != _a_fragment(lane)
               for (warp, lane), held in entries.items())
