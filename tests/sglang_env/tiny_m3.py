"""A tiny MiniMax-M3 checkpoint directory (config.json + an offline byte-level tokenizer, no weights: serve it with
``--load-format dummy``).

``TINY_M3`` is the M3 geometry at 1/8 scale (GQA 4, 2 KV heads, 1 dense + 3 sparse layers, head_dim 128, partial
NeoX RoPE 64, block 128, top-2); ``SERVE_FIELDS`` are the fields SGLang's model code reads beyond what the
start-up checks need, with dense MLPs on every layer (``moe_layer_freq`` 0: the torch MoE fallback syncs with the host
and cannot be captured in a CUDA graph). ``write(path)`` writes both, and the tokenizer: 256 byte tokens + 3
specials (ids 256..258), so any text round-trips and nothing is downloaded.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

TINY_M3 = {  # MiniMax-M3 geometry at 1/8 scale: GQA 4, 2 KV heads, 1 dense + 3 sparse layers
    "architectures": ["MiniMaxM3SparseForCausalLM"], "model_type": "minimax_m2", "hidden_size": 256,
    "intermediate_size": 256, "num_hidden_layers": 4, "num_attention_heads": 8, "num_key_value_heads": 2,
    "head_dim": 128, "rotary_dim": 64, "rope_theta": 5e6, "rms_norm_eps": 1e-6, "max_position_embeddings": 4096,
    "vocab_size": 512, "num_local_experts": 2, "num_experts_per_tok": 1, "qk_norm_type": "per_head",
    "use_qk_norm": True, "use_gemma_norm": True, "torch_dtype": "bfloat16", "bos_token_id": 1, "eos_token_id": 2,
    "sparse_attention_config": {
        "sparse_attention_freq": [0, 1, 1, 1], "sparse_disable_index_value": [0, 1, 1, 1],
        "sparse_num_index_heads": 2, "sparse_index_dim": 128, "sparse_block_size": 128, "sparse_topk_blocks": 2,
        "sparse_init_block": 0, "sparse_local_block": 1, "sparse_score_type": "max"},
}

SERVE_FIELDS = {  # read by SGLang's MiniMax-M3 model code when it builds and runs the model
    "hidden_act": "silu", "swiglu_alpha": 1.702, "swiglu_limit": 7.0, "scoring_func": "sigmoid",
    "dense_intermediate_size": 256, "n_shared_experts": 1, "num_mtp_modules": 0, "moe_layer_freq": [0, 0, 0, 0],
    "max_position_embeddings": 16384,  # GSM8K 5-shot prompts are ~4K byte tokens
    "bos_token_id": 256, "eos_token_id": 257,
}

SPECIAL_TOKENS = ("<s>", "</s>", "<pad>")  # ids 256, 257, 258


def config(serve: bool = False, **changes) -> dict:
    """TINY_M3 (plus SERVE_FIELDS when ``serve``), with ``changes`` applied (sparse_attention_config keys too)."""
    cfg = copy.deepcopy(TINY_M3)
    if serve:
        cfg.update(copy.deepcopy(SERVE_FIELDS))
    for key, value in changes.items():
        (cfg["sparse_attention_config"] if key in cfg["sparse_attention_config"] else cfg)[key] = value
    return cfg


def _byte_level_tokenizer() -> dict:
    """tokenizer.json of a byte-level BPE with no merges: one token per byte (GPT-2's byte-to-unicode map)."""
    printable = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    extra = iter(range(256, 512))
    chars = {b: chr(b) if b in printable else chr(next(extra)) for b in range(256)}
    vocab = {chars[b]: b for b in range(256)}
    added = [{"id": 256 + i, "content": t, "single_word": False, "lstrip": False, "rstrip": False,
              "normalized": False, "special": True} for i, t in enumerate(SPECIAL_TOKENS)]
    return {
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": added, "normalizer": None,
        "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True},
        "post_processor": None,
        "decoder": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True},
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                  "vocab": vocab, "merges": []},
    }


def write(path, serve: bool = True, **changes) -> str:
    """Write config.json (and the tokenizer files when ``serve``) into ``path``; return it as a str."""
    root = Path(path)
    root.mkdir(parents=True, exist_ok=True)
    cfg = config(serve, **changes)
    (root / "config.json").write_text(json.dumps(cfg, indent=1))
    if serve:
        (root / "tokenizer.json").write_text(json.dumps(_byte_level_tokenizer()))
        (root / "tokenizer_config.json").write_text(json.dumps({
            "tokenizer_class": "PreTrainedTokenizerFast", "bos_token": SPECIAL_TOKENS[0],
            "eos_token": SPECIAL_TOKENS[1], "pad_token": SPECIAL_TOKENS[2],
            "model_max_length": cfg["max_position_embeddings"],
            "add_bos_token": False, "clean_up_tokenization_spaces": False}))
    return str(root)


TP_CHANGES = {  # heads that split over TP2 / TP4 as the real M3's do: 4 KV heads -> 1 per rank at TP4, GQA 4
    "num_attention_heads": 16, "num_key_value_heads": 4, "sparse_num_index_heads": 4}

RANK_LAYERS = 8
RANK_CHANGES = {  # one TP4 rank of the real MiniMax-M3 served on one GPU (issue 40's serving benchmark): its attention
    # geometry (16 q heads, 1 KV head, 1 index head, top-16 of 128-token blocks, GQA 16), 2 dense + 6 sparse layers,
    # a hidden size that keeps dummy weights small, and a context for 32K prompts + 256 output tokens
    "num_attention_heads": 16, "num_key_value_heads": 1, "sparse_num_index_heads": 1, "sparse_topk_blocks": 16,
    "hidden_size": 1024, "intermediate_size": 1024, "dense_intermediate_size": 1024,
    "num_hidden_layers": RANK_LAYERS, "sparse_attention_freq": [0, 0] + [1] * (RANK_LAYERS - 2),
    "sparse_disable_index_value": [0, 0] + [1] * (RANK_LAYERS - 2), "moe_layer_freq": [0] * RANK_LAYERS,
    "max_position_embeddings": 40960}


if __name__ == "__main__":
    import argparse
    # tiny_m3.py DIR [--tp | --rank] [--topk N]: --tp writes the variant whose heads split over TP2 / TP4 (TP_CHANGES),
    # --rank one TP4 rank of the real M3 on one GPU (RANK_CHANGES); --topk
    # the sparse layers' top-k blocks (2 here; the real M3's 16 puts a batch-1 decode on 16 one-page splits)
    parser = argparse.ArgumentParser()
    parser.add_argument("dir")
    parser.add_argument("--tp", action="store_true")
    parser.add_argument("--rank", action="store_true", help="one TP4 rank of the real M3 (RANK_CHANGES)")
    parser.add_argument("--topk", type=int, default=None)
    args = parser.parse_args()
    changes = dict(TP_CHANGES) if args.tp else dict(RANK_CHANGES) if args.rank else {}
    if args.topk is not None:
        changes["sparse_topk_blocks"] = args.topk
    print(write(args.dir, **changes))
