"""SparseMXFP4Attention (atom_mxfp4.layer) against the full-precision oracle (atom_mxfp4.reference), and the oracle
against an independent numpy implementation written here from DESIGN §2 / §5.

Tolerances (named, derived from data):
- ``ROUNDED_TOL``: layer vs the oracle whose K, V and index-K are rounded through the same codecs (``kv_round``: MXFP4;
  the index-K through ``index_k_round`` when the layer's is fp8):
  what is left is bf16 rounding of q (2**-9 relative) and of the output (2**-9), plus a band -> rel-L2 <= 2**-7.
- ``unrounded_tol(e_kv)``: layer vs the unquantized oracle: bounded by the measured MXFP4 round-trip rel-L2 of the
  actual K and V (``e_kv``, from the data of each case) times ``KV_ERROR_GAIN``, plus ROUNDED_TOL.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import _helpers as H

from atom_mxfp4.format import ScaleMode
from atom_mxfp4.layer import AttentionMetadata, LayerCaches, LayerConfig, SparseMXFP4Attention
from atom_mxfp4.layout import HEAD_DIM, PAGE_SIZE, qkv_rows
from atom_mxfp4.reference import attention_oracle

ROUNDED_TOL = 2.0 ** -7  # bf16 q + bf16 out roundings (2 x 2**-9) with a 2x band
KV_ERROR_GAIN = 1.5  # output rel-L2 per unit of K/V rel-L2 round-trip error (measured ~1.0; softmax averages V errors,
#                      K errors move logits by |q| * |dk| * scale)
Q_ERROR_GAIN = 1.0  # output rel-L2 per unit of q rel-L2 rounding error (logit errors average over the softmax)
MIN_TOPK_AGREEMENT_ROUNDED = 0.97  # bf16 idx_q may flip a few exact-score near-ties


def rel_l2(a, b) -> float:
    a, b = torch.as_tensor(a).double(), torch.as_tensor(b).double()
    return float((a - b).norm() / b.norm().clamp_min(1e-300))


def make_requests(config: LayerConfig, lens, seed):
    """Per request: qkv [L, W] bf16 with per-channel magnitude spread and an attention sink at position 0."""
    gen = torch.Generator().manual_seed(seed)
    spread = torch.exp(torch.randn(config.qkv_width, generator=gen) * 0.7)
    reqs = []
    for n in lens:
        x = torch.randn(n, config.qkv_width, generator=gen) * spread
        x[0] *= 3  # a sink token
        reqs.append(x.bfloat16())
    weights = {k: (torch.randn(HEAD_DIM, generator=gen) * 0.2).bfloat16()
               for k in ("q_norm", "k_norm", "idx_q_norm", "idx_k_norm")}
    return reqs, weights


def mxfp4_round(mode: ScaleMode):
    def f(t: torch.Tensor) -> torch.Tensor:
        return torch.from_numpy(H.np_dequantize(*H.np_quantize(t.float(), mode.value))).to(t.dtype)
    return f


def kv_round_trip_error(config, reqs, weights, mode) -> float:
    """Measured rel-L2 of MXFP4 on the K and V this case writes (from the unquantized oracle's own K/V path)."""
    errs = []
    for x in reqs:
        rows = qkv_rows(config.num_q_heads, config.num_kv_heads, config.index_heads)
        v = x.double().view(x.shape[0], -1, HEAD_DIM)[:, rows.v]
        k = x.double().view(x.shape[0], -1, HEAD_DIM)[:, rows.k]
        ms = (k ** 2).mean(-1, keepdim=True)
        k = k / torch.sqrt(ms + config.eps) * (1 + weights["k_norm"].double())  # (RoPE is a rotation: same error)
        for t in (k, v):
            errs.append(rel_l2(mxfp4_round(mode)(t), t))
    return max(errs)


class Run:
    """Drives a layer over a batch of requests in steps; keeps the caches and block table."""

    def __init__(self, config, reqs, weights, seed, backend="torch"):
        self.config, self.reqs = config, reqs
        gen = torch.Generator().manual_seed(seed)
        need = [-(-x.shape[0] // PAGE_SIZE) for x in reqs]
        total = sum(need) + 2
        perm = torch.randperm(total, generator=gen).tolist()
        self.block_table = torch.zeros(len(reqs), max(need), dtype=torch.int32)
        used = 0
        for b, n in enumerate(need):
            self.block_table[b, :n] = torch.tensor(perm[used:used + n], dtype=torch.int32)
            used += n
        self.caches = LayerCaches.allocate(config, total, "cpu")
        self.layer = SparseMXFP4Attention(config, weights, backend=backend)
        self.done = [0] * len(reqs)

    def step(self, new_lens):
        """Feed ``new_lens[b]`` next tokens of each request; returns (out [T, nq*128], topk, [(b, positions)])."""
        meta = AttentionMetadata.for_requests(self.block_table, list(self.done), list(new_lens))
        qkv = torch.cat([x[d:d + n] for x, d, n in zip(self.reqs, self.done, new_lens)])
        out, topk = self.layer(qkv, meta, self.caches, return_topk=True)
        spans = [(b, list(range(d, d + n))) for b, (d, n) in enumerate(zip(self.done, new_lens))]
        self.done = [d + n for d, n in zip(self.done, new_lens)]
        return out, topk, spans


def compare(run: Run, weights, out, topk, spans, kv_round):
    """(rel-L2 of out vs the oracle over the (row, kv head) pairs whose top-k sets agree with the oracle's,
    fraction of (row, kv head) pairs whose sets agree; 1.0 on dense layers)."""
    nkv = run.config.num_kv_heads
    refs, same = [], []
    rows = 0
    for b, positions in spans:
        if not positions:
            continue
        ref = attention_oracle(run.reqs[b], weights, run.config, query_positions=torch.tensor(positions),
                               kv_round=kv_round, index_k_round=H.index_k_round(run.config.index_k_dtype))
        refs.append(ref.out)
        n = len(positions)
        ok = torch.ones(n, nkv, dtype=torch.bool)
        if run.config.sparse:
            for h in range(nkv):
                for r in range(n):
                    want = {x for x in ref.selected[h, r].tolist() if x >= 0}
                    have = {x for x in topk[h, rows + r].tolist() if x >= 0}
                    ok[r, h] = want == have
        same.append(ok)
        rows += n
    assert out.shape == (rows, run.config.num_q_heads * HEAD_DIM) and out.dtype == torch.bfloat16
    assert torch.isfinite(out.float()).all()
    same = torch.cat(same)  # [rows, nkv]
    ref = torch.cat(refs).view(rows, nkv, -1)
    got = out.view(rows, nkv, -1)
    return rel_l2(got[same], ref[same]), float(same.double().mean())


CONFIGS = {
    # 4-block requests with topk 3: init block 0 and the own block forced, one block chosen by score
    "sparse_tp4": dict(num_q_heads=16, num_kv_heads=1, num_index_heads=1, sparse=True, topk=3, init_blocks=1,
                       local_blocks=1),
    # no init block: two of the older blocks chosen by score; the MXFP4 index-K (sparse_tp4: the default, fp8)
    "sparse_2kv": dict(num_q_heads=8, num_kv_heads=2, num_index_heads=2, sparse=True, topk=3, init_blocks=0,
                       local_blocks=1, index_k_dtype="mxfp4"),
    "dense_tp4": dict(num_q_heads=16, num_kv_heads=1, num_index_heads=1, sparse=False),
}
LENS = [450, 129, 1, 97]  # ragged: 4 blocks with a partial last page, one page + 1, a single token, < 1 page


def check_step(run, weights, out, topk, spans, mode):
    """Layer vs the oracle with K, V and index-K rounded through the same MXFP4 codec."""
    err, agree = compare(run, weights, out, topk, spans, mxfp4_round(mode))
    assert err <= ROUNDED_TOL, f"rel-L2 {err:.3e} vs the MXFP4-rounded oracle > {ROUNDED_TOL:.3e}"
    assert agree >= MIN_TOPK_AGREEMENT_ROUNDED, f"top-k agreement {agree:.3f} < {MIN_TOPK_AGREEMENT_ROUNDED}"
    return err, agree


@pytest.mark.parametrize("backend", H.backends_here(large_shapes=True))
@pytest.mark.parametrize("name", list(CONFIGS))
def test_prefill(backend, name):
    config = LayerConfig(**CONFIGS[name])
    reqs, weights = make_requests(config, LENS, seed=1)
    run = Run(config, reqs, weights, seed=2, backend=backend)
    out, topk, spans = run.step(LENS)
    if config.sparse:
        assert topk.shape == (config.num_kv_heads, sum(LENS), config.topk)
    else:
        assert topk is None
    check_step(run, weights, out, topk, spans, config.scale_mode)


@pytest.mark.parametrize("backend", H.backends_here(large_shapes=True))
@pytest.mark.parametrize("name", list(CONFIGS))
def test_chunked_prefill_with_cached_prefix_then_decode(backend, name):
    config = LayerConfig(**CONFIGS[name])
    reqs, weights = make_requests(config, LENS, seed=3)
    run = Run(config, reqs, weights, seed=4, backend=backend)
    first = [300, 100, 0, 40]  # chunk 1 (request 2 waits)
    second = [n - f - 2 for n, f in zip(LENS, first)]  # chunk 2 after the cached prefix, leaves 2 tokens
    second[2] = 0
    run.step(first)
    out, topk, spans = run.step(second)
    check_step(run, weights, out, topk, spans, config.scale_mode)
    for _ in range(2):  # two decode steps (request 2 decodes its single token in the first one)
        new = [1 if d < n else 0 for d, n in zip(run.done, LENS)]
        out, topk, spans = run.step(new)
        check_step(run, weights, out, topk, spans, config.scale_mode)


@pytest.mark.parametrize("backend", H.backends_here(large_shapes=True))
@pytest.mark.parametrize("mode", [ScaleMode.FLOOR, ScaleMode.MSE])
def test_other_scale_modes(backend, mode):
    config = LayerConfig(**CONFIGS["sparse_tp4"], scale_mode=mode)
    reqs, weights = make_requests(config, [450, 97], seed=5)
    run = Run(config, reqs, weights, seed=6, backend=backend)
    out, topk, spans = run.step([450, 97])
    check_step(run, weights, out, topk, spans, mode)


@pytest.mark.parametrize("backend", H.backends_here())
@pytest.mark.parametrize("name", ["sparse_2kv", "dense_tp4"])
def test_decode_steps_on_every_backend(backend, name):
    """Small shapes, so that every available backend runs (Triton under the CPU interpreter included): the prefix is
    written by the reference backend, then ``backend`` decodes two steps of three requests (write, top-k, tables,
    attention) against the oracle."""
    config = LayerConfig(**CONFIGS[name])
    lens = [300, 130, 9]
    reqs, weights = make_requests(config, lens, seed=21)
    run = Run(config, reqs, weights, seed=22)
    run.step([n - 2 for n in lens])
    run.layer = SparseMXFP4Attention(config, weights, backend=backend)
    for _ in range(2):
        out, topk, spans = run.step([1] * len(lens))
        check_step(run, weights, out, topk, spans, config.scale_mode)


def q_e4m3_error(config, reqs, weights) -> float:
    """Measured rel-L2 of rounding the normalised q of this data to float8_e4m3fn (unit scale)."""
    errs = []
    for x in reqs:
        q = x.double().view(x.shape[0], -1, HEAD_DIM)[:, :config.num_q_heads]
        q = q / torch.sqrt((q ** 2).mean(-1, keepdim=True) + config.eps) * (1 + weights["q_norm"].double())
        errs.append(rel_l2(q.float().to(torch.float8_e4m3fn).double(), q))
    return max(errs)


@pytest.mark.parametrize("backend", H.backends_here(large_shapes=True))
@pytest.mark.parametrize("name", ["sparse_tp4", "dense_tp4"])
def test_fp8_query(backend, name):
    # q in e4m3 (what the gfx950 kernel consumes): the extra error is bounded by q's own e4m3 round-trip error
    config = LayerConfig(**CONFIGS[name], q_dtype=torch.float8_e4m3fn)
    reqs, weights = make_requests(config, [450, 97], seed=13)
    run = Run(config, reqs, weights, seed=14, backend=backend)
    out, topk, spans = run.step([450, 97])
    e_q = q_e4m3_error(config, reqs, weights)
    assert 0.01 < e_q < 0.05, e_q  # 3 mantissa bits
    err, agree = compare(run, weights, out, topk, spans, mxfp4_round(config.scale_mode))
    tol = Q_ERROR_GAIN * e_q + ROUNDED_TOL
    assert err <= tol, f"rel-L2 {err:.3e} with e4m3 q > {tol:.3e} (q e4m3 error {e_q:.3e})"
    assert agree >= MIN_TOPK_AGREEMENT_ROUNDED  # idx_q stays bf16


@pytest.mark.parametrize("backend", H.backends_here(large_shapes=True))
def test_decode_batch_17(backend):
    config = LayerConfig(**CONFIGS["sparse_tp4"])
    lens = [1, 97, 128, 129, 450, 3, 40, 64, 131, 2, 20, 33, 256, 7, 5, 130, 90]
    reqs, weights = make_requests(config, lens, seed=7)
    run = Run(config, reqs, weights, seed=8, backend=backend)
    run.step([n - 1 for n in lens])
    out, topk, spans = run.step([1] * len(lens))
    check_step(run, weights, out, topk, spans, config.scale_mode)


@pytest.mark.parametrize("backend", H.backends_here(large_shapes=True))
@pytest.mark.parametrize("name", ["sparse_tp4", "dense_tp4"])
def test_prefill_against_unquantized_oracle(backend, name):
    # the MXFP4 error itself: bounded by the measured K/V round-trip error of this data
    config = LayerConfig(**CONFIGS[name])
    reqs, weights = make_requests(config, [450, 129], seed=11)
    run = Run(config, reqs, weights, seed=12, backend=backend)
    out, topk, spans = run.step([450, 129])
    e_kv = kv_round_trip_error(config, reqs, weights, config.scale_mode)
    tol = KV_ERROR_GAIN * e_kv + ROUNDED_TOL
    err, agree = compare(run, weights, out, topk, spans, None)
    assert err <= tol, f"rel-L2 {err:.3e} vs the unquantized oracle > {tol:.3e} (MXFP4 K/V error {e_kv:.3e})"
    # index-K in MXFP4 moves block scores by ~e_kv relative: most selections must still agree
    assert agree >= 0.9, f"top-k agreement with the unquantized oracle {agree:.3f}"


# ---- the oracle itself against an independent numpy implementation ------------------------------------------------
def numpy_attention(config: LayerConfig, x: torch.Tensor, weights, positions) -> tuple[np.ndarray, np.ndarray | None]:
    """MiniMax-M3 attention of one request in fp64 numpy: Gemma norm, NeoX partial RoPE, per-row top-k, causal."""
    nq, nkv, d = config.num_q_heads, config.num_kv_heads, HEAD_DIM
    rows = qkv_rows(nq, nkv, config.index_heads)
    n = x.shape[0]
    xs = x.double().numpy().reshape(n, -1, d)
    half = config.rotary_dim // 2
    inv = config.rope_theta ** (-np.arange(half) * 2.0 / config.rotary_dim)
    ang = np.arange(n)[:, None] * inv[None, :]
    cos, sin = np.cos(ang)[:, None, :], np.sin(ang)[:, None, :]

    def prep(h, name):
        w = weights[name].double().numpy()
        y = h / np.sqrt((h ** 2).mean(-1, keepdims=True) + config.eps) * (1 + w)
        y1, y2 = y[..., :half].copy(), y[..., half:2 * half].copy()
        y[..., :half], y[..., half:2 * half] = y1 * cos - y2 * sin, y2 * cos + y1 * sin
        return y

    q = prep(xs[:, rows.q], "q_norm")
    k = prep(xs[:, rows.k], "k_norm")
    v = xs[:, rows.v]
    g = nq // nkv
    out = np.zeros((len(positions), nq, d))
    sel_all = np.full((nkv, len(positions), config.topk), -1) if config.sparse else None
    if config.sparse:
        iq = prep(xs[:, rows.idx_q], "idx_q_norm")
        ik = prep(xs[:, rows.idx_k], "idx_k_norm")[:, 0]
    for r, p in enumerate(positions):
        own = p // PAGE_SIZE
        for h in range(nkv):
            tokens = list(range(p + 1))
            if config.sparse:
                scores = []
                for b in range(own + 1):
                    s = max(float(iq[p, h] @ ik[t]) for t in range(b * PAGE_SIZE, min(p, (b + 1) * PAGE_SIZE - 1) + 1))
                    level = 2 if b < config.init_blocks else 1 if b > own - config.local_blocks else 0
                    scores.append((-level, 0.0 if level else -s))  # forced blocks rank above every score
                keep = sorted(sorted(range(own + 1), key=lambda b: (scores[b], b))[:min(config.topk, own + 1)])
                sel_all[h, r, :len(keep)] = keep
                tokens = [t for t in tokens if t // PAGE_SIZE in keep]
            logits = q[p, h * g:(h + 1) * g] @ k[tokens, h].T * config.softmax_scale  # [g, n]
            w = np.exp(logits - logits.max(-1, keepdims=True))
            out[r, h * g:(h + 1) * g] = (w / w.sum(-1, keepdims=True)) @ v[tokens, h]
    return out.reshape(len(positions), nq * d), sel_all


@pytest.mark.parametrize("name", ["sparse_tp4", "sparse_2kv", "dense_tp4"])
def test_oracle_matches_independent_numpy(name):
    config = LayerConfig(**CONFIGS[name])
    (x,), weights = make_requests(config, [390], seed=9)
    positions = [0, 1, 127, 128, 255, 300, 389]
    ref = attention_oracle(x, weights, config, query_positions=torch.tensor(positions))
    want, sel = numpy_attention(config, x, weights, positions)
    assert ref.out.shape == want.shape
    assert rel_l2(ref.out, want) < 1e-10
    if config.sparse:
        assert np.array_equal(ref.selected.numpy(), sel)
    else:
        assert ref.selected is None


def test_tolerances_are_meaningful():
    # the unrounded bound must be well below what a broken layer would give (e.g. uniform attention)
    config = LayerConfig(**CONFIGS["dense_tp4"])
    reqs, weights = make_requests(config, [300], seed=10)
    e_kv = kv_round_trip_error(config, reqs, weights, ScaleMode.CEIL)
    assert 0.02 < e_kv < 0.2, e_kv  # MXFP4 is ~0.1 rel-L2 on such data
    assert KV_ERROR_GAIN * e_kv + ROUNDED_TOL < 0.5
    assert math.isclose(ROUNDED_TOL, 2 * 2 * 2.0 ** -9)
