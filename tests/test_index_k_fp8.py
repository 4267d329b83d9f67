"""The fp8 index-K (``index_k_dtype="fp8"``, atom_mxfp4.index_k): codec against a scalar oracle written from the
docstring's text, the fused write bit-exact between backends and against that oracle, index_topk ids equal between
backends and a per-row loop on exact scores, refusals naming the argument, the layer end to end."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import _helpers as H
import test_ops_write as W

from atom_mxfp4 import ops
from atom_mxfp4.cache import FP8IndexKCache, MXFP4PageCache
from atom_mxfp4.index_k import FP8_RECORD_BYTES, IndexKDtype, dequantize_fp8, quantize_fp8
from atom_mxfp4.layer import AttentionMetadata, LayerCaches, LayerConfig, SparseMXFP4Attention

BACKENDS = ["torch", "triton"]
FP8_DATA = 128 * 128  # where the scale bytes of an fp8 record start


# ---- scalar oracle (from the text of atom_mxfp4/index_k.py) ------------------------------------------------------
def e4m3_magnitudes() -> list[float]:
    """Value of the non-negative codes 0..126 (exponent field 0: m * 2**-9; else 2**(E - 7) * (1 + m / 8))."""
    out = []
    for code in range(127):
        exp, man = code >> 3, code & 7
        out.append(man * 2.0**-9 if exp == 0 else 2.0 ** (exp - 7) * (1 + man / 8))
    return out


MAGS = e4m3_magnitudes()


def scalar_scale_byte(block: list[float]) -> int:
    """The smallest s with 448 * 2**s >= amax (finite values), as e8m0 byte s + 127 clamped to [1, 254]."""
    amax = max([abs(x) for x in block if math.isfinite(x)] + [0.0])
    if amax == 0.0:
        return 1
    s = -200
    while 448.0 * 2.0**s < amax:
        s += 1
    return min(254, max(1, s + 127))


def scalar_code(x: float, e: int) -> int:
    if math.isnan(x):
        return 0
    v = min(abs(x) / 2.0 ** (e - 127), 448.0)  # Inf saturates
    best = 0
    for c in range(127):
        d_new, d_best = abs(v - MAGS[c]), abs(v - MAGS[best])
        if d_new < d_best or (d_new == d_best and c % 2 == 0):
            best = c
    return best | (0x80 if x < 0 and best != 0 else 0)


def scalar_quantize(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """x [N, 128] fp32 -> (data [N, 128] uint8, scale [N, 4] uint8), one element at a time."""
    rows = x.float().tolist()
    data, scale = [], []
    for row in rows:
        es = [scalar_scale_byte(row[b * 32:(b + 1) * 32]) for b in range(4)]
        data.append([scalar_code(v, es[d // 32]) for d, v in enumerate(row)])
        scale.append(es)
    return torch.tensor(data, dtype=torch.uint8), torch.tensor(scale, dtype=torch.uint8)


# ---- codec ---------------------------------------------------------------------------------------------------------
def test_codec_matches_scalar_oracle_on_hard_values():
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(24, 128, generator=gen) * torch.exp(3 * torch.randn(24, 1, generator=gen))
    x[0] = 0.0
    x[1, :32] = torch.tensor([448.0 * 2**-5, 1.75 * 2**-3, 1.8 * 2**-3] + [0.0] * 29)  # amax at the scale edges
    x[2, 5], x[2, 40], x[2, 70] = float("inf"), float("-inf"), float("nan")
    x[3] = -1e-30
    x[3, ::32] = 1e6  # the -1e-30 underflow to byte 0 under the block's scale, never -0 (0x80)
    x[4, :32] = 2.0 ** torch.arange(-16, 16).float()  # every binade
    x[5, :32] = torch.tensor(MAGS[:32]) * (1 + 2**-5)  # near ties
    # exact ties between two e4m3 values (block amax 448 -> scale byte 127, v = x)
    x[6, :32] = torch.tensor([448.0] + [(MAGS[c] + MAGS[c + 1]) / 2 for c in range(40, 71)])
    x[7, :32] = torch.tensor([448.0] + [(MAGS[c] + MAGS[c + 1]) / 2 for c in range(0, 31)])  # subnormal ties
    x[8] = 3e38  # the largest scales
    data, scale = quantize_fp8(x)
    want_data, want_scale = scalar_quantize(x)
    assert torch.equal(scale, want_scale), (scale != want_scale).nonzero()[:4]
    assert torch.equal(data, want_data), (data != want_data).nonzero()[:4]
    assert scale[0].tolist() == [1] * 4 and data[0].eq(0).all()
    assert data[3].reshape(4, 32)[:, 1:].eq(0).all()
    assert data[2, 70] == 0 and data[2, 5] == 0x7E and data[2, 40] == 0xFE  # NaN -> 0, +-Inf -> +-448
    assert 1 <= int(scale.min()) and int(scale.max()) <= 254


def test_every_code_decodes_to_its_value():
    data = torch.arange(256, dtype=torch.uint8).reshape(2, 128)
    values = dequantize_fp8(data, torch.full((2, 4), 127, dtype=torch.uint8), torch.float64).flatten()
    for code in range(256):
        mag = code & 0x7F
        want = math.nan if mag == 0x7F else (-1 if code & 0x80 else 1) * MAGS[mag]
        got = float(values[code])
        assert (math.isnan(got) and math.isnan(want)) or got == want, (code, got, want)
    scaled = dequantize_fp8(data[:1], torch.tensor([[1, 100, 200, 240]], dtype=torch.uint8), torch.float64)[0]
    for d in (3, 40, 77, 120):
        assert float(scaled[d]) == MAGS[d] * 2.0 ** ([1, 100, 200, 240][d // 32] - 127)  # writers: e <= 247


def test_fp8_round_trip_is_finer_than_mxfp4():
    x = torch.randn(64, 128, generator=torch.Generator().manual_seed(1))
    err8 = (dequantize_fp8(*quantize_fp8(x)) - x).norm() / x.norm()
    from atom_mxfp4.format import ScaleMode, dequantize_mxfp4, quantize_mxfp4
    err4 = (dequantize_mxfp4(*quantize_mxfp4(x, ScaleMode.MSE)) - x).norm() / x.norm()
    assert err8 < 0.04 and err8 < err4 / 3, (err8, err4)


def test_record_views_and_bytes():
    assert IndexKDtype.FP8.bytes_per_token == 132 and IndexKDtype.MXFP4.bytes_per_token == 68
    cache = FP8IndexKCache(3)
    assert cache.records.shape == (3, 1, FP8_RECORD_BYTES) and cache.nbytes == 3 * 16896
    cache.data[1, 0, 5, 7] = 0xAB
    cache.scale[2, 0, 127, 3] = 0xCD
    assert cache.records[1, 0, 5 * 128 + 7] == 0xAB and cache.records[2, 0, FP8_DATA + 127 * 4 + 3] == 0xCD
    assert cache.records.sum() == 0xAB + 0xCD


# ---- fused write -------------------------------------------------------------------------------------------------
def expected_fp8_records(inp, eps=1e-6) -> torch.Tensor:
    """The index-K records after the write, by the scalar oracle on api.md's norm / RoPE arithmetic."""
    T, nq, nkv, niq, rd = (inp["qkv"].shape[0], inp["nq"], inp["nkv"], inp["niq"], inp["rotary_dim"])
    cs = inp["cs"].numpy()[inp["positions"].numpy()]
    start = (nq + 2 * nkv + niq) * H.D
    idx_k = W.norm_rope(inp["qkv"][:, start:start + H.D].reshape(T, 1, H.D), inp["w"][3], cs, rd, eps)
    data, scale = scalar_quantize(torch.from_numpy(idx_k[:, 0]))
    rec = inp["ik"].clone()
    for t, slot in enumerate(inp["slots"].tolist()):
        if slot >= 0:
            page, off = slot // 128, slot % 128
            rec[page, 0, off * 128:(off + 1) * 128] = data[t]
            rec[page, 0, FP8_DATA + off * 4:FP8_DATA + off * 4 + 4] = scale[t]
    return rec


