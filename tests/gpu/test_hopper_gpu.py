"""The Hopper (Gluon) backend on an sm_90 GPU (marker ``gpu``; skipped without one): run on the H200 (docs/hopper.md).

- the decoded MMA operands, stored from their registers, bit for bit against ``format.dequantize_mxfp4`` at the
  (token, head dim) of the lane map (every code byte, scale bytes 1..254; the one-multiply decode: x 2**-63 over its
  window);
- the one-multiply pass gives the exact pass's bits (``HopperConfig(fast_decode=False)``), and a program that meets a
  scale byte or a query element outside the window takes the exact pass (bit for bit the exact-only kernel);
- pa_decode against the fp64 oracle (tests/_helpers.attention_rows) and the torch backend, with the tolerance of
  tests/gpu/test_triton_gpu.py: irregular context lengths (0, 1, partial pages, full tables), GQA groups 16 and 7,
  split and direct paths, bf16 and e4m3 queries, query_scale; every byte the rows do not own is poison (random codes
  with scale bytes 255 / 254 / 0), unused table entries point at poison pages, ``out`` starts as NaN;
- non-finite semantics as the torch backend's; through ``atom_mxfp4.ops`` with check=True;
- the split merge over a thread-block cluster (each split merges 16 / S heads from the others' shared memory) and
  through L2 (the row's last split): both against the oracle at every cluster size, both warp counts, close to each
  other;
- CUDA-graph replay equals eager, bit for bit (split over a cluster, split through L2, direct);
- the split tail (``HopperConfig.tail_splits``, 3 by default: a last wave of at most one program per SM): the
  oracle, the direct launch's bits before the tail, graph replay, the dense attend's bits against pa_decode over its
  tables;
- the in-warp page overlap (``HopperConfig.overlap``, off by default): the default kernel's bits (direct, split,
  either warp count, 3 or 4 stages, the exact fallback pass, the dense attend), the oracle;
- the fused ``attend`` (block table and top-k ids read in the launch): pa_decode's bits over the composition's tables
  (dense and sparse, 1-8 KV heads, 1-4 pages per block, forced and policy splits), the oracle, graph replay;
- last (a failure there breaks the CUDA context): table entries past the context hold page ids far outside the cache.
"""

import importlib

import numpy as np
import pytest
import torch

SM90 = torch.cuda.is_available() and torch.cuda.get_device_capability() == (9, 0)
pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device (scripts/gpu_run.sh)"),
              pytest.mark.skipif(torch.cuda.is_available() and not SM90, reason="the Gluon kernel is sm_90 only")]

import _helpers as H  # noqa: E402

from triton.experimental import gluon  # noqa: E402
from triton.experimental.gluon import language as gl  # noqa: E402
from triton.experimental.gluon.language.nvidia.ampere import async_copy  # noqa: E402

import atom_mxfp4.kernels.hopper as hopper_backend  # noqa: E402
from atom_mxfp4 import ops  # noqa: E402
import atom_mxfp4.kernels.torch as torch_backend  # noqa: E402
from atom_mxfp4.kernels.hopper import layout as L  # noqa: E402

P = importlib.import_module("atom_mxfp4.kernels.hopper.pa_decode")  # the module (the package exports the function)

ATTN_REL_TOL = 3e-3  # as tests/gpu/test_triton_gpu.py: bf16 output + bf16 probabilities, measured ~7e-4, band x3
DEV = torch.device("cuda")


