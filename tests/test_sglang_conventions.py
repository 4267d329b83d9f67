"""Our plugin against SGLang 0.5.23's OWN MiniMax-M3 code (not our oracle): the conventions must agree.

1. Projections, QK-norm, RoPE: a real ``sglang.srt.models.minimax_m3.MiniMaxM3Attention`` (TINY_M3 geometry, TP 1)
   runs its own ``forward_prepare`` (minimax_m3.py:1482-1629; on CPU it takes the portable path
   ``_qk_norm_rope`` :1023-1040 = ``_qk_norm`` :1042-1065 (GemmaRMSNorm, layernorm.py:1152-1170: x * rsqrt(mean x^2
   + eps) * (1 + w)) then ``self.rotary_emb`` (get_rope :822-828, RotaryEmbedding.forward_native, base.py:331-366:
   NeoX on the first rotary_dim dims) and ``_index_qk_norm_rope`` :1067-1091 with ``_split_index_qkv`` :1104-1115).
   Ours: ``AtomMXFP4AttnBackend.fused_projection`` on the same module + ``ops.fused_qknorm_rope_write`` (torch).
   q / idx_q are compared directly; K / V / index-K as our dequantized MXFP4 records against SGLang's k / v / idx_k
   rounded through our codec, and against the unquantized ones.
2. Attention: SGLang's MiniMax sparse kernels are Triton (their autotuned kernels do not run under Triton 3.6's
   interpreter), so the test reproduces their math as read, on the same bf16 q / idx_q and the same K / V / index-K
   values (our dequantized records in fp64): softmax scale ``head_dim ** -0.5`` (``self.scaling``, minimax_m3.py:769,
   and the kernels' default when the backend passes no sm_scale: flash_with_topk_idx.py:1019-1020 decode,
   prefill/flash_with_topk_idx.py:668-669, decode/topk_sparse.py:421-422, prefill/topk_sparse.py:427-428); block
   score = max over the block's causal tokens of idx_q . idx_k (decode/flash_with_topk_idx.py:228-245, score_type
   'max'); init blocks forced at 1e30, local blocks (the last ``local_blocks`` up to the query) at 1e29, inside the
   top-k (:246-253; prefill asserts init + local <= topk, prefill/flash_with_topk_idx.py:662-664); index head i
   serves KV head i // (niq / nkv) (minimax_sparse.py topk_index_reduce view); dense layers: causal attention with
   ``self.scaling`` (RadixAttention, minimax_m3.py:911-918).
"""

from __future__ import annotations

import importlib.util
import math
from types import SimpleNamespace

import pytest
import torch

if importlib.util.find_spec("sglang") is None:  # only a missing SGLang skips; a broken install fails loudly
    pytest.skip("SGLang is not installed (scripts/install.d/30-sglang.sh installs it)", allow_module_level=True)
from sglang_env import tiny_m3, torchvision_stand_in

with torchvision_stand_in.torchvision_stand_in():
    import sglang.srt.models.minimax_m3 as sgl_m3

from atom_mxfp4 import ops
from atom_mxfp4.format import dequantize_mxfp4, quantize_mxfp4
from atom_mxfp4.layer import AttentionMetadata, LayerCaches, SparseMXFP4Attention
from atom_mxfp4.model_patches.sglang.backend import AtomMXFP4AttnBackend
from atom_mxfp4.model_patches.sglang.geometry import check_model

import _helpers as H

N = 300  # 3 blocks of 128: top-2 with the local block is a real selection
PAGES = 4


def rel_l2(a, b):
    a, b = a.double(), b.double()
    return float((a - b).norm() / b.norm())


def _config():
    from transformers import PretrainedConfig
    return PretrainedConfig(**tiny_m3.config())


def sglang_module(sparse: bool, dtype, monkeypatch, seed: int):
    """SGLang's own MiniMaxM3Attention, weights drawn like the H200 runs (tests/sglang_env/sitecustomize.py)."""
    import sglang.srt.layers.rotary_embedding.base as rope_base
    from sglang.srt.runtime_context import get_parallel
    # off a CPU engine SGLang's RotaryEmbedding would import vllm's kernel; SGLang's CPU path (forward_native)
    monkeypatch.setattr(rope_base, "_is_cpu", True)
    with get_parallel().override(attn_tp_size=1, attn_tp_rank=0):
        module = sgl_m3.MiniMaxM3Attention(_config(), layer_id=int(sparse), is_sparse_attention_layer=sparse,
                                           disable_index_value=True).to(dtype)
    module.rotary_emb.cos_sin_cache = module.rotary_emb._compute_cos_sin_cache()  # .to() cast it; fp32 as on CUDA
    assert module.rotary_emb.cos_sin_cache.dtype == torch.float32  # as on CUDA (base.py:117-119)
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, param in module.named_parameters():
            values = torch.randn(param.shape, generator=gen)
            param.copy_(1 + 0.1 * values if "norm" in name else values / param.shape[-1] ** 0.5)
    return module


