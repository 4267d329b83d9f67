"""Start-up checks for ``--kv-cache-dtype mxfp4`` and the per-rank layer geometry it serves.

Everything here reads the Hugging Face config only (no SGLang import), so the refusals run at server-argument
resolution, before any weight is loaded or any request arrives. Every refusal is a ``ValueError`` whose message
names the setting, the supported value and the value found (``atom_mxfp4.errors.expect``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from atom_mxfp4.errors import expect
from atom_mxfp4.layer import LayerConfig
from atom_mxfp4.layout import HEAD_DIM, MAX_GROUP, PAGE_SIZE

KV_CACHE_DTYPE = "mxfp4"
BACKEND_NAME = "atom_mxfp4"
SUPPORTED_ARCHITECTURES = ("MiniMaxM3SparseForCausalLM",)
PREFIX = "--kv-cache-dtype mxfp4: "


def _expect(cond: bool, name: str, expected: str, actual: object) -> None:
    expect(cond, PREFIX + name, expected, actual)


def sparse_config(hf_config) -> dict:
    text = getattr(hf_config, "text_config", None)
    cfg = getattr(text, "sparse_attention_config", None) if text is not None else None
    cfg = cfg if cfg is not None else getattr(hf_config, "sparse_attention_config", None)
    _expect(isinstance(cfg, dict), "hf_config.sparse_attention_config", "a dict (a MiniMax-M3 sparse checkpoint)",
            type(cfg).__name__)
    return cfg


def layer_ids(hf_config) -> tuple[list[int], list[int]]:
    """(dense layer ids, sparse layer ids) from ``sparse_attention_freq`` (0 = dense)."""
    freq = sparse_config(hf_config)["sparse_attention_freq"]
    return [i for i, f in enumerate(freq) if f == 0], [i for i, f in enumerate(freq) if f != 0]


def init_local_blocks(cfg: dict) -> tuple[int, int]:
    """Forced blocks, read the way SGLang's MiniMax sparse backend reads them (block counts or token counts)."""
    block = cfg["sparse_block_size"]
    init = cfg["sparse_init_block"] if "sparse_init_block" in cfg else math.ceil(cfg["sparse_init_tokens"] / block)
    local = (cfg["sparse_local_block"] if "sparse_local_block" in cfg
             else math.ceil(cfg["sparse_local_tokens"] / block) + 1)
    return int(init), int(local)


@dataclass(frozen=True)
class Geometry:
    """Per tensor-parallel rank: what the pools and the layer need."""

    num_q_heads: int
    num_kv_heads: int
    num_index_heads: int
    dense_layer_ids: tuple[int, ...]
    sparse_layer_ids: tuple[int, ...]
    rotary_dim: int
    rope_theta: float
    eps: float
    topk: int
    init_blocks: int
    local_blocks: int
    max_position: int

    def layer_config(self, sparse: bool, **overrides) -> LayerConfig:
        kw = dict(num_q_heads=self.num_q_heads, num_kv_heads=self.num_kv_heads,
                  num_index_heads=self.num_index_heads if sparse else self.num_kv_heads, sparse=sparse,
                  rotary_dim=self.rotary_dim, rope_theta=self.rope_theta, eps=self.eps, topk=self.topk,
                  init_blocks=self.init_blocks, local_blocks=self.local_blocks, max_position=self.max_position)
        kw.update(overrides)
        return LayerConfig(**kw)


def _rope(hf_config) -> tuple[float, object]:
    params = getattr(hf_config, "rope_parameters", None) or {}
    theta = params.get("rope_theta", getattr(hf_config, "rope_theta", None))
    scaling = getattr(hf_config, "rope_scaling", None)
    rope_type = params.get("rope_type", (scaling or {}).get("rope_type", "default"))
    return theta, (None if rope_type in (None, "default") else rope_type)