def _case(gen, rows, group, width, lens, q_dtype=torch.bfloat16):
    """Rows of their own pages: valid random codes (scales 122..132) below context_lens; every other byte of every
    record is poison (random codes, scales 255 / 254 / 0); table entries past a row's context point at poison pages
    no row owns."""
    pages = rows * width + 5
    k, v = H.garbage_records(gen, pages, 1), H.garbage_records(gen, pages, 1)
    order = torch.randperm(pages, generator=gen)
    tables = order[:rows * width].view(rows, width).int().contiguous()
    poison = order[rows * width:]
    for r, n in enumerate(lens):
        used = -(-n // L.PAGE_SIZE)
        for p in range(used):
            valid = min(L.PAGE_SIZE, n - p * L.PAGE_SIZE)
            for rec in (k, v):
                data, scale = H.random_codes(gen, valid)
                page = int(tables[r, p])
                rec[page, 0, :valid * L.DATA_BYTES] = data.flatten()
                rec[page, 0, L.SCALE_OFFSET:L.SCALE_OFFSET + valid * L.SCALE_BYTES] = scale.flatten()
        tables[r, used:] = poison[torch.randint(0, len(poison), (width - used,), generator=gen)].int()
    q = torch.randn(rows, group, L.HEAD_DIM, generator=gen)
    q = (q * 0.5).to(q_dtype) if q_dtype == torch.float8_e4m3fn else q.to(q_dtype)
    return q, k, v, tables, torch.tensor(lens, dtype=torch.int32)


def _irregular_lens(gen, rows, width):
    """Random context lengths in [0, 128 x width], the first row's table full, the last row empty (one row: full);
    from 4 rows on, one row of one token and one of one token into its second page."""
    lens = torch.randint(0, width * 128 + 1, (rows,), generator=gen).tolist()
    lens[0], lens[-1] = width * 128, 0 if rows > 1 else width * 128
    if rows > 3:
        lens[1], lens[2] = 1, min(129, width * 128)  # one token; one into its second page where there is one
    return lens


def _run(q, k, v, tables, lens, scale, query_scale=None, num_splits=None, config=None):
    rows, group, _ = q.shape
    plan = hopper_backend.make_plan(rows, tables.shape[1], group, DEV, num_splits=num_splits, config=config)
    out = torch.full((rows, group, L.HEAD_DIM), float("nan"), dtype=torch.bfloat16, device=DEV)
    qs = query_scale.to(DEV) if isinstance(query_scale, torch.Tensor) else query_scale
    hopper_backend.pa_decode(out, q.to(DEV), k.to(DEV), v.to(DEV), tables.to(DEV), lens.to(DEV),
                             softmax_scale=scale, query_scale=qs, plan=plan)
    return out.float().cpu().numpy(), plan


def _oracle(q, k, v, tables, lens, scale, query_scale=None):
    """fp64 attention per row (the per-row query_scale folded into the softmax scale)."""
    q64 = q.double().numpy()
    if query_scale is None or not isinstance(query_scale, torch.Tensor):
        factor = 1.0 if query_scale is None else float(query_scale)
        return H.attention_rows(q64, k, v, tables, lens, scale * factor)
    return np.concatenate([H.attention_rows(q64[r:r + 1], k, v, tables[r:r + 1], lens[r:r + 1],
                                            scale * float(query_scale[r])) for r in range(q.shape[0])])


def _check(got, ref, lens):
    lens = np.asarray(lens)
    assert np.isfinite(got).all(), "non-finite output (poison reached it, or a row was not written)"
    assert (got[lens == 0] == 0).all()
    rel = np.linalg.norm(got - ref) / np.linalg.norm(ref)
    assert rel < ATTN_REL_TOL, f"relative error {rel:.2e}"
    return rel


# ---- the decode, register by register ------------------------------------------------------------------------------
@gluon.jit
def _operands_kernel(k_ptr, v_ptr, tables_ptr, context, page_end, kt_ptr, v_out_ptr, FAST: gl.constexpr):
    """Copy page 0 of the table as pa_decode does, decode both operands, store them [w, k, n] from their registers
    (w warps: the launch's num_warps, 4 or 8; 128 / w tokens per warp)."""
    W: gl.constexpr = gl.num_warps()
    T: gl.constexpr = 128 // W
    B: gl.constexpr = P._b_operand(W)
    k_codes = gl.allocate_shared_memory(gl.int32, [1, P.PAGE, P.CODE_WORDS], P.RING_CODES)
    k_scales = gl.allocate_shared_memory(gl.int32, [1, P.PAGE], P.RING_SCALES)
    v_codes = gl.allocate_shared_memory(gl.int32, [1, P.PAGE, P.CODE_WORDS], P.RING_CODES)
    v_scales = gl.allocate_shared_memory(gl.int32, [1, P.PAGE], P.RING_SCALES)
    P._issue_page(k_ptr, v_ptr, P._page_id(tables_ptr, 0, 0, 1, 1, 0, 0, page_end, P.TABLES, 1),
                  context, 0, page_end, 0,
                  k_codes, k_scales, v_codes, v_scales)
    async_copy.commit_group()
    async_copy.wait_group(0)
    P.cta_barrier()
    kt = P._k_operand(k_codes, k_scales, 0, FAST)  # [W, 128, T]
    w = gl.arange(0, W, layout=gl.SliceLayout(1, gl.SliceLayout(2, B)))
    k = gl.arange(0, 128, layout=gl.SliceLayout(0, gl.SliceLayout(2, B)))
    n = gl.arange(0, T, layout=gl.SliceLayout(0, gl.SliceLayout(1, B)))
    gl.store(kt_ptr + w[:, None, None] * (128 * T) + k[None, :, None] * T + n[None, None, :], kt)
    even_words, odd_words, v_scale_even, v_scale_odd = P._v_load(v_codes, v_scales, 0)
    v = P._v_operand(even_words, odd_words, v_scale_even, v_scale_odd, FAST)  # [W, T, 128]
    t = gl.arange(0, T, layout=gl.SliceLayout(0, gl.SliceLayout(2, B)))
    c = gl.arange(0, 128, layout=gl.SliceLayout(0, gl.SliceLayout(1, B)))
    gl.store(v_out_ptr + w[:, None, None] * (128 * T) + t[None, :, None] * 128 + c[None, None, :], v)


def _operands_match(seed, scale_bytes, fast, reference, warps=L.WARPS):
    """Pages whose 8192 code bytes are 32 permutations of 0..255 and whose scale bytes sweep ``scale_bytes`` (each in
    every block position over the 4 pages): the K^T and V operands decoded from the registers (the one-multiply
    decode when ``fast``) hold, bit for bit, ``reference(values fp32 [128 tokens, 128 dims])`` as bf16 at the lane
    map's (token, head dim)."""
    from atom_mxfp4.format import dequantize_mxfp4
    from atom_mxfp4.layout import data_view, scale_view

    gen = torch.Generator().manual_seed(seed)
    qk_dim = torch.tensor([L.qk_dim(k) for k in range(L.HEAD_DIM)])
    pv_dim = torch.tensor([L.pv_dim(n) for n in range(L.HEAD_DIM)])
    tokens = L.tokens_per_warp(warps)
    w, k, n = torch.meshgrid(torch.arange(warps), torch.arange(128), torch.arange(tokens), indexing="ij")
    wv, t, c = torch.meshgrid(torch.arange(warps), torch.arange(tokens), torch.arange(128), indexing="ij")
    for page in range(4):
        rec = torch.empty(1, 1, L.RECORD_BYTES, dtype=torch.uint8)
        rec[0, 0, :L.SCALE_OFFSET] = torch.stack([torch.randperm(256, generator=gen) for _ in range(32)]).flatten()
        rec[0, 0, L.SCALE_OFFSET:] = scale_bytes[(torch.arange(512) + 128 * page) % len(scale_bytes)]
        ref = reference(dequantize_mxfp4(data_view(rec)[0, 0], scale_view(rec)[0, 0], torch.float32))
        ref = ref.bfloat16().view(torch.int16)
        words = rec.to(DEV).view(torch.int32)
        kt = torch.empty(warps, 128, tokens, dtype=torch.bfloat16, device=DEV)
        v = torch.empty(warps, tokens, 128, dtype=torch.bfloat16, device=DEV)
        tables = torch.zeros(1, dtype=torch.int32, device=DEV)
        _operands_kernel[(1,)](words, words, tables, 128, 1, kt, v, fast, num_warps=warps)
        assert torch.equal(kt.cpu().view(torch.int16), ref[tokens * w + n, qk_dim[k]])
        assert torch.equal(v.cpu().view(torch.int16), ref[tokens * wv + t, pv_dim[c]])


@pytest.mark.parametrize("warps", L.PROGRAM_WARPS)
def test_decoded_operands_bit_exact(warps):
    """The exact decode: every code byte, scale bytes 1..254 (the values are exact in bf16, or its Inf)."""
    _operands_match(3, torch.arange(1, 255, dtype=torch.uint8), False, lambda values: values, warps)


@pytest.mark.parametrize("warps", L.PROGRAM_WARPS)
def test_one_multiply_operands_are_the_exact_values_times_2_to_the_minus_63(warps):
    """The one-multiply decode: every code byte, every scale byte of the window and 0 (exact: normal or zero)."""
    inside = torch.tensor([0] + list(range(L.WINDOW_LOW, L.WINDOW_HIGH + 1)), dtype=torch.uint8)
    _operands_match(4, inside, True, lambda values: values * 2.0 ** -L.WINDOW_SHIFT, warps)


# ---- pa_decode -----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("rows,group,width,splits", [(37, 16, 33, None), (300, 16, 16, None), (5, 7, 65, 9),
                                                     (512, 16, 8, 1), (1, 16, 64, None), (3, 1, 2, 2),
                                                     (4, 16, 7, 2), (2, 16, 16, None), (3, 16, 12, 12)])
