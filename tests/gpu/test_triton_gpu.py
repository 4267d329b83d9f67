"""Triton backend on a CUDA GPU (marker ``gpu``; run on the lent H200 by scripts/gpu_run.sh, skipped elsewhere).

Larger irregular shapes than the CPU tests, against the torch backend on the CPU (bit-exact where DESIGN says so,
the named attention tolerance otherwise), and CUDA-graph capture + replay equal to eager, bit for bit.
"""


import numpy as np
import pytest
import torch
import triton
import triton.language as tl

from atom_mxfp4.kernels.triton._mxfp4 import Decode, load_tokens
from atom_mxfp4.layout import RECORD_BYTES, qkv_width

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device (scripts/gpu_run.sh)")]

from _helpers import attention_rows, capture_then_replay, index_case, refill_index_case  # noqa: E402

RECORD = RECORD_BYTES
RECORD_C = tl.constexpr(RECORD_BYTES)  # what a @triton.jit body may read (a plain global is refused since 3.6)
ATTN_REL_TOL = 3e-3  # as tests/test_triton_ops.py: bf16 output + bf16 probabilities, measured ~7e-4, band x3
DEV = torch.device("cuda")


def _backends():
    import atom_mxfp4.kernels.torch as torch_backend
    import atom_mxfp4.kernels.triton as triton_backend
    return triton_backend, torch_backend