def fp8_inputs(T, nq, nkv, niq, seed):
    inp = W.make_inputs(T, nq, nkv, niq, seed=seed)
    gen = torch.Generator().manual_seed(seed + 1)
    inp["ik"] = torch.randint(0, 256, (inp["k"].shape[0], 1, FP8_RECORD_BYTES), generator=gen,
                              dtype=torch.int32).to(torch.uint8)  # garbage in every unowned byte
    return inp


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("T, nq, nkv, niq", [(1, 16, 1, 1), (37, 4, 1, 1), (45, 2, 2, 2)])
def test_fused_write_fp8_index_k_bit_exact(backend, T, nq, nkv, niq):
    inp = fp8_inputs(T, nq, nkv, niq, seed=T + nq)
    assert (inp["slots"] == -1).any() or T == 1
    want_q, want_iq, want_k, want_v, _ = W.expected(inp, "mse", 1e-6, torch.bfloat16)
    want_ik = expected_fp8_records(inp)
    as_cache = T == 37
    if as_cache:  # the typed cache object is accepted too
        ik = FP8IndexKCache(records=inp["ik"])
        inp = dict(inp, ik=ik)
    q, idx_q = W.call(inp, backend, mode="mse", index_k_dtype="fp8")
    got_ik = inp["ik"].records if as_cache else inp["ik"]
    assert W.bytes_equal(q, want_q) and W.bytes_equal(idx_q, want_iq)
    assert torch.equal(inp["k"], want_k) and torch.equal(inp["v"], want_v)
    assert torch.equal(got_ik, want_ik), f"{int((got_ik != want_ik).sum())} index-K bytes differ"