def test_pa_decode_vs_fp64_and_torch_backend(rows, group, width, splits):
    gen = torch.Generator().manual_seed(rows + width)
    lens = _irregular_lens(gen, rows, width)
    q, k, v, tables, context_lens = _case(gen, rows, group, width, lens)
    scale = 128 ** -0.5
    got, plan = _run(q, k, v, tables, context_lens, scale, num_splits=splits)
    if splits is not None:
        assert plan.num_splits == min(splits, width)
    _check(got, _oracle(q, k, v, tables, context_lens, scale), lens)
    ref = torch.empty(rows, group, L.HEAD_DIM, dtype=torch.bfloat16)
    torch_backend.pa_decode(ref, q, k, v, tables, context_lens, softmax_scale=scale, query_scale=None, plan=None)
    ref = ref.float().numpy()
    assert np.linalg.norm(got - ref) / max(np.linalg.norm(ref), 1e-30) < ATTN_REL_TOL


@pytest.mark.parametrize("warps", L.PROGRAM_WARPS)
@pytest.mark.parametrize("rows,group,width,splits", [(37, 16, 33, None), (300, 16, 16, 1), (5, 7, 65, 9),
                                                     (1, 16, 64, None), (3, 1, 2, 2), (4, 16, 7, 2),
                                                     (2, 16, 16, None)])
def test_both_warp_counts_vs_fp64(warps, rows, group, width, splits):
    """Either program (4 warps x 32 tokens of each page, 8 x 16: ``HopperConfig.warps`` forced; the policy picks 8
    where each SM holds at most one program) against the oracle: irregular lengths, poison past every context."""
    gen = torch.Generator().manual_seed(100 + rows + width)
    lens = _irregular_lens(gen, rows, width)
    case = _case(gen, rows, group, width, lens)
    got, _ = _run(*case, 0.09, num_splits=splits, config=P.HopperConfig(warps=warps))
    _check(got, _oracle(*case, 0.09), lens)


@pytest.mark.parametrize("warps", L.PROGRAM_WARPS)
@pytest.mark.parametrize("rows,width,splits", [(37, 33, None), (300, 16, None), (5, 65, 9), (3, 2, 2)])
def test_one_multiply_pass_gives_the_exact_pass_bits(rows, width, splits, warps):
    """Scales 122..132 (inside the window), poison past every context: the default kernel takes the one-multiply pass
    (hopper_bench times it against the exact-only kernel) and must give the same bits (at either warp count)."""
    gen = torch.Generator().manual_seed(31 + rows)
    lens = torch.randint(0, width * 128 + 1, (rows,), generator=gen).tolist()
    lens[0] = width * 128
    case = _case(gen, rows, 16, width, lens)
    fast, _ = _run(*case, 0.09, num_splits=splits, config=P.HopperConfig(warps=warps))
    exact, _ = _run(*case, 0.09, num_splits=splits, config=P.HopperConfig(warps=warps, fast_decode=False))
    assert np.array_equal(fast, exact)
    _check(fast, _oracle(*case, 0.09), lens)