def ours(module, hidden, positions):
    """Our plugin's path on SGLang's module: fused projection -> fused QK-norm/RoPE/MXFP4 write (torch)."""
    config = check_model(_config()).layer_config(bool(module.is_sparse_attention_layer))
    weights = {"q_norm": module.q_norm.weight.detach(), "k_norm": module.k_norm.weight.detach()}
    if config.sparse:
        weights.update(idx_q_norm=module.index_q_norm.weight.detach(), idx_k_norm=module.index_k_norm.weight.detach())
    layer = SparseMXFP4Attention(config, weights, backend="torch")
    with torch.no_grad():
        qkv = AtomMXFP4AttnBackend.fused_projection(module, hidden)
    caches = LayerCaches.allocate(config, PAGES)
    w = layer.weights_on("cpu")
    slots = torch.arange(hidden.shape[0])
    q, idx_q = ops.fused_qknorm_rope_write(
        qkv, positions, w["q_norm"], w["k_norm"], w.get("idx_q_norm"), w.get("idx_k_norm"), layer.cos_sin_cache("cpu"),
        slots, caches.k, caches.v, caches.index_k, num_q_heads=config.num_q_heads, num_kv_heads=config.num_kv_heads,
        num_index_heads=config.index_heads, rotary_dim=config.rotary_dim, eps=config.eps,
        scale_mode=config.scale_mode, backend="torch")
    return SimpleNamespace(config=config, layer=layer, qkv=qkv, q=q, idx_q=idx_q, caches=caches)


def tokens(cache, n):
    """Dequantized records [n, heads, 128] fp32, token order (slot = position here); MXFP4 or fp8 index-K records."""
    from atom_mxfp4.cache import FP8IndexKCache
    from atom_mxfp4.index_k import dequantize_fp8
    decode = dequantize_fp8 if isinstance(cache, FP8IndexKCache) else dequantize_mxfp4
    values = decode(cache.data, cache.scale)  # [pages, heads, 128, 128]
    return values.permute(0, 2, 1, 3).reshape(-1, cache.num_heads, 128)[:n]


def codec(mode):
    return lambda t: dequantize_mxfp4(*quantize_mxfp4(t.float(), mode))


@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "sparse"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
def test_qk_norm_rope_and_cache_match_sglang_forward_prepare(sparse, dtype, monkeypatch):
    module = sglang_module(sparse, dtype, monkeypatch, seed=5)
    gen = torch.Generator().manual_seed(6)
    hidden = torch.randn(N, module.hidden_size, generator=gen).to(dtype)
    positions = torch.arange(N) + 1000  # away from 0, where RoPE is the identity
    with torch.no_grad():
        _, _, state = module.forward_prepare(positions, hidden, SimpleNamespace())
    q_s, k_s, v_s = (t.float() for t in state[:3])
    got = ours(module, hidden, positions)
    c, mine = got.config, got.caches
    rnd = codec(c.scale_mode)
    report = {"q": (float((got.q.float().reshape(N, -1) - q_s).abs().max()), rel_l2(got.q.reshape(N, -1), q_s))}
    pairs = [("k", mine.k, k_s.view(N, -1, 128)), ("v", mine.v, v_s.view(N, -1, 128))]
    if sparse:
        idx_q_s, idx_k_s = state[3].float(), state[4].float()
        report["idx_q"] = (float((got.idx_q.float().reshape(N, -1) - idx_q_s).abs().max()),
                           rel_l2(got.idx_q.reshape(N, -1), idx_q_s))
        pairs.append(("idx_k", mine.index_k, idx_k_s.view(N, 1, 128)))
    index_rnd = H.index_k_round(c.index_k_dtype) or rnd  # the index-K's own codec (fp8 by default)
    for name, cache, theirs in pairs:
        cached, rounded = tokens(cache, N), (index_rnd if name == "idx_k" else rnd)(theirs)
        report[name] = (float((cached - rounded).abs().max()), float((cached != rounded).float().mean()),
                        rel_l2(cached, rounded), rel_l2(cached, theirs), rel_l2(rounded, theirs))
    print(f"\n{'sparse' if sparse else 'dense'} {dtype}: {report}")
    # q / idx_q: ours is bf16 (from fp32 math); SGLang's is fp32 or bf16 (norm output rounded before RoPE)
    q_tol = 2.0 ** -8 if dtype == torch.float32 else 2.0 ** -7
    for name in ("q", "idx_q") if sparse else ("q",):
        assert report[name][1] <= q_tol, f"{name}: rel-L2 {report[name][1]:.3e} vs SGLang's"
    for name, *_ in pairs:
        max_abs, differ, rel_rounded, rel_raw, rel_codec = report[name]
        if dtype == torch.float32:  # same fp32 math on both sides: the same records but for rounding-boundary ties
            assert differ <= 2e-3 and rel_rounded <= 0.02, f"{name}: {report[name]}"
        else:  # SGLang's bf16 k differs from our fp32 k by bf16 rounding, which can move a block's MSE scale
            assert rel_rounded <= 0.06, f"{name}: {report[name]}"
        assert rel_raw <= 1.2 * rel_codec + 1e-3, f"{name}: our cache is further from SGLang's than the codec"