def test_fused_write_fp8_empty_and_all_skipped():
    for backend in BACKENDS:
        inp = fp8_inputs(5, 4, 1, 1, seed=9)
        inp["slots"][:] = -1
        before = inp["ik"].clone()
        W.call(inp, backend, index_k_dtype="fp8")
        assert torch.equal(inp["ik"], before), backend
        empty = fp8_inputs(1, 4, 1, 1, seed=9)
        for key in ("qkv", "positions", "slots"):
            empty[key] = empty[key][:0]
        q, idx_q = W.call(empty, backend, index_k_dtype="fp8")
        assert q.shape == (0, 4, H.D) and idx_q.shape == (0, 1, H.D)


def test_fused_write_refuses_a_cache_of_the_other_dtype():
    inp = fp8_inputs(4, 4, 1, 1, seed=2)
    with pytest.raises(ValueError, match=r"index_k_cache.shape must be \[pages, heads, 8704\], got \[.*16896\]"):
        W.call(inp, "torch", index_k_dtype="mxfp4")  # fp8 records under an explicit "mxfp4"
    mx = dict(inp, ik=torch.zeros(inp["k"].shape[0], 1, H.RECORD, dtype=torch.uint8))
    with pytest.raises(ValueError, match=r"index_k_cache.shape must be \[pages, heads, 16896\] \(index_k_dtype "
                       r"'fp8'\), got \[.*8704\]"):
        W.call(mx, "torch", index_k_dtype="fp8")
    typed = dict(inp, ik=MXFP4PageCache(inp["k"].shape[0], 1))
    with pytest.raises(ValueError, match="index_k_cache \\(a MXFP4PageCache\\) must be an index-K cache of "
                       "index_k_dtype 'fp8', got one of 'mxfp4'"):
        W.call(typed, "torch", index_k_dtype="fp8")
    with pytest.raises(ValueError, match=r"index_k_dtype must be one of \['mxfp4', 'fp8'\], got 'fp4'"):
        W.call(inp, "torch", index_k_dtype="fp4")
    for backend in BACKENDS:  # the Triton launcher re-checks the record width even under check=False
        with pytest.raises(ValueError, match="index_k_cache"):
            W.call(mx, backend, index_k_dtype="fp8", check=False)