@pytest.mark.parametrize("warps", L.PROGRAM_WARPS)
@pytest.mark.parametrize("splits", [1, 4])
def test_a_program_outside_the_window_takes_the_exact_pass(splits, warps):
    """Owned tokens whose scale bytes the one-multiply decode cannot take (200: its constant overflows; 30: the values
    underflow), and a query element of 2**70: those programs must redo their pages exactly (bit for bit the exact-only
    kernel; the one-multiply values would be Inf / NaN / 0 there); the other rows stay on the fast pass."""
    rows, group, width = 6, 16, 8
    gen = torch.Generator().manual_seed(23)
    lens = [1024, 700, 1024, 300, 1024, 513]
    q, k, v, tables, context_lens = _case(gen, rows, group, width, lens)
    scale_at = lambda row, token: (int(tables[row, token // 128]), L.SCALE_OFFSET + (token % 128) * 4)  # noqa: E731
    page, at = scale_at(0, 900)
    k[page, 0, at + 1] = 200  # one K block of one token, of the row's last split
    for token in range(700):  # row 1: every token's V block 2 at scale 2**-97: the exact output there is ~1e-29
        page, at = scale_at(1, token)
        v[page, 0, at + 2] = 30
    page, at = scale_at(3, 5)
    v[page, 0, at] = 255  # a NaN scale in an owned token: NaN through both passes
    q[4, 2, 17] = 2.0 ** 70
    got, _ = _run(q, k, v, tables, context_lens, 0.09, num_splits=splits, config=P.HopperConfig(warps=warps))
    want, _ = _run(q, k, v, tables, context_lens, 0.09, num_splits=splits,
                   config=P.HopperConfig(warps=warps, fast_decode=False))
    assert np.array_equal(got, want, equal_nan=True)
    assert np.isfinite(got[[0, 1, 2, 4, 5]]).all() and (got[1, :, 64:96] != 0).any()
    assert np.isnan(got[3]).any()


@pytest.mark.parametrize("warps", L.PROGRAM_WARPS)
@pytest.mark.parametrize("splits", [1, 4])
def test_o_rescale_when_only_the_upper_heads_maximum_moves(splits, warps):
    """The O rescale is skipped by a warp whose factors are all 1 (``_loop._rescale``: a vote over registers 0
    and 2, heads g and g + 8). Here heads 0..7 attend with q = 0 (every logit 0: their maximum never moves after a
    program's first page) while heads 8..15 meet, on page 5 of 8, one token in every 16 (so in every warp of either
    program) whose logit is ~11.4 (log2) above the rest (> RESCALE_SLACK): only the g + 8 registers' factors differ
    from 1 there. A vote that missed them would leave O of heads 8..15 unscaled (the earlier pages weighted 2**11 too
    much): the oracle catches it."""
    rows, group, width = 2, 16, 8
    gen = torch.Generator().manual_seed(41)
    lens = [width * 128, width * 128 - 50]
    q, k, v, tables, context_lens = _case(gen, rows, group, width, lens)
    q.zero_()
    q[:, 8:, 0] = 8.0  # head dim 0 only: logit = 8 x k[t, 0] x scale
    for r, n in enumerate(lens):
        for t in range(n):
            page, offset = int(tables[r, t // 128]), t % 128
            big = t // 128 == 5 and offset % 16 == 5  # one token in every 16 (every warp of either program)
            k[page, 0, offset * L.DATA_BYTES] = (k[page, 0, offset * L.DATA_BYTES] & 0xF0) | (0x7 if big else 0x2)
            k[page, 0, L.SCALE_OFFSET + offset * L.SCALE_BYTES] = 128 if big else 127  # 6 x 2 = 12, else 1.0
    scale = 0.09  # logits 8 x 0.09 = 0.72 (1.04 in log2), the big ones 8.64 (12.5 in log2)
    got, _ = _run(q, k, v, tables, context_lens, scale, num_splits=splits, config=P.HopperConfig(warps=warps))
    ref = _oracle(q, k, v, tables, context_lens, scale)
    _check(got, ref, lens)
    for head in (0, 8):  # each half on its own against the oracle (a wrong upper half hides in the whole's norm)
        part = np.linalg.norm(got[:, head:head + 8] - ref[:, head:head + 8]) / np.linalg.norm(ref[:, head:head + 8])
        assert part < ATTN_REL_TOL, (head, part)


def test_an_unchecked_context_past_the_table_merges_only_its_own_splits():
    """Input ops refuses (check=False): rows 0 and 2 claim 3 pages past their 4-page tables. The decode reads no entry
    past the table and the L2 merge no partial past the row's 2 splits (``_used_splits`` is clamped): row 0's output
    does not depend on row 1's data, whose partials follow row 0's slots, and the last row's merge stays inside a
    workspace of exactly rows x 2 slots (compute-sanitizer: sanitize_cases.py)."""
    gen = torch.Generator().manual_seed(61)
    rows, width = 3, 4
    q, k, v, tables, context_lens = _case(gen, rows, 16, width, [width * 128, 300, width * 128])
    context_lens[0] = context_lens[2] = (width + 3) * 128
    config = P.HopperConfig(cluster=False)
    first, plan = _run(q, k, v, tables, context_lens, 0.09, num_splits=2, config=config)
    assert plan.part_out.shape[0] == rows * 2  # no slot to spare past the last row's
    other = q.clone()
    other[1] = -3 * other[1]  # row 1's partials change
    second, _ = _run(other, k, v, tables, context_lens, 0.09, num_splits=2, config=config)
    assert np.array_equal(first[0], second[0], equal_nan=True)
    assert not np.array_equal(first[1], second[1])


@pytest.mark.parametrize("splits,config", [(1, None), (3, P.HopperConfig(cluster=False)),
                                           (3, P.HopperConfig(cluster=False, warps=8)), (5, None), (None, None)])
def test_an_unchecked_length_past_the_table_reads_as_the_whole_table(splits, config):
    """check=False skips the lengths-inside-the-table check: a length past 128 x width (up to 2**31 - 1) is read as
    the whole table and a negative one as 0, by the decode (``_row_source``) and the merge (``_used_splits``) alike:
    the same bits as the checked call with the clamped lengths (tests/test_contracts_decode.py holds the other
    backends to the same)."""
    gen = torch.Generator().manual_seed(62)
    rows, width = 4, 5
    q, k, v, tables, _ = _case(gen, rows, 16, width, [width * 128, 0, width * 128, width * 128])
    past = torch.tensor([(width + 2) * 128, -5, 2 ** 31 - 1, width * 128 + 1], dtype=torch.int32)
    clamped = torch.tensor([width * 128, 0, width * 128, width * 128], dtype=torch.int32)
    got, plan = _run(q, k, v, tables, past, 0.09, num_splits=splits, config=config)
    want, _ = _run(q, k, v, tables, clamped, 0.09, num_splits=splits, config=config)
    assert np.array_equal(got, want), (splits, plan.num_splits)
    assert (got[1] == 0).all()
    _check(got, _oracle(q, k, v, tables, clamped, 0.09), clamped.numpy())


def test_an_unchecked_position_past_the_table_attends_the_whole_table():
    """ops.attend, dense rows, check=False: a position past the request's block table (the DENSE source's context
    position + 1) is read as the whole table: the bits of the same rows at the table's last position (whose pages
    past the request's own hold garbage: NaN rows compare as bits)."""
    gen = torch.Generator().manual_seed(63)
    case = H.attend_case(gen, [700, 300, 129], 2, 16)
    dev, _, _ = _attend_inputs(case)
    width = case["block_table"].shape[1]
    plan = hopper_backend.make_plan(dev["q"].shape[0], width, 16, DEV)
    dev["row_position"][0] = width * 128 + 77
    dev["row_position"][-1] = 2 ** 31 - 2
    got = _attend(dev, torch.full_like(dev["q"], float("nan")), plan)
    dev["row_position"][0] = dev["row_position"][-1] = width * 128 - 1
    want = _attend(dev, torch.full_like(dev["q"], float("nan")), plan)
    assert torch.equal(got.view(torch.int16), want.view(torch.int16))  # (garbage pages past a request's own: NaN)


@pytest.mark.parametrize("query_scale", ["tensor", "number"])
def test_e4m3_query_and_query_scale(query_scale):
    rows, group, width = 9, 16, 12
    gen = torch.Generator().manual_seed(11)
    lens = torch.randint(1, width * 128 + 1, (rows,), generator=gen).tolist()
    q, k, v, tables, context_lens = _case(gen, rows, group, width, lens, q_dtype=torch.float8_e4m3fn)
    qs = torch.rand(rows, generator=gen) * 2 if query_scale == "tensor" else 0.75
    for splits in (1, None):
        got, _ = _run(q, k, v, tables, context_lens, 0.09, query_scale=qs, num_splits=splits)
        _check(got, _oracle(q, k, v, tables, context_lens, 0.09, qs), lens)


@pytest.mark.parametrize("warps", L.PROGRAM_WARPS)
@pytest.mark.parametrize("rows,group,width,splits", [(1, 16, 16, 16), (3, 16, 8, 8), (5, 7, 12, 4), (2, 16, 2, 2),
                                                     (8, 16, 64, 16), (4, 1, 33, 2), (1, 16, 64, 32),
                                                     (3, 7, 48, 48), (2, 16, 64, 64)])
def test_cluster_merge_vs_the_l2_merge_and_fp64(rows, group, width, splits, warps):
    """The same splits merged over a cluster (``HopperConfig.cluster=True``: every cluster size, 16 / S heads per CTA;
    32 / 48 / 64 splits: 2 / 3 / 4 clusters of 16 per row, their slices met through L2) and by the row's last split
    through L2 (False): both within the oracle's tolerance (irregular lengths: a row of 0 tokens, one of a full table,
    empty splits and empty clusters; GQA groups 16, 7 and 1: unused heads masked), and the two merges within a few
    bf16 rounding steps of each other (the same partials summed in another order)."""
    gen = torch.Generator().manual_seed(400 + rows * width + splits)
    lens = _irregular_lens(gen, rows, width)
    case = _case(gen, rows, group, width, lens)
    cluster, plan = _run(*case, 0.09, num_splits=splits, config=P.HopperConfig(warps=warps, cluster=True))
    assert plan.num_splits == splits and P.cluster_for(plan.config, rows, splits, DEV) == min(splits, 16)
    assert P._CLUSTERS_FIT and all(P._CLUSTERS_FIT.values()), P._CLUSTERS_FIT  # it ran as clusters, not through L2
    l2, _ = _run(*case, 0.09, num_splits=splits, config=P.HopperConfig(warps=warps, cluster=False))
    ref = _oracle(*case, 0.09)
    _check(cluster, ref, lens)
    _check(l2, ref, lens)
    assert np.linalg.norm(cluster - l2) / np.linalg.norm(l2) < 2e-3


@pytest.mark.parametrize("splits", [8, 16, 32])
def test_a_short_row_in_a_wide_table_spreads_over_every_split(splits):
    """Splits divide each row's own ceil(context / 128) pages, not the table's width (a served dense layer's table is
    the server's maximum context wide): a 6-page row in a 64-page table at 8 splits puts one page on each of splits
    0..5 (their partial lse finite, the rest empty: -inf), where dividing the width put all 6 on split 0 (on 0..2 at 32
    splits); a full row beside it takes width / splits pages a split as before. Through L2 and over clusters (grouped
    at 32), vs the oracle."""
    rows, group, width = 2, 16, 64
    lens = [5 * 128 + 3, width * 128]
    case = _case(torch.Generator().manual_seed(splits), rows, group, width, lens)
    ref = _oracle(*case, 0.09)
    got, plan = _run(*case, 0.09, num_splits=splits, config=P.HopperConfig(cluster=False))
    _check(got, ref, lens)
    lse = plan.part_lse.view(rows, splits, L.BLOCK_H)[:, :, :group].cpu()
    assert torch.isfinite(lse[0, :6]).all() and (lse[0, 6:] == float("-inf")).all(), lse[0, :, 0]
    assert torch.isfinite(lse[1]).all()
    clustered, _ = _run(*case, 0.09, num_splits=splits, config=P.HopperConfig(cluster=True))
    _check(clustered, ref, lens)


@pytest.mark.parametrize("rows,width,cluster", [(1, 16, 16), (1, 64, 16), (4, 64, 16), (8, 8, 8), (16, 4, 4)])
def test_the_h200_holds_every_cluster_the_policy_launches(rows, width, cluster):
    """The policy's cluster launches (one cluster of 16, 8 or 4 per row; 4 clusters of 16 per row at 1 x 64 pages)
    pass ``_clusters_fit`` on the H200, so none is quietly merged through L2 instead; and they are right."""
    P._CLUSTERS_FIT.clear()
    gen = torch.Generator().manual_seed(rows * 1000 + width)
    lens = _irregular_lens(gen, rows, width)
    case = _case(gen, rows, 16, width, lens)
    got, plan = _run(*case, 0.09)
    warps = P.warps_for(plan.config, rows * plan.num_splits, plan.pages_per_split, DEV)
    assert P.cluster_for(plan.config, rows, plan.num_splits, DEV, warps) == cluster
    assert len(P._CLUSTERS_FIT) == 1 and all(P._CLUSTERS_FIT.values()), P._CLUSTERS_FIT
    _check(got, _oracle(*case, 0.09), lens)


def test_direct_and_split_agree_and_split_count_follows_the_plan():
    rows, group, width = 24, 16, 40
    gen = torch.Generator().manual_seed(5)
    lens = torch.randint(0, width * 128 + 1, (rows,), generator=gen).tolist()
    case = _case(gen, rows, group, width, lens)
    direct, plan1 = _run(*case, 0.1, num_splits=1)
    split, plan8 = _run(*case, 0.1, num_splits=8)
    assert plan1.num_splits == 1 and plan8.num_splits == 8 and plan8.part_out is not None
    ref = _oracle(*case, 0.1)
    _check(direct, ref, lens)
    _check(split, ref, lens)


def test_non_finite_queries_follow_the_torch_backend():
    """A NaN query head makes that head's row NaN (every logit NaN); the other heads are untouched."""
    rows, group, width = 4, 16, 3
    gen = torch.Generator().manual_seed(9)
    lens = [300, 1, 128, 0]
    q, k, v, tables, context_lens = _case(gen, rows, group, width, lens)
    q[0, 3] = float("nan")
    q[2, 5, 7] = float("nan")
    for splits, cluster in ((1, None), (3, None), (2, True), (2, False)):  # 2: merged over a cluster / through L2
        got, _ = _run(q, k, v, tables, context_lens, 0.1, num_splits=splits, config=P.HopperConfig(cluster=cluster))
        ref = torch.empty(rows, group, L.HEAD_DIM, dtype=torch.bfloat16)
        torch_backend.pa_decode(ref, q, k, v, tables, context_lens, softmax_scale=0.1, query_scale=None, plan=None)
        assert np.array_equal(np.isnan(got), np.isnan(ref.float().numpy()))
        assert np.isnan(got[0, 3]).all() and np.isnan(got[2, 5]).all() and np.isfinite(got[1]).all()
        assert (got[3] == 0).all()


def test_through_the_ops_api_with_checks():
    from atom_mxfp4 import ops

    rows, group, width = 6, 16, 5
    gen = torch.Generator().manual_seed(13)
    lens = [640, 0, 77, 129, 1, 500]
    q, k, v, tables, context_lens = (x.to(DEV) for x in _case(gen, rows, group, width, lens))
    plan = ops.plan_pa_decode(rows, width, group, DEV, backend="hopper")
    out = torch.full((rows, group, L.HEAD_DIM), float("nan"), dtype=torch.bfloat16, device=DEV)
    ops.pa_decode(out, q, k, v, tables, context_lens, softmax_scale=0.1, plan=plan, backend="hopper", check=True)
    ref = torch.empty_like(out)
    ops.pa_decode(ref, q, k, v, tables, context_lens, softmax_scale=0.1, backend="torch")
    got, want = out.float().cpu().numpy(), ref.float().cpu().numpy()
    assert np.isfinite(got).all()
    assert np.linalg.norm(got - want) / np.linalg.norm(want) < ATTN_REL_TOL


@pytest.mark.parametrize("rows,width,splits", [(8, 64, None), (128, 64, None), (600, 4, 1), (16, 64, None),
                                              (2, 64, None), (1, 128, None)],
                         ids=["split", "split-wave", "direct", "split-8-warps", "split-cluster", "split-clusters"])
def test_pa_decode_cuda_graph_replay_equals_eager(rows, width, splits):
    gen = torch.Generator().manual_seed(7 * rows)
    lens = torch.randint(1, width * 128 + 1, (rows,), generator=gen).tolist()
    q, k, v, tables, context_lens = (x.to(DEV) for x in _case(gen, rows, 16, width, lens))
    plan = hopper_backend.make_plan(rows, width, 16, DEV, num_splits=splits)
    assert (plan.num_splits > 1) == (splits is None)
    warps = P.warps_for(plan.config, rows * plan.num_splits, plan.pages_per_split, DEV)
    assert warps == (8 if rows == 16 else 4), warps  # 16 x 64: 8 splits of 8 pages, 128 programs
    # 2 x 64: 32 splits over 2 clusters of 16, 1 x 128: 64 over 4 (grouped); the others (128 programs and more, or 3
    # splits) through L2
    assert P.cluster_for(plan.config, rows, plan.num_splits, DEV) == (16 if rows <= 2 else 1)
    assert plan.num_splits == {2: 32, 1: 64}.get(rows, plan.num_splits)
    _replay_equals_eager(gen, q, k, v, tables, context_lens, plan)


def _replay_equals_eager(gen, q, k, v, tables, context_lens, plan):
    """pa_decode captured once, replayed after new q and lengths are written into the same buffers (as a decode step
    would): bit for bit the eager call on them."""
    rows, width = tables.shape
    out = torch.empty(rows, 16, L.HEAD_DIM, dtype=torch.bfloat16, device=DEV)
    args = dict(softmax_scale=0.08, query_scale=None, plan=plan)

    def refill():
        q.copy_(torch.randn(q.shape, generator=gen).bfloat16().to(DEV))
        context_lens.copy_(torch.randint(0, width * 128 + 1, (rows,), generator=gen, dtype=torch.int32).to(DEV))

    H.capture_then_replay(lambda: hopper_backend.pa_decode(out, q, k, v, tables, context_lens, **args), refill)
    replayed = out.clone()
    eager = torch.empty_like(out)
    hopper_backend.pa_decode(eager, q, k, v, tables, context_lens, **args)
    assert torch.equal(replayed.view(torch.int16), eager.view(torch.int16))


ATTEND_CASES = {  # name: (request lengths, kv heads, group, topk (None: dense), pages per block, forced splits)
    "dense-nkv2": ([700, 1, 300, 129], 2, 16, None, 1, None),
    "dense-nkv8-split4": ([2000, 128, 33], 8, 6, None, 1, 4),
    "sparse16": ([3000, 2100, 64], 1, 16, 16, 1, None),
    "sparse-nkv4-ppb2": ([2600, 900, 257], 4, 12, 8, 2, None),
    "sparse-topk64-ppb4-direct": ([12000, 5000], 2, 16, 64, 4, 1),
    "sparse-many-rows": ([3000] * 12, 2, 16, 16, 1, None),  # 72 rows x 2 splits > 132 SMs: composed (fuses_sparse)
}


def _attend_inputs(case):
    dev = {key: (x.to(DEV) if isinstance(x, torch.Tensor) else x) for key, x in case.items()}
    if case["topk_blocks"] is None:
        tables, lens = ops.dense_tables(dev["block_table"], dev["row_request"], dev["row_position"],
                                        num_kv_heads=case["num_kv_heads"])
    else:
        tables, lens = (x.to(DEV) for x in torch_backend.build_sparse_tables(
            case["topk_blocks"], case["block_table"], case["row_request"], case["row_position"],
            num_kv_heads=case["num_kv_heads"], pages_per_block=case["pages_per_block"]))
    return dev, tables, lens


def _attend(dev, out, plan):
    """ops.attend on the Hopper backend, unchecked: the fused launch, or the composition where it declines."""
    return ops.attend(out, dev["q"], dev["k"], dev["v"], dev["block_table"], dev["row_request"], dev["row_position"],
                      num_kv_heads=dev["num_kv_heads"], topk_blocks=dev["topk_blocks"],
                      pages_per_block=dev["pages_per_block"], softmax_scale=0.09, plan=plan, backend="hopper",
                      check=False)


@pytest.mark.parametrize("name", list(ATTEND_CASES))
def test_attend_fused_equals_the_composition(name):
    """ops.attend on Hopper (the one launch reading the block table and the top-k ids, or the composition where
    ``fuses_sparse`` declines) gives pa_decode's bits over the tables the composition builds (torch backend's
    build_sparse_tables / ops.dense_tables), garbage pages and tokens included, wherever both split a row's pages
    alike (sparse rows of fewer blocks than top-k split otherwise: within 2e-3), and is within the tolerance of the
    fp64 oracle; backend=None runs the Hopper attend."""
    lens, nkv, group, topk, ppb, splits = ATTEND_CASES[name]
    gen = torch.Generator().manual_seed(len(name))
    case = H.attend_case(gen, lens, nkv, group, topk=topk, ppb=ppb)
    dev, tables, context_lens = _attend_inputs(case)
    rows = case["q"].shape[0]
    plan = hopper_backend.make_plan(rows, tables.shape[1], group, DEV, num_splits=splits)
    fused = topk is None or hopper_backend.fuses_sparse(rows, tables.shape[1], DEV, plan)
    assert fused == (name != "sparse-many-rows"), (name, fused)
    ran = hopper_backend.attend(torch.empty_like(dev["q"]), dev["q"], dev["k"], dev["v"], dev["block_table"],
                                dev["row_request"], dev["row_position"], num_kv_heads=nkv,
                                topk_blocks=dev["topk_blocks"], pages_per_block=ppb, softmax_scale=0.09,
                                query_scale=None, plan=plan)
    assert (ran is not None) == fused  # declined: None, and ops.attend composes
    want = torch.full_like(dev["q"], float("nan"))
    hopper_backend.pa_decode(want, dev["q"], dev["k"], dev["v"], tables, context_lens, softmax_scale=0.09,
                             query_scale=None, plan=plan)
    got = _attend(dev, torch.full_like(dev["q"], float("nan")), plan)
    # pa_decode divides a row's own pages over the splits, the sparse one launch the top-k table's width (its context
    # is known only after reducing the ids): same bits where both give the same pages a split, else the same partials
    # merged over other splits (a few bf16 rounding steps)
    pages = (context_lens.cpu().long() + L.PAGE_SIZE - 1) // L.PAGE_SIZE
    same = torch.ones_like(pages, dtype=torch.bool)
    if topk is not None and fused and plan.num_splits > 1:
        per_split = -(-pages // plan.num_splits)  # pa_decode's pages a split (at most pages_per_split)
        same = (pages == 0) | (per_split >= plan.pages_per_split)
        if splits is None:
            assert not same.all(), "the case should have a sparse row of fewer blocks than top-k"
    same, other = same.to(DEV), ~same.to(DEV)
    assert torch.equal(got[same].view(torch.int16), want[same].view(torch.int16)), "fused differs from composition"
    if other.any():
        diff = (got[other].float() - want[other].float()).norm() / want[other].float().norm()
        assert diff < 2e-3, f"fused vs composition over other splits: relative difference {diff:.2e}"
    ref = _oracle(case["q"], case["k"], case["v"], tables.cpu(), context_lens.cpu(), 0.09)
    _check(got.float().cpu().numpy(), ref, context_lens.cpu().numpy())
    assert ops.resolve_backend(None, DEV).attend is hopper_backend.attend
    checked = torch.full_like(dev["q"], float("nan"))
    ops.attend(checked, dev["q"], dev["k"], dev["v"], dev["block_table"], dev["row_request"], dev["row_position"],
               num_kv_heads=nkv, topk_blocks=dev["topk_blocks"], pages_per_block=ppb, softmax_scale=0.09, plan=plan,
               check=True)
    assert torch.equal(checked.view(torch.int16), got.view(torch.int16))


@pytest.mark.parametrize("kind", ["dense", "sparse"])
def test_attend_e4m3_query_and_query_scale(kind):
    """The query paths the fused kernel shares with pa_decode: e4m3 q and a per-row query_scale tensor, bit for bit
    against pa_decode over the composition's tables."""
    gen = torch.Generator().manual_seed(23)
    case = H.attend_case(gen, [900, 300], 2, 16, topk=None if kind == "dense" else 4)
    case["q"] = (case["q"].float() * 0.5).to(torch.float8_e4m3fn)
    dev, tables, context_lens = _attend_inputs(case)
    rows = case["q"].shape[0]
    scale = (torch.rand(rows, generator=gen) + 0.5).to(DEV)
    plan = hopper_backend.make_plan(rows, tables.shape[1], 16, DEV)
    want = torch.full(dev["q"].shape, float("nan"), dtype=torch.bfloat16, device=DEV)
    hopper_backend.pa_decode(want, dev["q"], dev["k"], dev["v"], tables, context_lens, softmax_scale=0.09,
                             query_scale=scale, plan=plan)
    got = torch.full_like(want, float("nan"))
    ops.attend(got, dev["q"], dev["k"], dev["v"], dev["block_table"], dev["row_request"], dev["row_position"],
               num_kv_heads=2, topk_blocks=dev["topk_blocks"], softmax_scale=0.09, query_scale=scale, plan=plan,
               backend="hopper", check=True)
    assert torch.equal(got.view(torch.int16), want.view(torch.int16))
    assert torch.isfinite(got.float()).all()


@pytest.mark.parametrize("name", ["sparse16", "dense-nkv2"])
def test_attend_cuda_graph_replay_equals_eager(name):
    """Captured once, replayed over another batch's contents in the same buffers (ids, positions, tables, q)."""
    lens, nkv, group, topk, ppb, _ = ATTEND_CASES[name]
    gen = torch.Generator().manual_seed(99)
    first, second = (H.attend_case(gen, lens, nkv, group, topk=topk, ppb=ppb) for _ in range(2))
    dev, tables, _ = _attend_inputs(first)
    plan = hopper_backend.make_plan(first["q"].shape[0], tables.shape[1], group, DEV)
    out = torch.empty_like(dev["q"])

    def refill():
        for key, x in second.items():
            if isinstance(x, torch.Tensor):
                dev[key].copy_(x.to(DEV))

    H.capture_then_replay(lambda: _attend(dev, out, plan), refill)
    replayed = out.clone()
    eager = _attend(dev, torch.empty_like(out), plan)
    assert torch.equal(replayed.view(torch.int16), eager.view(torch.int16))


# ---- the split tail (HopperConfig.tail_splits, 3 by default: policy.tail_for) -------------------------------------
TAIL = P.HopperConfig(tail_splits=3)


@pytest.mark.parametrize("rows,width,warps", [(430, 9, None), (800, 3, None), (850, 2, None), (500, 5, 8)])
def test_the_split_tail_vs_fp64_and_the_direct_launch(rows, width, warps):
    """A direct launch of more rows than a wave (3 programs x the SMs) runs the rows of its last, partial wave as 3
    splits each (2 on a 2-page table) merged in the launch: against the oracle (irregular lengths, tail rows of 0, 1
    and 129 tokens, poison everywhere else), and the rows before the tail bit for bit the direct launch's."""
    config = TAIL if warps is None else P.HopperConfig(tail_splits=3, warps=warps)
    gen = torch.Generator().manual_seed(rows + width)
    lens = _irregular_lens(gen, rows, width)
    lens[-2], lens[-3] = 1, 129
    case = _case(gen, rows, 16, width, lens)
    wave = config.programs_per_sm * P._sms(DEV)
    begin, tail, pages = P.tail_for(config, rows, width, 1, P.SOURCE_TABLES, DEV)
    assert (begin, tail) == (rows - rows % wave, min(3, width)) and rows - begin >= 3, (begin, tail, pages)
    got, plan = _run(*case, 0.09, config=config)
    assert plan.splits_for(rows, width)[0] == 1  # the policy's launch is direct: the tail is what splits
    _check(got, _oracle(*case, 0.09), lens)
    direct, _ = _run(*case, 0.09, config=P.HopperConfig(warps=warps, tail_splits=0))
    assert np.array_equal(got[:begin], direct[:begin]), "a row before the tail differs from the direct launch"
    rel = np.linalg.norm(got[begin:] - direct[begin:]) / np.linalg.norm(direct[begin:])
    assert rel < 2e-3, f"tail rows vs the direct launch: relative difference {rel:.2e}"


def test_the_split_tail_cuda_graph_replay_equals_eager():
    """The tail's arrival counters are reset by each row's merging split: a replay over new contents equals eager."""
    rows, width = 450, 6  # 396 rows direct, 54 rows of 3 splits of 2 pages
    gen = torch.Generator().manual_seed(45)
    lens = torch.randint(1, width * 128 + 1, (rows,), generator=gen).tolist()
    q, k, v, tables, context_lens = (x.to(DEV) for x in _case(gen, rows, 16, width, lens))
    plan = hopper_backend.make_plan(rows, width, 16, DEV, config=TAIL)
    assert P.tail_for(TAIL, rows, width, plan.num_splits, P.SOURCE_TABLES, DEV)[1] == 3
    _replay_equals_eager(gen, q, k, v, tables, context_lens, plan)


def test_the_dense_attend_with_the_split_tail_equals_pa_decode_over_its_tables():
    """The dense one launch takes the same tail as pa_decode over ops.dense_tables (the tail depends only on (rows,
    width)): the same bits, with a query_scale tensor and an e4m3 query."""
    gen = torch.Generator().manual_seed(31)
    case = H.attend_case(gen, [900, 300, 40, 129], 2, 16, rows_per_request=60)
    case["q"] = (case["q"].float() * 0.5).to(torch.float8_e4m3fn)
    dev, tables, context_lens = _attend_inputs(case)
    rows = case["q"].shape[0]
    assert rows > 3 * P._sms(DEV), rows  # more than one wave
    plan = hopper_backend.make_plan(rows, tables.shape[1], 16, DEV, config=TAIL)
    assert P.tail_for(TAIL, rows, tables.shape[1], plan.num_splits, P.SOURCE_DENSE, DEV)[1] > 1
    scale = (torch.rand(rows, generator=gen) + 0.5).to(DEV)
    want = torch.full(dev["q"].shape, float("nan"), dtype=torch.bfloat16, device=DEV)
    hopper_backend.pa_decode(want, dev["q"], dev["k"], dev["v"], tables, context_lens, softmax_scale=0.09,
                             query_scale=scale, plan=plan)
    got = torch.full_like(want, float("nan"))
    ops.attend(got, dev["q"], dev["k"], dev["v"], dev["block_table"], dev["row_request"], dev["row_position"],
               num_kv_heads=2, softmax_scale=0.09, query_scale=scale, plan=plan, backend="hopper", check=True)
    assert torch.equal(got.view(torch.int16), want.view(torch.int16))
    assert torch.isfinite(got.float()).all()


# ---- the in-warp page overlap (HopperConfig.overlap, off by default: _loop._stream) --------------------------------
@pytest.mark.parametrize("stages", [4, 3])
@pytest.mark.parametrize("warps", L.PROGRAM_WARPS)
@pytest.mark.parametrize("rows,width,splits", [(37, 33, None), (300, 16, 1), (5, 65, 9), (3, 2, 2), (4, 7, 7),
                                               (6, 1, 1), (1, 64, None)])
def test_the_in_warp_page_overlap_gives_the_default_bits(rows, width, splits, warps, stages):
    """Each warp loading the next page's K words a trip ahead changes where they are loaded, not what is decoded:
    the same bits as the default kernel (same plan: direct, split, one-page splits, 1-page tables, either warp
    count, a ring of 3 or 4 stages), and the oracle. Irregular lengths (0, 1, 129 tokens, partial last pages), poison
    past every context: the slot read ahead past a split's last page holds the zero-filled copy of no page."""
    gen = torch.Generator().manual_seed(500 + rows + width)
    lens = _irregular_lens(gen, rows, width)
    case = _case(gen, rows, 16, width, lens)
    want, _ = _run(*case, 0.09, num_splits=splits, config=P.HopperConfig(warps=warps, stages=stages))
    got, plan = _run(*case, 0.09, num_splits=splits, config=P.HopperConfig(warps=warps, stages=stages, overlap=True))
    assert plan.config.overlap and P.overlap_for(plan.config, P.SOURCE_TABLES)
    assert np.array_equal(got, want)
    _check(got, _oracle(*case, 0.09), lens)


@pytest.mark.parametrize("splits", [1, 4])
def test_the_in_warp_page_overlap_and_the_exact_fallback_pass(splits):
    """A program that meets a scale byte outside the one-multiply window redoes its pages exactly (without the
    overlap): with the overlap on, the same bits as the default kernel, NaN included."""
    rows, width = 4, 8
    gen = torch.Generator().manual_seed(27)
    lens = [1024, 700, 1024, 513]
    q, k, v, tables, context_lens = _case(gen, rows, 16, width, lens)
    page, at = int(tables[0, 900 // 128]), L.SCALE_OFFSET + (900 % 128) * 4
    k[page, 0, at + 1] = 200  # outside the window: row 0 takes the exact pass
    page, at = int(tables[2, 5 // 128]), L.SCALE_OFFSET + (5 % 128) * 4
    v[page, 0, at] = 255  # a NaN scale in an owned token
    want, _ = _run(q, k, v, tables, context_lens, 0.09, num_splits=splits)
    got, _ = _run(q, k, v, tables, context_lens, 0.09, num_splits=splits, config=P.HopperConfig(overlap=True))
    assert np.array_equal(got, want, equal_nan=True)
    assert np.isfinite(got[[0, 1, 3]]).all() and np.isnan(got[2]).any()


def test_the_dense_attend_with_the_overlap_equals_pa_decode_over_its_tables():
    """The dense one launch takes the overlap too (``overlap_for``; the sparse one never does): its bits are the
    default pa_decode's over ops.dense_tables (the same pages, the same split)."""
    gen = torch.Generator().manual_seed(33)
    case = H.attend_case(gen, [900, 300, 40, 129], 2, 16, rows_per_request=8)
    dev, tables, context_lens = _attend_inputs(case)
    rows = case["q"].shape[0]
    want = torch.full(dev["q"].shape, float("nan"), dtype=torch.bfloat16, device=DEV)
    hopper_backend.pa_decode(want, dev["q"], dev["k"], dev["v"], tables, context_lens, softmax_scale=0.09,
                             query_scale=None, plan=hopper_backend.make_plan(rows, tables.shape[1], 16, DEV))
    plan = hopper_backend.make_plan(rows, tables.shape[1], 16, DEV, config=P.HopperConfig(overlap=True))
    got = torch.full_like(want, float("nan"))
    ops.attend(got, dev["q"], dev["k"], dev["v"], dev["block_table"], dev["row_request"], dev["row_position"],
               num_kv_heads=2, softmax_scale=0.09, query_scale=None, plan=plan, backend="hopper", check=True)
    assert torch.equal(got.view(torch.int16), want.view(torch.int16))
    assert torch.isfinite(got.float()).all()


def test_table_entries_past_the_context_are_never_read():
    """Last in the file: a read of one of these page ids would fault (and break the CUDA context)."""
    rows, group, width = 5, 16, 6
    gen = torch.Generator().manual_seed(17)
    lens = [1, 130, 0, 768, 255]
    q, k, v, tables, context_lens = _case(gen, rows, group, width, lens)
    sane, _ = _run(q, k, v, tables, context_lens, 0.1, num_splits=1)
    for r, n in enumerate(lens):
        tables[r, -(-n // L.PAGE_SIZE):] = 2 ** 30
    for splits in (1, 3):
        got, _ = _run(q, k, v, tables, context_lens, 0.1, num_splits=splits)
        torch.cuda.synchronize()
        assert np.isfinite(got).all()
        if splits == 1:
            assert np.array_equal(got, sane)