def check_model(hf_config, *, attn_tp_size: int = 1) -> Geometry:
    """Refuse what the MXFP4 kernels and layer do not cover; return the per-rank geometry otherwise."""
    arch = (getattr(hf_config, "architectures", None) or [None])[0]
    _expect(arch in SUPPORTED_ARCHITECTURES, "model architecture", f"one of {list(SUPPORTED_ARCHITECTURES)}", arch)
    nq, nkv = hf_config.num_attention_heads, hf_config.num_key_value_heads
    head_dim = getattr(hf_config, "head_dim", None) or hf_config.hidden_size // nq
    _expect(head_dim == HEAD_DIM, "head_dim", f"{HEAD_DIM} (the only head_dim of the MXFP4 kernels)", head_dim)
    _expect(nq % nkv == 0 and nq // nkv <= MAX_GROUP, "GQA group (num_attention_heads / num_key_value_heads)",
            f"a whole group <= {MAX_GROUP}", f"{nq} / {nkv}")
    _expect(nq % attn_tp_size == 0, "num_attention_heads", f"divisible by the attention TP size {attn_tp_size}", nq)
    _expect(nkv % attn_tp_size == 0 or attn_tp_size % nkv == 0, "num_key_value_heads",
            f"a divisor or multiple of the attention TP size {attn_tp_size}", nkv)
    _expect(getattr(hf_config, "qk_norm_type", None) == "per_head" and getattr(hf_config, "use_gemma_norm", False),
            "QK-norm", "per_head Gemma RMSNorm (qk_norm_type='per_head', use_gemma_norm=True)",
            f"qk_norm_type={getattr(hf_config, 'qk_norm_type', None)!r}, "
            f"use_gemma_norm={getattr(hf_config, 'use_gemma_norm', None)!r}")
    theta, scaling = _rope(hf_config)
    _expect(scaling is None, "rope scaling", "none (plain NeoX RoPE)", scaling)
    rotary_dim = getattr(hf_config, "rotary_dim", head_dim)
    _expect(0 < rotary_dim <= head_dim and rotary_dim % 2 == 0, "rotary_dim", f"even, in (0, {head_dim}]",
            rotary_dim)

    cfg = sparse_config(hf_config)
    _expect(cfg["sparse_block_size"] == PAGE_SIZE, "sparse_block_size", f"{PAGE_SIZE} (= the page size)",
            cfg["sparse_block_size"])
    _expect(cfg["sparse_index_dim"] == HEAD_DIM, "sparse_index_dim", str(HEAD_DIM), cfg["sparse_index_dim"])
    _expect(cfg.get("sparse_score_type", "max") == "max", "sparse_score_type", "'max'", cfg.get("sparse_score_type"))
    dense, sparse = layer_ids(hf_config)
    flags = cfg.get("sparse_disable_index_value") or []
    with_value = [i for i in sparse if not (i < len(flags) and flags[i])]
    _expect(not with_value, "sparse layers with an index value branch (sparse_disable_index_value = 0)",
            "none (the MXFP4 layer has no index-V output)", with_value)
    niq_total = cfg["sparse_num_index_heads"]
    nq_rank, nkv_rank = nq // attn_tp_size, max(1, nkv // attn_tp_size)
    niq_rank = max(1, niq_total // attn_tp_size)
    if sparse:
        _expect(niq_rank == nkv_rank, "index heads per rank (sparse_num_index_heads / TP)",
                f"= KV heads per rank ({nkv_rank})", niq_rank)
    init, local = init_local_blocks(cfg)
    return Geometry(nq_rank, nkv_rank, niq_rank, tuple(dense), tuple(sparse), rotary_dim, float(theta),
                    float(hf_config.rms_norm_eps), int(cfg["sparse_topk_blocks"]), init, local,
                    int(getattr(hf_config, "max_position_embeddings", 1 << 17)))


UNCOVERED_FEATURES = {  # server-args field -> why the MXFP4 pool does not serve it
    "enable_hierarchical_cache": "host offload of the MXFP4 records is not implemented",
    "enable_hisparse": "HiSparse host pools of the MXFP4 records are not implemented",
    "enable_lora": "LoRA on the MiniMax-M3 attention projections is not routed through the fused projection",
}


def check_server_settings(*, page_size, speculative_algorithm, attention_backends, features=None,
                          disaggregation_mode="null") -> None:
    """Refuse serving settings the plugin does not cover (``attention_backends``: the explicitly set ones;
    ``features``: server-args field -> value for the fields of ``UNCOVERED_FEATURES``)."""
    for name, why in UNCOVERED_FEATURES.items():
        value = (features or {}).get(name)
        _expect(not value, "--" + name.replace("_", "-"), f"off ({why})", value)
    _expect(disaggregation_mode in (None, "null"), "--disaggregation-mode",
            "null (PD transfer of the MXFP4 and index-K records is not implemented)", disaggregation_mode)
    _expect(page_size in (None, PAGE_SIZE), "--page-size", f"{PAGE_SIZE} (or unset)", page_size)
    _expect(speculative_algorithm in (None, "NONE"), "--speculative-algorithm",
            "unset (no speculative draft model is covered by the MXFP4 pools)", speculative_algorithm)
    others = sorted({b for b in attention_backends if b not in (None, BACKEND_NAME)})
    _expect(not others, "attention backend", f"{BACKEND_NAME!r} (or unset)", others)