def _decode_case(gen, rows, group, width, lens):
    """Each row its own pages; valid random codes below context_lens, garbage (scale 255/254/0) above."""
    pages = rows * width + 3
    k = torch.randint(0, 256, (pages, 1, RECORD), generator=gen, dtype=torch.int32).to(torch.uint8)
    v = torch.randint(0, 256, (pages, 1, RECORD), generator=gen, dtype=torch.int32).to(torch.uint8)
    for rec in (k, v):
        choice = torch.randint(0, 3, (pages, 512), generator=gen)
        rec[:, 0, 8192:] = torch.where(choice == 0, 255, torch.where(choice == 1, 254, 0)).to(torch.uint8)
    tables = torch.randperm(pages, generator=gen)[:rows * width].view(rows, width).int().contiguous()
    for r, n in enumerate(lens):
        for p in range((n + 127) // 128):
            valid = min(128, n - p * 128)
            for rec in (k, v):
                scales = rec[tables[r, p], 0, 8192:].view(128, 4)
                scales[:valid] = torch.randint(120, 134, (valid, 4), generator=gen, dtype=torch.int32).to(torch.uint8)
    q = torch.randn(rows, group, 128, generator=gen).bfloat16()
    return q, k, v, tables, torch.tensor(lens, dtype=torch.int32)


@triton.jit
def _dequant_kernel(records, out, DECODE: tl.constexpr):
    page = tl.program_id(0).to(tl.int64)
    token = tl.arange(0, 128)
    values = load_tokens(records + page * RECORD_C, token, token < 128, 128, True, DECODE)
    tl.store(out + page * 128 * 128 + token[:, None] * 128 + tl.arange(0, 128)[None, :], values)


@pytest.mark.parametrize("decode", list(Decode), ids=lambda d: d.name.lower())
def test_tile_dequantize_bit_exact(decode):
    """The decode of one record tile (load_tokens, as pa_decode uses it) vs format.dequantize_mxfp4, bit for bit:
    every code byte in every position, scale bytes 2..254 (writers emit 1..254; 1 is left out because 0.5 * 2**-126
    is an fp32 subnormal, which the interpreter's bf16 conversion flushes - the ptx path's own subnormal, code 1
    as bf16 2**-127 before its two multiplies, is exercised by every byte)."""
    from atom_mxfp4.format import dequantize_mxfp4
    pages = 4
    rec = torch.empty(pages, 1, RECORD, dtype=torch.uint8)
    gen = torch.Generator().manual_seed(3)
    rec[:, 0, :8192] = torch.stack([torch.randperm(256, generator=gen) for _ in range(32 * pages)]).view(pages, 8192)
    rec[:, 0, 8192:] = (torch.arange(pages * 512) % 253 + 2).view(pages, 512).to(torch.uint8)
    out = torch.empty(pages, 128, 128, dtype=torch.bfloat16, device=DEV)
    _dequant_kernel[(pages,)](rec.to(DEV), out, DECODE=decode.value)
    ref = dequantize_mxfp4(rec[:, 0, :8192].view(pages, 128, 64), rec[:, 0, 8192:].view(pages, 128, 4),
                           torch.bfloat16)
    assert torch.equal(out.cpu().view(torch.int16), ref.view(torch.int16))


@pytest.mark.parametrize("asm", [False, True], ids=["triton_decode", "ptx_decode"])
@pytest.mark.parametrize("rows,group,width,splits", [(37, 16, 33, None), (300, 16, 16, None), (5, 7, 65, 9)])
def test_pa_decode_large_vs_fp64(rows, group, width, splits, asm):
    triton_backend, _ = _backends()
    from atom_mxfp4.kernels.triton.pa_decode import DecodeConfig
    gen = torch.Generator().manual_seed(rows + width)
    lens = torch.randint(0, width * 128 + 1, (rows,), generator=gen).tolist()
    lens[0], lens[-1] = 0, width * 128
    q, k, v, tables, context_lens = _decode_case(gen, rows, group, width, lens)
    scale = 128 ** -0.5
    ref = attention_rows(q.double().numpy(), k, v, tables, context_lens, scale)
    plan = triton_backend.make_plan(rows, width, group, DEV, num_splits=splits,
                                    config=DecodeConfig(asm=asm))
    out = torch.full((rows, group, 128), float("nan"), dtype=torch.bfloat16, device=DEV)
    triton_backend.pa_decode(out, q.to(DEV), k.to(DEV), v.to(DEV), tables.to(DEV), context_lens.to(DEV),
                             softmax_scale=scale, query_scale=None, plan=plan)
    got = out.float().cpu().numpy()
    assert np.isfinite(got).all()
    assert (got[np.array(lens) == 0] == 0).all()
    rel = np.linalg.norm(got - ref) / np.linalg.norm(ref)
    assert rel < ATTN_REL_TOL, f"relative error {rel:.2e} (splits={plan.splits_for(rows, width)[0]})"


@pytest.mark.parametrize("larger_plan", [False, True], ids=["own-plan", "larger-plan"])
@pytest.mark.parametrize("rows,width", [(8, 64), (200, 16)], ids=["split", "direct"])
def test_pa_decode_cuda_graph_replay_equals_eager(rows, width, larger_plan):
    """Replay equals eager with plan=None, bit for bit, with the call's own plan and with one plan made for more
    rows and wider tables (atom_mxfp4.plan: one plan per batch serves every layer)."""
    triton_backend, _ = _backends()
    gen = torch.Generator().manual_seed(7 * rows)
    lens = torch.randint(1, width * 128 + 1, (rows,), generator=gen).tolist()
    q, k, v, tables, context_lens = (x.to(DEV) for x in _decode_case(gen, rows, 16, width, lens))
    plan = (triton_backend.make_plan(3 * rows + 7, 4 * width, 16, DEV) if larger_plan
            else triton_backend.make_plan(rows, width, 16, DEV))
    out = torch.empty(rows, 16, 128, dtype=torch.bfloat16, device=DEV)
    args = dict(softmax_scale=0.08, query_scale=None, plan=plan)

    def refill():  # new contents in the same buffers (as a decode step would), then replay vs eager
        q.copy_(torch.randn(q.shape, generator=gen).bfloat16().to(DEV))
        context_lens.copy_(torch.randint(0, width * 128 + 1, (rows,), generator=gen, dtype=torch.int32).to(DEV))

    capture_then_replay(lambda: triton_backend.pa_decode(out, q, k, v, tables, context_lens, **args), refill)
    replayed = out.clone()
    eager = torch.empty_like(out)
    triton_backend.pa_decode(eager, q, k, v, tables, context_lens, **dict(args, plan=None))
    assert torch.equal(replayed.view(torch.int16), eager.view(torch.int16))


@pytest.mark.parametrize("asm,index_k_dtype", [(False, "mxfp4"), (True, "mxfp4"), (True, "fp8")],
                         ids=["triton_decode", "ptx_decode", "fp8"])
@pytest.mark.parametrize("rows,max_blocks", [(300, 97), (3, 333)])
def test_index_topk_and_tables_large_bit_exact(rows, max_blocks, asm, index_k_dtype):
    triton_backend, torch_backend = _backends()
    from atom_mxfp4.kernels.triton.index_topk import IndexConfig
    gen = torch.Generator().manual_seed(rows * max_blocks)
    args = index_case(gen, rows, max_blocks, index_k_dtype=index_k_dtype)
    kwargs = dict(topk=16, init_blocks=1, local_blocks=1, index_k_dtype=index_k_dtype)
    ours = triton_backend.index_topk(*(a.to(DEV) for a in args), **kwargs,
                                     config=IndexConfig(asm=asm))
    ref = torch_backend.index_topk(*args, **kwargs)
    assert torch.equal(ours.cpu(), ref), int((ours.cpu() != ref).sum())
    _, _, block_table, row_request, row_position = args
    tables, lens = triton_backend.build_sparse_tables(ours, block_table.to(DEV), row_request.to(DEV),
                                                      row_position.to(DEV), num_kv_heads=1, pages_per_block=1)
    ref_tables, ref_lens = torch_backend.build_sparse_tables(ref, block_table, row_request, row_position,
                                                             num_kv_heads=1, pages_per_block=1)
    assert torch.equal(tables.cpu(), ref_tables) and torch.equal(lens.cpu(), ref_lens)


@pytest.mark.parametrize("index_k_dtype", ["mxfp4", "fp8"])
def test_index_and_tables_cuda_graph_replay_equals_eager(index_k_dtype):
    triton_backend, _ = _backends()
    gen = torch.Generator().manual_seed(3)
    idx_q, records, block_table, row_request, row_position = (
        a.to(DEV) for a in index_case(gen, 64, 40, index_k_dtype=index_k_dtype))
    kwargs = dict(topk=16, init_blocks=0, local_blocks=1, index_k_dtype=index_k_dtype)

    def step():
        ids = triton_backend.index_topk(idx_q, records, block_table, row_request, row_position, **kwargs)
        return ids, *triton_backend.build_sparse_tables(ids, block_table, row_request, row_position,
                                                         num_kv_heads=1, pages_per_block=1)

    outputs = []  # the last one: what the captured call allocated, as the replay left it
    capture_then_replay(lambda: outputs.append(step()), lambda: refill_index_case(gen, idx_q, row_position, 40))
    eager = step()
    for a, b in zip(outputs[-1], eager):
        assert torch.equal(a, b)


@pytest.mark.parametrize("mode,index_k_dtype,rot", [("ceil", "mxfp4", 64), ("floor", "mxfp4", 64), ("mse", "mxfp4", 64),
                                                    ("mse", "fp8", 64), ("mse", "fp8", 128), ("ceil", "mxfp4", 96)])
def test_fused_write_large_bit_exact(mode, index_k_dtype, rot):
    """1000 tokens under each of write_config's three launch shapes (small, medium, large) against the torch
    backend: rotary_dim 64 / 128 take the halves form of q and idx_q rows (``_norm_rope_halves``), 96 the general
    one."""
    from atom_mxfp4.kernels.triton.qknorm_rope_write import write_config
    from atom_mxfp4.index_k import IndexKDtype
    triton_backend, torch_backend = _backends()
    gen = torch.Generator().manual_seed(len(mode) + rot)
    tokens, nq, nkv, niq, pages = 1000, 16, 1, 1, 9
    width = qkv_width(nq, nkv, niq)
    qkv = (torch.randn(tokens, width, generator=gen) * 3).bfloat16()
    positions = torch.randint(0, 4096, (tokens,), generator=gen)
    weights = [torch.randn(128, generator=gen) * 0.3 for _ in range(4)]
    angles = torch.rand(4096, rot // 2, generator=gen) * 6
    cos_sin = torch.cat([angles.cos(), angles.sin()], 1).float().contiguous()
    slots = torch.randperm(pages * 128, generator=gen)[:tokens]
    slots[::7] = -1

    def run(backend, device, **config):
        k = torch.zeros(pages, nkv, RECORD, dtype=torch.uint8, device=device)
        v = torch.zeros_like(k)
        ik = torch.full((pages, 1, IndexKDtype.parse(index_k_dtype).record_bytes), 0xA5, dtype=torch.uint8,
                        device=device)  # garbage the write must leave where no token lands
        q, iq = backend.fused_qknorm_rope_write(
            qkv.to(device), positions.to(device), *(w.to(device) for w in weights), cos_sin.to(device),
            slots.to(device), k, v, ik, num_q_heads=nq, num_kv_heads=nkv, num_index_heads=niq, rotary_dim=rot,
            eps=1e-6, scale_mode=mode, q_dtype=torch.bfloat16, index_k_dtype=index_k_dtype, **config)
        return [x.cpu() for x in (q, iq, k, v, ik)]

    ref = run(torch_backend, "cpu")
    for shape in (1, 512, 8192):
        ours = run(triton_backend, DEV, config=write_config(shape))
        for name, a, b in zip(("q", "idx_q", "k", "v", "index_k"), ours, ref):
            assert torch.equal(a.view(torch.uint8), b.view(torch.uint8)), (name, write_config(shape))
