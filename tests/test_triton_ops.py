"""Triton backend vs the torch backend, small irregular shapes.

On a machine without CUDA these run under the Triton interpreter (TRITON_INTERPRET=1 is set here, before triton
is imported); with CUDA they run the compiled kernels. Cache bytes, tables, lengths and top-k ids must be equal
bit for bit; attention is compared with the fp64 oracle of tests/_helpers.py under a named tolerance.
"""

import os
import sys

import torch

if not torch.cuda.is_available():
    os.environ["TRITON_INTERPRET"] = "1"

import numpy as np
import pytest

import atom_mxfp4.kernels.torch as torch_backend
import atom_mxfp4.kernels.triton as triton_backend
from atom_mxfp4.format import ScaleMode, quantize_mxfp4
from atom_mxfp4.kernels.triton.qknorm_rope_write import WriteConfig, write_config
from atom_mxfp4.layout import FP8_RECORD_BYTES, RECORD_BYTES as RECORD, qkv_rows, qkv_width

from _helpers import ATTN_REL_TOL, attention_rows, garbage_records, random_codes, to_device

DEVICE = torch.device("cuda" if torch.cuda.is_available() else "cpu")


def _gen(seed):
    return torch.Generator().manual_seed(seed)


# ---- fused_qknorm_rope_write --------------------------------------------------------------------------------------
def _write_inputs(gen, tokens, nq, nkv, niq, rotary_dim, pages):
    width = qkv_width(nq, nkv, niq)
    qkv = (torch.randn(tokens, width, generator=gen) * 2.5).bfloat16()
    qkv.view(-1)[torch.randint(0, qkv.numel(), (3,), generator=gen)] = torch.tensor(
        [float("inf"), float("-inf"), float("nan")]).bfloat16()  # non-finite inputs: saturate / code 0
    qkv[0, :128] = 0  # an all-zero head row (amax 0 -> scale byte 1)
    positions = torch.randint(0, 97, (tokens,), generator=gen)
    weights = [torch.randn(128, generator=gen) * 0.3 for _ in range(4)]
    angles = torch.rand(97, rotary_dim // 2, generator=gen) * 6
    cos_sin = torch.cat([angles.cos(), angles.sin()], 1).float().contiguous()
    slots = torch.randperm(pages * 128, generator=gen)[:tokens]
    slots[torch.randint(0, tokens, (max(1, tokens // 4),), generator=gen)] = -1  # slot -1: skipped
    return qkv, positions, weights, cos_sin, slots


def _run_write(backend, inputs, nq, nkv, niq, rotary_dim, pages, mode, q_dtype, poison, ik_poison=None, **kw):
    """kw: index_k_dtype, and config for the Triton launcher; ik_poison: index-K records of another width (fp8)."""
    qkv, positions, weights, cos_sin, slots = (to_device(x, DEVICE) if torch.is_tensor(x) else x for x in inputs)
    weights = [to_device(w, DEVICE) for w in weights]
    k = poison.clone().to(DEVICE)[:, :nkv].contiguous()
    v = (poison.clone().to(DEVICE)[:, :nkv] ^ 0x5A).contiguous()
    ik = (poison[:, :1] if ik_poison is None else ik_poison).clone().to(DEVICE).contiguous() if niq else None
    q, iq = backend.fused_qknorm_rope_write(
        qkv, positions, *weights, cos_sin, slots, k, v, ik, num_q_heads=nq, num_kv_heads=nkv, num_index_heads=niq,
        rotary_dim=rotary_dim, eps=1e-6, scale_mode=mode, q_dtype=q_dtype, **kw)
    return q, iq, k, v, ik


def _same_bits(a, b):
    if a is None or b is None:
        return a is None and b is None
    a, b = a.cpu(), b.cpu()
    nan = torch.isnan(a.float()) & torch.isnan(b.float())  # NaN payloads may differ
    view = torch.uint8 if a.element_size() == 1 else torch.int16
    return bool(((a.view(view) == b.view(view)) | nan).all())


@pytest.mark.parametrize("mode", list(ScaleMode))
@pytest.mark.parametrize("shape", [(5, 4, 2, 1, 64), (3, 3, 1, 0, 32), (1, 16, 1, 1, 128)],
                         ids=["T5-g2-idx", "T3-dense-rot32", "T1-g16-rot128"])
def test_fused_write_bit_exact(mode, shape):
    tokens, nq, nkv, niq, rotary_dim = shape
    pages = 3
    gen = _gen(hash((mode.value,) + shape) % 2**31)
    inputs = _write_inputs(gen, tokens, nq, nkv, niq, rotary_dim, pages)
    poison = torch.randint(0, 256, (pages, 2, RECORD), generator=gen, dtype=torch.int32).to(torch.uint8)
    q_dtype = torch.float8_e4m3fn if nq == 3 else torch.bfloat16
    ours = _run_write(triton_backend, inputs, nq, nkv, niq, rotary_dim, pages, mode, q_dtype, poison)
    ref = _run_write(torch_backend, [x.cpu() if torch.is_tensor(x) else x for x in inputs], nq, nkv, niq,
                     rotary_dim, pages, mode, q_dtype, poison.cpu())
    for name, a, b in zip(("q", "idx_q", "k_cache", "v_cache", "index_k_cache"), ours, ref):
        assert _same_bits(a, b), f"{name} differs from the torch backend ({mode}, {shape})"


@pytest.mark.parametrize("q_dtype", [torch.bfloat16, torch.float8_e4m3fn], ids=["q-bf16", "q-e4m3"])
@pytest.mark.parametrize("index_k_dtype", ["mxfp4", "fp8"])
@pytest.mark.parametrize("tokens", [1, 3, 5, 9, 37])
def test_multi_token_programs_bit_exact(tokens, index_k_dtype, q_dtype):
    """TOKENS_PER_PROGRAM 4 / 8: token counts that leave a partial last program, slot -1 inside a program, qkv rows
    strided (a column slice of a wider projection)."""
    nq, nkv, niq, rotary_dim, pages = 4, 2, 1, 64, 2
    config = WriteConfig(tokens_per_program=8 if q_dtype == torch.bfloat16 else 4)
    gen = _gen(tokens * 10 + len(index_k_dtype))
    qkv, *rest = _write_inputs(gen, tokens, nq, nkv, niq, rotary_dim, pages)
    wide = torch.randn(tokens, qkv.shape[1] + 200, generator=gen).bfloat16()
    wide[:, 72:72 + qkv.shape[1]] = qkv
    inputs = [wide[:, 72:72 + qkv.shape[1]]] + rest  # row stride != width, elements contiguous
    rest[-1][tokens // 2] = -1  # a skipped slot between written ones
    poison = torch.randint(0, 256, (pages, 2, RECORD), generator=gen, dtype=torch.int32).to(torch.uint8)
    ik_width = FP8_RECORD_BYTES if index_k_dtype == "fp8" else RECORD
    ik_poison = torch.randint(0, 256, (pages, 1, ik_width), generator=gen, dtype=torch.int32).to(torch.uint8)
    args = (nq, nkv, niq, rotary_dim, pages, ScaleMode.MSE if tokens % 2 else ScaleMode.CEIL, q_dtype)
    ours = _run_write(triton_backend, inputs, *args, poison, ik_poison, index_k_dtype=index_k_dtype, config=config)
    ref = _run_write(torch_backend, inputs, *args, poison, ik_poison, index_k_dtype=index_k_dtype)
    for name, a, b in zip(("q", "idx_q", "k_cache", "v_cache", "index_k_cache"), ours, ref):
        assert _same_bits(a, b), f"{name} differs from the torch backend"


@pytest.mark.parametrize("rotary_dim", [64, 128, 32])
@pytest.mark.parametrize("config", [WriteConfig(early_loads=False),
                                    WriteConfig(tokens_per_program=1, heads_per_program=2, num_warps=1,
                                                early_loads=False)], ids=["medium, late loads", "small, late loads"])
def test_load_placement_bit_exact(config, rotary_dim):
    """Either load placement (``early_loads``: the weights, cos / sin and RoPE partners loaded before the norm,
    unmasked cos / sin in the halves form; write_config's choice below 8192 tokens, late loads here): the same
    bytes as the torch backend, halves (rotary_dim 64 / 128) and general (32)."""
    tokens, nq, nkv, niq, pages = 9, 5, 2, 3, 2
    gen = _gen(31 + rotary_dim)
    inputs = _write_inputs(gen, tokens, nq, nkv, niq, rotary_dim, pages)
    poison = torch.randint(0, 256, (pages, 2, RECORD), generator=gen, dtype=torch.int32).to(torch.uint8)
    args = (nq, nkv, niq, rotary_dim, pages, ScaleMode.MSE, torch.bfloat16)
    ours = _run_write(triton_backend, inputs, *args, poison, config=config)
    ref = _run_write(torch_backend, inputs, *args, poison)
    for name, a, b in zip(("q", "idx_q", "k_cache", "v_cache", "index_k_cache"), ours, ref):
        assert _same_bits(a, b), f"{name} differs from the torch backend ({config}, rotary_dim {rotary_dim})"


def test_write_config_shapes():
    """Large batches: several tokens and q heads per program, 16 lanes per row (>= 2 rows per warp); small ones one
    token per program of one warp. Every shape is powers of 2 (tl.arange)."""
    for tokens in (1, 63, 64, 8191, 8192):
        cfg = write_config(tokens)
        for n in (cfg.tokens_per_program, cfg.heads_per_program, cfg.num_warps):
            assert n >= 1 and n & (n - 1) == 0, cfg
    for large in (write_config(64), write_config(8192)):
        assert large.tokens_per_program >= 2 * large.num_warps  # k / v / idx_k programs: every lane holds 8 values
        assert large.tokens_per_program * large.heads_per_program >= 2 * large.num_warps
    assert write_config(1).tokens_per_program == 1
    assert WriteConfig(heads_per_program=4).groups(16, 1, 1) == 4 + 2 + 1 + 1
    assert WriteConfig(heads_per_program=4).groups(16, 1, 3) == 4 + 2 + 1 + 1  # 3 idx_q heads: one of 4
    assert WriteConfig(heads_per_program=2).index_heads_per_program(1) == 1
    assert WriteConfig(heads_per_program=4).groups(5, 2, 0) == 2 + 4


def _quantize_edge_rows(tokens):
    """V head rows (written raw: no norm, no RoPE) built from 32-blocks at the quantizer's edges: the largest finite
    bf16 (E = 254), elements on every rounding threshold, amax with mantissa exactly 0x400000 (CEIL == FLOOR), MSE
    ties (7 * 2**k alone: error 1 under both scales), tiny elements under a large amax (they underflow once
    scaled), subnormals, +-Inf / NaN beside finite values, zeros."""
    gen = _gen(77)
    big = torch.finfo(torch.bfloat16).max
    thresholds = torch.tensor([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, 6.0])
    blocks = [
        torch.linspace(-big, big, 32),
        torch.cat([thresholds * 2.0 ** 10, -thresholds * 2.0 ** 10, torch.full((16,), 6.0 * 2 ** 10)]),
        torch.cat([torch.tensor([1.5 * 2 ** 3]), torch.randn(31, generator=gen)]),  # M = 0x400000
        torch.cat([torch.tensor([7.0 * 2 ** -3]), torch.zeros(31)]),  # an MSE tie: ties go to CEIL
        torch.cat([torch.tensor([3.0e38, -1e-30, 1e-38]), torch.full((29,), 2.0 ** -133)]),
        torch.cat([torch.tensor([float("inf"), float("nan"), float("-inf")]), torch.randn(29, generator=gen)]),
        torch.full((32,), 2.0 ** -130) * torch.randint(-3, 4, (32,), generator=gen),  # bf16 subnormals
        torch.zeros(32),
    ]
    rows = []
    for t in range(tokens):
        order = torch.randperm(len(blocks), generator=gen)[:4]
        rows.append(torch.cat([blocks[int(i)][torch.randperm(32, generator=gen)] for i in order]))
    return torch.stack(rows).bfloat16()


@pytest.mark.parametrize("mode", list(ScaleMode))
@pytest.mark.parametrize("config", [write_config(1), write_config(64), write_config(8192),
                                    WriteConfig(tokens_per_program=2, heads_per_program=4, num_warps=2)],
                         ids=["small", "medium", "large", "tpp2-hpp4-w2"])
def test_fused_write_quantize_edges_bit_exact(mode, config):
    """The quantizer's edge cases (``_quantize_edge_rows``) in V rows, 9 tokens (a partial last program), 5 q heads
    and 3 index heads (partial head groups), 2 KV heads: cache bytes and q equal the torch backend's bit for bit."""
    tokens, nq, nkv, niq, rotary_dim, pages = 9, 5, 2, 3, 64, 2
    gen = _gen(5 + len(mode.value))
    qkv, *rest = _write_inputs(gen, tokens, nq, nkv, niq, rotary_dim, pages)
    v = qkv_rows(nq, nkv, niq).v
    qkv[:, v.start * 128:v.stop * 128] = torch.cat([_quantize_edge_rows(tokens),
                                                    _quantize_edge_rows(tokens).flip(0)], 1)
    poison = torch.randint(0, 256, (pages, 2, RECORD), generator=gen, dtype=torch.int32).to(torch.uint8)
    args = (nq, nkv, niq, rotary_dim, pages, mode, torch.bfloat16)
    ours = _run_write(triton_backend, [qkv] + rest, *args, poison, config=config)
    ref = _run_write(torch_backend, [qkv] + rest, *args, poison)
    for name, a, b in zip(("q", "idx_q", "k_cache", "v_cache", "index_k_cache"), ours, ref):
        assert _same_bits(a, b), f"{name} differs from the torch backend ({mode}, {config})"


@pytest.mark.parametrize("span", [24, 140], ids=["span2^24", "span2^140"])
@pytest.mark.parametrize("index_k_dtype", ["mxfp4", "fp8"])
def test_fused_write_wide_exponents_bit_exact(span, index_k_dtype):
    """Every row (q, K, V, index heads) of log-uniform magnitudes over 2**span, a third of V's first blocks on the
    FLOOR / CEIL boundary (amax just above 6 * 2**k, the rest on the grid: errors that nearly tie), MSE scales:
    cache bytes and q equal the torch backend's bit for bit (the quantizers' fp32 differences and fp64 sums)."""
    tokens, nq, nkv, niq, rotary_dim, pages = 48, 2, 1, 1, 64, 1
    gen = _gen(span + len(index_k_dtype))
    qkv, *rest = _write_inputs(gen, tokens, nq, nkv, niq, rotary_dim, pages)
    magnitude = torch.exp2((torch.rand(qkv.shape, generator=gen) - 0.5) * span)
    qkv = torch.where(torch.rand(qkv.shape, generator=gen) < 0.5, -magnitude, magnitude)
    v = qkv_rows(nq, nkv, niq).v
    edge = qkv[::3, v.start * 128:v.start * 128 + 32]
    edge.copy_(torch.randint(-12, 13, edge.shape, generator=gen).float() * 0.5)
    edge[:, 0] = 6.0 + 2.0 ** -5 * torch.randint(1, 30, (edge.shape[0],), generator=gen)
    qkv = qkv.bfloat16()
    poison = torch.randint(0, 256, (pages, nkv, RECORD), generator=gen, dtype=torch.int32).to(torch.uint8)
    ik_poison = torch.randint(0, 256, (pages, 1, FP8_RECORD_BYTES), generator=gen, dtype=torch.int32).to(
        torch.uint8) if index_k_dtype == "fp8" else None
    args = (nq, nkv, niq, rotary_dim, pages, ScaleMode.MSE, torch.bfloat16, poison, ik_poison)
    ours = _run_write(triton_backend, [qkv] + rest, *args, index_k_dtype=index_k_dtype)
    ref = _run_write(torch_backend, [qkv] + rest, *args, index_k_dtype=index_k_dtype)
    for name, a, b in zip(("q", "idx_q", "k_cache", "v_cache", "index_k_cache"), ours, ref):
        assert _same_bits(a, b), f"{name} differs from the torch backend (span 2**{span}, {index_k_dtype} index-K)"


# ---- index_topk + build_sparse_tables -----------------------------------------------------------------------------
def _exact_index_setup(gen, pages, requests, max_blocks, rows, heads):
    """Index-K and idx_q on small dyadic grids: every dot product is exact in fp32, so the scores (and the ties,
    which are frequent here) do not depend on summation order and ids must match bit for bit."""
    records = torch.zeros(pages, 1, RECORD, dtype=torch.uint8)
    keys = torch.randint(-8, 9, (pages * 128, 128), generator=gen).float() / 4
    data, scale = quantize_mxfp4(keys)
    records[:, 0, :8192] = data.view(pages, 8192)
    records[:, 0, 8192:] = scale.view(pages, 512)
    block_table = torch.stack([torch.randperm(pages, generator=gen)[:max_blocks] for _ in range(requests)]).int()
    row_request = torch.randint(0, requests, (rows,), generator=gen, dtype=torch.int32)
    row_position = torch.randint(0, max_blocks * 128, (rows,), generator=gen, dtype=torch.int32)
    row_position[0] = 0  # first token of a request: one visible token
    row_position[-1] = max_blocks * 128 - 1  # last token of the table
    idx_q = (torch.randint(-4, 5, (rows, heads, 128), generator=gen).float() / 2).bfloat16()
    return idx_q, records, block_table, row_request, row_position


@pytest.mark.parametrize("case", [(17, 1, 16, 0, 1), (9, 2, 3, 1, 1), (6, 1, 5, 2, 3)],
                         ids=["R17-top16", "R9-2heads-top3-init1", "R6-top5-init2-local3"])
def test_index_topk_and_tables_bit_exact(case):
    rows, heads, topk, init_blocks, local_blocks = case
    gen = _gen(sum(case) * 7919)
    idx_q, records, block_table, row_request, row_position = _exact_index_setup(gen, 24, 3, 7, rows, heads)
    args = (idx_q, records, block_table, row_request, row_position)
    kwargs = dict(topk=topk, init_blocks=init_blocks, local_blocks=local_blocks)
    ours = triton_backend.index_topk(*(a.to(DEVICE) for a in args), **kwargs).cpu()
    ref = torch_backend.index_topk(*args, **kwargs)
    assert torch.equal(ours, ref), f"top-k ids differ:\n{ours}\n{ref}"
    own = row_position.long() // 128
    assert bool((ours[..., 0] >= 0).all()) and bool((ours.max(-1).values == own).all()), "own block not kept"

    tables, lens = triton_backend.build_sparse_tables(*(a.to(DEVICE) for a in (ours, block_table, row_request,
                                                                               row_position)),
                                                      num_kv_heads=heads, pages_per_block=1)
    ref_tables, ref_lens = torch_backend.build_sparse_tables(ours, block_table, row_request, row_position,
                                                             num_kv_heads=heads, pages_per_block=1)
    assert torch.equal(tables.cpu(), ref_tables) and torch.equal(lens.cpu(), ref_lens)



def test_fp8_index_scorer_refuses_a_cache_off_4_byte_alignment_even_unchecked():
    """The CUDA fp8 scorer reads a token's 4 scale bytes as one int32 word: a cache view one byte off (accepted before,
    a contiguous uint8 view of the right shape) made the H200 raise "misaligned address" in the layout sweep (a sticky
    CUDA error). Refused by name on every device, before any launch; a view 4 bytes off is read right."""
    q = torch.zeros(2, 1, 128, dtype=torch.bfloat16, device=DEVICE)
    table = torch.arange(4, dtype=torch.int32, device=DEVICE).view(1, 4)
    rows = torch.zeros(2, dtype=torch.int32, device=DEVICE)
    flat = torch.zeros(4 * FP8_RECORD_BYTES + 16, dtype=torch.uint8, device=DEVICE)
    kwargs = dict(topk=2, init_blocks=0, local_blocks=1, index_k_dtype="fp8")
    for shift in (1, 2, 3):
        cache = flat[shift:shift + 4 * FP8_RECORD_BYTES].view(4, 1, FP8_RECORD_BYTES)
        with pytest.raises(ValueError, match=rf"index_k_cache address.*4-byte aligned.*storage offset {shift}"):
            triton_backend.index_topk(q, cache, table, rows, rows, **kwargs)
    cache = flat[4:4 + 4 * FP8_RECORD_BYTES].view(4, 1, FP8_RECORD_BYTES)
    assert torch.equal(triton_backend.index_topk(q, cache, table, rows, rows, **kwargs).cpu(),
                       torch_backend.index_topk(q.cpu(), cache.cpu(), table.cpu(), rows.cpu(), rows.cpu(), **kwargs))

def test_sparse_tables_pages_per_block():
    gen = _gen(11)
    # rows of 2 kv heads, blocks of 2 pages (own blocks 2, 3, 0); ascending ids, -1 padding last (the input
    # contract: another order is refused by atom_mxfp4.ops and undefined under check=False)
    topk_blocks = torch.tensor([[[0, 1, 2, -1], [0, 1, 3, -1], [0, -1, -1, -1]],
                                [[1, 2, -1, -1], [0, 2, -1, -1], [-1, -1, -1, -1]]], dtype=torch.int32)
    block_table = torch.randint(0, 97, (2, 8), generator=gen, dtype=torch.int32)
    row_request = torch.tensor([0, 1, 0], dtype=torch.int32)
    row_position = torch.tensor([600, 1000, 100], dtype=torch.int32)
    args = (topk_blocks, block_table, row_request, row_position)
    ours = triton_backend.build_sparse_tables(*(a.to(DEVICE) for a in args), num_kv_heads=2, pages_per_block=2)
    ref = torch_backend.build_sparse_tables(*args, num_kv_heads=2, pages_per_block=2)
    assert torch.equal(ours[0].cpu(), ref[0]) and torch.equal(ours[1].cpu(), ref[1])


# ---- pa_decode ------------------------------------------------------------------------------------------------
def _decode_setup(gen, rows, group, width, pages, lens):
    """Valid random codes in every page, except the token slots past each row's length: garbage (NaN/Inf scales)."""
    k = garbage_records(gen, pages, 1)
    v = garbage_records(gen, pages, 1)
    tables = torch.stack([torch.randperm(pages, generator=gen)[:width] for _ in range(rows)]).int()
    used = torch.zeros(pages, 128, dtype=torch.bool)
    for r, n in enumerate(lens):
        for t in range(n):
            used[tables[r, t // 128], t % 128] = True
    for rec in (k, v):
        data, scale = random_codes(gen, pages * 128)
        d = rec[:, 0, :8192].view(pages, 128, 64)
        s = rec[:, 0, 8192:].view(pages, 128, 4)
        d[used] = data.view(pages, 128, 64)[used]
        s[used] = scale.view(pages, 128, 4)[used]
    q = torch.randn(rows, group, 128, generator=gen).bfloat16()
    return q, k, v, tables, torch.tensor(lens, dtype=torch.int32)


@pytest.mark.parametrize("splits", [1, 3, 2], ids=["direct", "split", "split2"])
@pytest.mark.parametrize("case", [(5, 16, 3, [0, 1, 130, 300, 384]), (3, 5, 2, [97, 256, 129])],
                         ids=["R5-G16-empty-row", "R3-G5"])
def test_pa_decode_matches_fp64(case, splits):
    from atom_mxfp4.kernels.triton.pa_decode import DecodeConfig
    rows, group, width, lens = case
    gen = _gen(rows * 31 + group + splits)
    q, k, v, tables, context_lens = _decode_setup(gen, rows, group, width, rows * width + 2, lens)
    scale = 128 ** -0.5
    ref64 = attention_rows(q.double().numpy(), k, v, tables, context_lens, scale)
    plan = triton_backend.make_plan(rows, width, group, DEVICE, num_splits=splits,
                                    config=DecodeConfig(block_n=64))
    out = torch.full((rows, group, 128), float("nan"), dtype=torch.bfloat16, device=DEVICE)  # poisoned
    triton_backend.pa_decode(out, q.to(DEVICE), k.to(DEVICE), v.to(DEVICE), tables.to(DEVICE),
                             context_lens.to(DEVICE), softmax_scale=scale, query_scale=None, plan=plan)
    got = out.float().cpu().numpy()
    assert np.isfinite(got).all(), "garbage past context_lens (or an unwritten output) reached out"
    assert (got[np.array(lens) == 0] == 0).all(), "context_lens 0 must write zeros"
    rel = np.linalg.norm(got - ref64) / np.linalg.norm(ref64)
    assert rel < ATTN_REL_TOL, f"relative error {rel:.2e} >= {ATTN_REL_TOL}"


def test_pa_decode_a_short_row_in_a_wide_table_spreads_over_every_split():
    """Splits divide each row's own pages, not the table's width: a 3-page row in a 16-page table at 4 splits puts
    one page on each of splits 0..2 (partial lse finite; split 3 empty: -inf), where dividing the width put all 3 on
    split 0; a full row beside it takes 4 pages a split. Both rows vs the fp64 oracle (the merge reads only the
    splits that hold pages)."""
    from atom_mxfp4.kernels.triton.pa_decode import DecodeConfig
    rows, group, width, splits = 2, 16, 16, 4
    lens = [3 * 128 - 5, width * 128]
    gen = _gen(77)
    q, k, v, tables, context_lens = _decode_setup(gen, rows, group, width, rows * width + 2, lens)
    scale = 128 ** -0.5
    plan = triton_backend.make_plan(rows, width, group, DEVICE, num_splits=splits, config=DecodeConfig(block_n=64))
    out = torch.full((rows, group, 128), float("nan"), dtype=torch.bfloat16, device=DEVICE)
    triton_backend.pa_decode(out, q.to(DEVICE), k.to(DEVICE), v.to(DEVICE), tables.to(DEVICE),
                             context_lens.to(DEVICE), softmax_scale=scale, query_scale=None, plan=plan)
    lse = plan.part_lse.view(rows, splits, -1)[:, :, :group].cpu()
    assert torch.isfinite(lse[0, :3]).all() and (lse[0, 3] == float("-inf")).all(), lse[0, :, 0]
    assert torch.isfinite(lse[1]).all()
    ref64 = attention_rows(q.double().numpy(), k, v, tables, context_lens, scale)
    got = out.float().cpu().numpy()
    rel = np.linalg.norm(got - ref64) / np.linalg.norm(ref64)
    assert rel < ATTN_REL_TOL, f"relative error {rel:.2e} >= {ATTN_REL_TOL}"


def test_pa_decode_e4m3_query_scale_tensor():
    gen = _gen(5)
    rows, group, width, lens = 2, 8, 2, [200, 77]
    q, k, v, tables, context_lens = _decode_setup(gen, rows, group, width, 5, lens)
    q8 = (q.float() * 4).to(torch.float8_e4m3fn)
    query_scale = torch.tensor([0.25, 0.5])
    scale = 0.09
    ref64 = attention_rows(q8.double().numpy() * query_scale.double().numpy()[:, None, None], k, v, tables,
                           context_lens, scale)
    out = torch.empty(rows, group, 128, dtype=torch.bfloat16, device=DEVICE)
    triton_backend.pa_decode(out, q8.to(DEVICE), k.to(DEVICE), v.to(DEVICE), tables.to(DEVICE),
                             context_lens.to(DEVICE), softmax_scale=scale, query_scale=query_scale.to(DEVICE),
                             plan=None)
    got = out.float().cpu().numpy()
    rel = np.linalg.norm(got - ref64) / np.linalg.norm(ref64)
    assert rel < ATTN_REL_TOL, f"relative error {rel:.2e}"


@pytest.mark.parametrize("rows, width, per_sm, splits", [
    (512, 64, 3, 3), (512, 16, 3, 3), (256, 16, 3, 3),  # 3 per SM: 1.29 / 0.65 waves unsplit -> 3.9 / 1.9 waves
    (512, 64, 4, 1), (256, 16, 4, 2), (132, 16, 4, 4),  # 4 per SM (the default): 97% of a wave unsplit; 2; one wave
    (4096, 16, 3, 1), (4096, 16, 4, 1),  # 10.3 / 7.8 waves: full enough unsplit
    (64, 16, 4, 5), (1, 16, 4, 16), (1, 200, 4, 64),  # few rows: ~2 waves of the SMs, at most 64, at most the width
    (600, 2, 3, 1),  # never more splits than pages
])
def test_split_policy_fills_the_waves(monkeypatch, rows, width, per_sm, splits):
    import importlib
    decode = importlib.import_module("atom_mxfp4.kernels.triton.pa_decode")
    monkeypatch.setattr(decode, "_num_sms", lambda index: 132)  # the H200 the policy was measured on
    assert decode.num_splits_for(rows, width, torch.device("cuda", 0), per_sm) == splits
    plan = decode.make_plan(rows, width, 16, "cpu", config=decode.DecodeConfig(programs_per_sm=per_sm))
    launch_splits, pages_per_split = plan.splits_for(rows, width)
    assert launch_splits == -(-width // pages_per_split) <= splits  # no split without pages


def test_plan_shapes_and_mismatch_error():
    plan = triton_backend.make_plan(3, 10, 16, DEVICE, num_splits=4)
    assert plan.splits_for(3, 10) == (4, 3) and plan.part_out.shape == (12, 16, 128)
    assert plan.splits_for(2, 8) == (4, 2) and plan.part_lse.shape == (12, 16)  # every covered launch asks for 4
    direct = triton_backend.make_plan(3, 10, 16, DEVICE, num_splits=1)
    assert direct.part_out is None and direct.splits_for(3, 10) == (1, 10)
    q = torch.zeros(4, 16, 128, dtype=torch.bfloat16, device=DEVICE)
    records = torch.zeros(1, 1, RECORD, dtype=torch.uint8, device=DEVICE)
    with pytest.raises(ValueError, match=r"plan.num_rows must be >= q.shape\[0\] = 4 \(the call's rows\), got 3"):
        triton_backend.pa_decode(torch.empty_like(q), q, records, records,
                                 torch.zeros(4, 10, dtype=torch.int32, device=DEVICE),
                                 torch.zeros(4, dtype=torch.int32, device=DEVICE), softmax_scale=1.0,
                                 query_scale=None, plan=plan)


# ---- the layer end to end ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("sparse", [True, False], ids=["sparse", "dense"])
def test_layer_decode_step_triton_equals_torch(sparse):
    """A 4-block prefix written by the torch backend, then one decode step of 3 requests with each backend from the
    same caches: identical cache bytes and top-k, outputs within the attention tolerance of each other."""
    import copy

    from atom_mxfp4.layer import AttentionMetadata, LayerCaches, LayerConfig, SparseMXFP4Attention
    gen = _gen(17 + sparse)
    config = LayerConfig(num_q_heads=16, num_kv_heads=1, num_index_heads=1, sparse=sparse, topk=3, init_blocks=1,
                         local_blocks=1)
    lens = [450, 129, 5]
    pages = 3 * 4 + 2  # every request may own 4 pages
    block_table = torch.randperm(pages, generator=gen)[:3 * 4].view(3, 4).int().contiguous()
    weights = {k: (torch.randn(128, generator=gen) * 0.2).bfloat16()
               for k in ("q_norm", "k_norm", "idx_q_norm", "idx_k_norm")}
    caches = LayerCaches.allocate(config, pages, "cpu")
    prefix = torch.randn(sum(lens), config.qkv_width, generator=gen).bfloat16()
    SparseMXFP4Attention(config, weights, backend="torch")(
        prefix, AttentionMetadata.for_requests(block_table, [0, 0, 0], lens), caches)
    step = torch.randn(3, config.qkv_width, generator=gen).bfloat16()
    results = {}
    for backend in ("torch", "triton"):
        c = copy.deepcopy(caches)
        device = torch.device("cpu") if backend == "torch" else DEVICE
        layer = SparseMXFP4Attention(config, {k: w.to(device) for k, w in weights.items()}, backend=backend)
        moved = LayerCaches(*(None if x is None else type(x)(records=x.records.to(device))
                              for x in (c.k, c.v, c.index_k)))
        meta = AttentionMetadata.for_requests(block_table.to(device), lens, [1, 1, 1])
        out, topk = layer(step.to(device), meta, moved, return_topk=True)
        results[backend] = (out.float().cpu(), None if topk is None else topk.cpu(),
                            [None if x is None else x.records.cpu() for x in (moved.k, moved.v, moved.index_k)])
    (out_t, topk_t, caches_t), (out_r, topk_r, caches_r) = results["triton"], results["torch"]
    for a, b in zip(caches_t, caches_r):
        assert (a is None and b is None) or torch.equal(a, b), "cache bytes differ"
    if sparse:
        assert torch.equal(topk_t, topk_r)
    rel = float((out_t - out_r).norm() / out_r.norm())
    assert rel < ATTN_REL_TOL, f"layer output relative difference {rel:.2e}"


def _exact_records(gen, pages, index_k_dtype):
    """Index-K records of dyadic keys (exact in either format): MXFP4 [pages, 1, 8704] or fp8 [pages, 1, 16896]."""
    from atom_mxfp4.index_k import fp8_data_view, fp8_scale_view, quantize_fp8
    keys = torch.randint(-8, 9, (pages * 128, 128), generator=gen).float() / 4
    if index_k_dtype == "mxfp4":
        records = torch.zeros(pages, 1, RECORD, dtype=torch.uint8)
        data, scale = quantize_mxfp4(keys)
        records[:, 0, :8192] = data.view(pages, 8192)
        records[:, 0, 8192:] = scale.view(pages, 512)
        return records
    records = torch.zeros(pages, 1, FP8_RECORD_BYTES, dtype=torch.uint8)
    data, scale = quantize_fp8(keys)
    fp8_data_view(records).copy_(data.view(pages, 1, 128, 128))
    fp8_scale_view(records).copy_(scale.view(pages, 1, 128, 4))
    return records


@pytest.mark.parametrize("index_k_dtype", ["mxfp4", "fp8"])
@pytest.mark.parametrize("shape", ["prefill", "scattered", "two-heads"])
def test_tiled_scorer_gives_the_reference_ids(shape, index_k_dtype, monkeypatch):
    """The prefill-shaped scorer (``IndexConfig(tile_rows=...)``: a program per tile of one request's consecutive
    rows, each page decoded once per tile) returns the torch reference's ids bit for bit: two requests' chunks whose
    row counts are not whole tiles (prefill), rows of random requests in random order (every row its own tile, the
    tile map's worst case), and two index heads sharing a tile."""
    from atom_mxfp4.kernels.triton.index_topk import IndexConfig, tile_starts
    gen = _gen(len(shape) * 31 + len(index_k_dtype))
    pages, max_blocks, heads, requests = 24, 7, 1, 3
    records = _exact_records(gen, pages, index_k_dtype)
    block_table = torch.stack([torch.randperm(pages, generator=gen)[:max_blocks] for _ in range(requests)]).int()
    if shape == "scattered":
        rows = 23
        row_request = torch.randint(0, requests, (rows,), generator=gen, dtype=torch.int32)
        row_position = torch.randint(0, max_blocks * 128, (rows,), generator=gen, dtype=torch.int32)
    else:  # request 0: a 37-token chunk after a 300-token prefix; request 2: its first 290 tokens
        heads = 2 if shape == "two-heads" else 1
        row_request = torch.tensor([0] * 37 + [2] * 290, dtype=torch.int32)
        row_position = torch.cat([torch.arange(300, 337), torch.arange(0, 290)]).int()
        rows = row_request.shape[0]
    idx_q = (torch.randint(-4, 5, (rows, heads, 128), generator=gen).float() / 2).bfloat16()
    args = (idx_q, records, block_table, row_request, row_position)
    kwargs = dict(topk=4, init_blocks=1, local_blocks=1, index_k_dtype=index_k_dtype)
    ref = torch_backend.index_topk(*args, **kwargs)
    for tile_rows in (16, 32) if shape == "prefill" else (16,):
        ours = triton_backend.index_topk(*(a.to(DEVICE) for a in args), config=IndexConfig(tile_rows=tile_rows),
                                         **kwargs).cpu()
        assert torch.equal(ours, ref), f"tile_rows {tile_rows}: top-k ids differ:\n{ours}\n{ref}"
    # the tiles in reverse order (the GPU runs them in any order; the interpreter in this one): a tile that wrote
    # rows past its request's run would now overwrite the run's own tile
    module = sys.modules["atom_mxfp4.kernels.triton.index_topk"]
    forward = module.tile_starts

    def reversed_tiles(row_request, block_m):
        starts = forward(row_request, block_m)
        count = int((starts >= 0).sum())
        return torch.cat([starts[:count].flip(0), starts[count:]])

    monkeypatch.setattr(module, "tile_starts", reversed_tiles)
    ours = triton_backend.index_topk(*(a.to(DEVICE) for a in args), config=IndexConfig(tile_rows=16), **kwargs).cpu()
    assert torch.equal(ours, ref), f"tiles reversed: top-k ids differ:\n{ours}\n{ref}"
    starts = tile_starts(row_request, 16)
    if shape == "prefill":  # 37 rows: tiles at 0, 16, 32; 290 rows from 37: every 16th
        assert starts[:22].tolist() == [0, 16, 32] + list(range(37, 327, 16)) and bool((starts[22:] == -1).all())


def test_tiled_scorer_refuses_a_tile_narrower_than_the_heads():
    from atom_mxfp4.kernels.triton.index_topk import IndexConfig
    gen = _gen(5)
    records = _exact_records(gen, 4, "mxfp4")
    idx_q = torch.zeros(3, 5, 128, dtype=torch.bfloat16)  # 5 heads: 8 rounded up
    table, req, pos = torch.zeros(1, 2, dtype=torch.int32), torch.zeros(3, dtype=torch.int32), torch.zeros(3,
                                                                                                             dtype=torch.int32)
    with pytest.raises(ValueError, match=r"config.tile_rows must be 16 or 32 and >= the index heads "
                                         r"rounded up to a power of two \(8\), got 4"):
        triton_backend.index_topk(*(a.to(DEVICE) for a in (idx_q, records, table, req, pos)), topk=2,
                                  init_blocks=0, local_blocks=1, config=IndexConfig(tile_rows=4))


@pytest.mark.parametrize("tile_rows", [16, 32])
def test_ops_index_topk_tile_rows_runs_the_tiled_scorer(tile_rows, monkeypatch):
    """``ops.index_topk(tile_rows=...)`` (what the layer passes for a prefill batch) launches the tiled scorer on the
    Triton backend, with the reference's ids; a tile size the scorer has not is refused by name, checked or not."""
    from atom_mxfp4 import ops
    module = sys.modules["atom_mxfp4.kernels.triton.index_topk"]
    gen = _gen(40 + tile_rows)
    records = _exact_records(gen, 8, "fp8")
    block_table = torch.randperm(8, generator=gen)[:5].int()[None]
    row_request = torch.zeros(70, dtype=torch.int32)
    row_position = torch.arange(500, 570, dtype=torch.int32)
    idx_q = (torch.randint(-4, 5, (70, 1, 128), generator=gen).float() / 2).bfloat16()
    args = (idx_q, records, block_table, row_request, row_position)
    kwargs = dict(topk=3, init_blocks=1, local_blocks=1, index_k_dtype="fp8")
    made = []
    monkeypatch.setattr(module, "tile_starts", lambda r, m, real=module.tile_starts: made.append(m) or real(r, m))
    ours = ops.index_topk(*(a.to(DEVICE) for a in args), tile_rows=tile_rows, backend="triton", **kwargs).cpu()
    assert made == [tile_rows] and torch.equal(ours, ops.index_topk(*args, backend="torch", **kwargs))
    for check, error in ((True, "tile_rows must be None, 16 or 32, got 64"), (False, "tile_rows must be None, 16 "
                                                                                     "or 32, got 64")):
        with pytest.raises(ValueError, match=error):
            ops.index_topk(*(a.to(DEVICE) for a in args), tile_rows=64, backend="triton", check=check, **kwargs)