# ---- index_topk --------------------------------------------------------------------------------------------------
def make_fp8_problem(lens, rows_at, niq=1, seed=0, extra_pages=3):
    """fp8 index-K records (garbage outside owned tokens, NaN bytes included) + block table; exact scores: idx_q small
    integers, keys e4m3 values (magnitude <= 15, 4 significant bits) times scales 2**-2..2**2, so every product is a
    multiple of 2**-11 and every sum is exact in fp32."""
    gen = torch.Generator().manual_seed(seed)
    nblocks = [(n + 127) // 128 for n in lens]
    total = sum(nblocks) + extra_pages
    records = torch.randint(0, 256, (total, 1, FP8_RECORD_BYTES), generator=gen, dtype=torch.int32).to(torch.uint8)
    perm = torch.randperm(total, generator=gen).tolist()
    table = torch.full((len(lens), max(max(nblocks), 1)), perm[-1], dtype=torch.int32)
    keys, used = [], 0
    codes = torch.tensor([c for c in range(256) if (c & 0x7F) <= 0x58], dtype=torch.uint8)  # |v| <= 15
    for r, n in enumerate(lens):
        pages = perm[used:used + nblocks[r]]
        used += nblocks[r]
        table[r, :len(pages)] = torch.tensor(pages, dtype=torch.int32)
        data = codes[torch.randint(0, codes.numel(), (n, 128), generator=gen)]
        scale = torch.randint(125, 130, (n, 4), generator=gen, dtype=torch.int32).to(torch.uint8)
        for t in range(n):
            page, off = pages[t // 128], t % 128
            records[page, 0, off * 128:(off + 1) * 128] = data[t]
            records[page, 0, FP8_DATA + off * 4:FP8_DATA + off * 4 + 4] = scale[t]
        keys.append(dequantize_fp8(data, scale, torch.float64).numpy())
    return dict(records=records, block_table=table, keys=keys, **H.query_rows(lens, rows_at, niq, gen))


def _rows(r, n):
    return sorted({0, n - 1, min(n - 1, 127), min(n - 1, 128), (n * 7) // 11})


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("lens, niq, topk, init_blocks, local_blocks",
                         [([1, 97, 129, 300, 520], 1, 2, 1, 1), ([257, 400], 2, 2, 0, 1)])
def test_index_topk_fp8_ids(backend, lens, niq, topk, init_blocks, local_blocks):
    import test_ops_index as I
    prob = make_fp8_problem(lens, _rows, niq=niq, seed=len(lens) + niq)
    want = I.reference_topk(prob, topk, init_blocks, local_blocks)
    got = ops.index_topk(prob["idx_q"], prob["records"], prob["block_table"], prob["row_request"],
                         prob["row_position"], topk=topk, init_blocks=init_blocks, local_blocks=local_blocks,
                         index_k_dtype="fp8", backend=backend)
    assert np.array_equal(got.numpy(), want), np.argwhere(got.numpy() != want)[:4]
    typed = ops.index_topk(prob["idx_q"].float(), FP8IndexKCache(records=prob["records"]), prob["block_table"],
                           prob["row_request"], prob["row_position"], topk=topk, init_blocks=init_blocks,
                           local_blocks=local_blocks, index_k_dtype="fp8", backend=backend)  # the fp32 dot too
    assert np.array_equal(typed.numpy(), want)


def test_index_topk_fp8_sees_what_mxfp4_cannot():
    """Two blocks whose keys differ only below the e2m1 grid: the fp8 index-K ranks them as the exact scores do."""
    base = torch.full((256, 128), 1.0)
    base[128 + 60, 100] = 1.2  # block 1 holds one token 20% larger in one channel (inside e2m1's 1 -> 1.5 step)
    q = torch.zeros(1, 1, 128, dtype=torch.bfloat16)
    q[0, 0, 100] = 1.0
    table = torch.tensor([[0, 1, 2]], dtype=torch.int32)
    row = dict(row_request=torch.tensor([0], dtype=torch.int32), row_position=torch.tensor([300], dtype=torch.int32))
    values = torch.cat([base, torch.full((128, 128), -1.0)]).reshape(3, 128, 128)  # block 2 (own) is forced
    fp8 = FP8IndexKCache(3)
    data, scale = quantize_fp8(values.reshape(-1, 128))
    fp8.data[:, 0] = data.reshape(3, 128, 128)
    fp8.scale[:, 0] = scale.reshape(3, 128, 4)
    mx = MXFP4PageCache(records=H.records_from_values(values, "mse"))
    kw = dict(topk=2, init_blocks=0, local_blocks=1)
    assert ops.index_topk(q, fp8, table, **row, index_k_dtype="fp8", **kw)[0, 0].tolist() == [1, 2]
    assert ops.index_topk(q, mx, table, **row, **kw)[0, 0].tolist() == [0, 2]  # a tie, to the smaller id


# ---- layer -------------------------------------------------------------------------------------------------------
def test_layer_config_index_k_dtype():
    assert LayerConfig().index_k_dtype is IndexKDtype.FP8  # the default (docs/accuracy.md, "Index-K dtype")
    assert LayerConfig(index_k_dtype="mxfp4").index_k_dtype is IndexKDtype.MXFP4
    assert LayerConfig(index_k_dtype="FP8").index_k_dtype is IndexKDtype.FP8
    for bad in ("fp4", 8, None):
        with pytest.raises(ValueError, match=rf"index_k_dtype must be one of \['mxfp4', 'fp8'\], got {bad!r}"):
            LayerConfig(index_k_dtype=bad)
    caches = LayerCaches.allocate(LayerConfig(index_k_dtype="fp8"), 4)
    assert isinstance(caches.index_k, FP8IndexKCache) and caches.index_k.records.shape == (4, 1, 16896)
    assert LayerCaches.allocate(LayerConfig(sparse=False, index_k_dtype="fp8"), 4).index_k is None


def test_layer_fp8_index_k_backends_agree_and_refuse_a_wrong_cache():
    from atom_mxfp4.synthetic import make_request, make_weights
    config = LayerConfig(num_q_heads=2, topk=2, max_position=1024, index_k_dtype="fp8")
    weights = make_weights(config, 3)
    n, new = 390, 3
    request = make_request(config, n, [100, 200], n - new, seed=3)
    table = torch.randperm(12, generator=torch.Generator().manual_seed(0))[:4].int()[None]
    results = {}
    for backend in BACKENDS:
        caches = LayerCaches.allocate(config, 12)
        layer = SparseMXFP4Attention(config, weights, backend=backend)
        # the prompt: written by the torch backend, not attended (interpreter time; the write is compared above)
        meta = AttentionMetadata.for_requests(table, [0], [n - new])
        w = layer.weights_on("cpu")
        ops.fused_qknorm_rope_write(request.qkv[: n - new], meta.positions, w["q_norm"], w["k_norm"],
                                    w["idx_q_norm"], w["idx_k_norm"], layer.cos_sin_cache("cpu"), meta.slot_mapping,
                                    caches.k, caches.v, caches.index_k, num_q_heads=2, num_kv_heads=1,
                                    num_index_heads=1, index_k_dtype="fp8", backend="torch")
        out, topk = layer(request.qkv[n - new:], AttentionMetadata.for_requests(table, [n - new], [new]), caches,
                          return_topk=True)
        results[backend] = (out, topk, caches.index_k.records.clone())
    assert torch.equal(results["torch"][2], results["triton"][2])  # cache bytes bit-exact
    assert torch.equal(results["torch"][1], results["triton"][1])  # same top-k ids
    rel = (results["torch"][0].float() - results["triton"][0].float()).norm() / results["torch"][0].float().norm()
    assert rel < H.ATTN_REL_TOL
    wrong = LayerCaches.allocate(LayerConfig(num_q_heads=2, topk=2, max_position=1024, index_k_dtype="mxfp4"), 12)
    layer = SparseMXFP4Attention(config, weights, backend="torch")
    with pytest.raises(ValueError, match="caches.index_k \\(a MXFP4PageCache\\) must be an index-K cache of "
                       "index_k_dtype 'fp8'"):
        layer(request.qkv[:5], AttentionMetadata.for_requests(table, [0], [5]), wrong)
    assert wrong.index_k.records.eq(0).all() and wrong.k.records.eq(0).all()  # refused before any write


def test_index_k_dtype_none_reads_the_caches_own():
    """index_k_dtype=None (the ops' default): a records tensor's width or a cache object's type decides, and the
    result equals the explicit dtype's, for the write and for index_topk."""
    inp = fp8_inputs(9, 4, 1, 1, seed=4)
    explicit = dict(inp, ik=inp["ik"].clone())
    W.call(explicit, "torch", mode="mse", index_k_dtype="fp8")
    W.call(inp, "torch", mode="mse")  # 16896-B records: fp8
    assert torch.equal(inp["ik"], explicit["ik"])
    prob = make_fp8_problem([300, 129], _rows, seed=5)
    args = (prob["idx_q"], prob["records"], prob["block_table"], prob["row_request"], prob["row_position"])
    want = ops.index_topk(*args, topk=2, index_k_dtype="fp8", backend="torch")
    assert torch.equal(ops.index_topk(*args, topk=2, backend="torch"), want)
    typed = (args[0], FP8IndexKCache(records=prob["records"])) + args[2:]
    assert torch.equal(ops.index_topk(*typed, topk=2, backend="torch"), want)
    with pytest.raises(ValueError, match=r"index_k_cache.shape must be \[pages, heads, 8704\], got \[3, 1, 100\]"):
        ops.index_topk(args[0], torch.zeros(3, 1, 100, dtype=torch.uint8), *args[2:], topk=2, backend="torch")