def sglang_attention_math(q, k, v, idx_q, idx_k, positions, *, scaling, topk, init_blocks, local_blocks, sparse):
    """The math of SGLang's MiniMax sparse kernels / dense causal attention (see the module docstring), fp64."""
    q, k, v = q.double(), k.double(), v.double()
    nq, nkv = q.shape[1], k.shape[1]
    group, n = nq // nkv, k.shape[0]
    out = torch.empty(q.shape[0], nq, 128, dtype=torch.float64)
    selected = []
    for r, pos in enumerate(positions.tolist()):
        allowed = torch.arange(n) <= pos
        masks = [allowed] * nkv
        if sparse:
            niq = idx_q.shape[1]
            num_blocks = pos // 128 + 1
            chosen = []
            for h in range(niq):
                logits = (idx_q[r, h].double() @ idx_k[:, 0].double().T) * 128 ** -0.5
                logits = logits.masked_fill(~allowed, float("-inf"))
                score = torch.stack([logits[b * 128: (b + 1) * 128].max() for b in range(num_blocks)])
                ids = torch.arange(num_blocks)
                score = torch.where(ids >= max(0, num_blocks - local_blocks), torch.tensor(1e29, dtype=score.dtype),
                                    torch.where(ids < init_blocks, torch.tensor(1e30, dtype=score.dtype), score))
                keep = sorted(torch.topk(score, min(topk, num_blocks)).indices.tolist())
                chosen.append(keep)
            selected.append(chosen)
            masks = [torch.isin(torch.arange(n) // 128, torch.tensor(chosen[h * niq // nkv])) & allowed
                     for h in range(nkv)]
        for h in range(nkv):
            logits = q[r, h * group: (h + 1) * group] @ k[:, h].T * scaling
            logits = logits.masked_fill(~masks[h], float("-inf"))
            out[r, h * group: (h + 1) * group] = torch.softmax(logits, -1) @ v[:, h]
    return out.reshape(q.shape[0], -1), selected


@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "sparse"])
def test_attention_output_matches_sglang_math(sparse, monkeypatch):
    """Prefill of N tokens then one decode step through our layer vs SGLang's attention math on the same inputs."""
    module = sglang_module(sparse, torch.bfloat16, monkeypatch, seed=8)
    gen = torch.Generator().manual_seed(9)
    hidden = torch.randn(N + 1, module.hidden_size, generator=gen).bfloat16()
    got = ours(module, hidden, torch.arange(N + 1))  # q / idx_q / K / V / index-K of all N + 1 tokens
    c = got.config
    caches = LayerCaches.allocate(c, PAGES)
    table = torch.arange(PAGES, dtype=torch.int32)[None]
    out_p, top_p = got.layer(got.qkv[:N], AttentionMetadata.for_requests(table, [0], [N]), caches, return_topk=True)
    out_d, top_d = got.layer(got.qkv[N:], AttentionMetadata.for_requests(table, [N], [1]), caches, return_topk=True)
    for a, b in zip((caches.k, caches.v) + ((caches.index_k,) if sparse else ()),
                    (got.caches.k, got.caches.v) + ((got.caches.index_k,) if sparse else ())):
        assert torch.equal(a.records, b.records)  # the layer wrote what ours() wrote
    k, v = tokens(caches.k, N + 1), tokens(caches.v, N + 1)
    idx_k = tokens(caches.index_k, N + 1) if sparse else None
    assert math.isclose(module.scaling, c.softmax_scale, rel_tol=1e-15) and math.isclose(module.scaling, 128 ** -0.5)
    ref, selected = sglang_attention_math(got.q.float(), k, v, got.idx_q, idx_k, torch.arange(N + 1),
                                          scaling=module.scaling, topk=c.topk, init_blocks=c.init_blocks,
                                          local_blocks=c.local_blocks, sparse=sparse)
    out = torch.cat([out_p, out_d])
    err = rel_l2(out, ref)
    print(f"\n{'sparse' if sparse else 'dense'}: attention rel-L2 {err:.3e}, max abs "
          f"{float((out.double() - ref).abs().max()):.3e}")
    assert err <= 2.0 ** -7
    if sparse:
        ours_sel = torch.cat([top_p, top_d], dim=1)  # [nkv, N + 1, topk] ascending, -1 padded
        for r in range(N + 1):
            for h in range(c.num_kv_heads):
                assert [b for b in ours_sel[h, r].tolist() if b >= 0] == selected[r][h], f"row {r} head {h}"
