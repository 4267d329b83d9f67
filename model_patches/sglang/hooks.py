"""Every SGLang internal the plugin touches, in one place (docs/sglang.md lists them with the reason for each).

Extension points (public registries): ``register_attention_backend``, ``add_attention_backend_choices``,
``register_model_override_predicate`` (start-up checks and the backend / page-size choice), ``HookRegistry`` (the
rest). Each hook passes through to SGLang unchanged unless ``--kv-cache-dtype mxfp4`` is in force.
"""

from __future__ import annotations

import torch

from .geometry import BACKEND_NAME, KV_CACHE_DTYPE, check_model, check_server_settings, layer_ids
from .targets import (T_ADD_CLI_ARGS, T_ATTENTION_FORWARD, T_BACKEND_WRAPPER, T_BUILD_POOL,  # noqa: F401
                      T_CELL_SIZE, T_CONFIGURE_DTYPE, attn_tp_size)


def add_cli_choice(result, parser):
    """AFTER ``ServerArgs.add_cli_args``: accept ``--kv-cache-dtype mxfp4`` (SGLang reserves the name)."""
    for action in parser._actions:
        if action.dest == "kv_cache_dtype" and action.choices is not None and KV_CACHE_DTYPE not in action.choices:
            action.choices = list(action.choices) + [KV_CACHE_DTYPE]
    return result


def configure_kv_cache_dtype(original, *args, **kwargs):
    """AROUND: ``mxfp4`` -> (``"mxfp4"``, ``torch.uint8``): the pools hold uint8 records, not a torch float dtype."""
    if kwargs.get("server_args_kv_cache_dtype") == KV_CACHE_DTYPE:
        if kwargs.get("is_draft_worker"):
            raise ValueError("--kv-cache-dtype mxfp4: a speculative draft worker must be unset, got a draft worker")
        return KV_CACHE_DTYPE, torch.uint8
    return original(*args, **kwargs)


def _is_mxfp4(kvc) -> bool:
    return getattr(kvc, "kv_cache_dtype_str", None) == KV_CACHE_DTYPE


def _local_layers(kvc):
    dense, sparse = layer_ids(kvc.model_config.hf_config)
    start, end = kvc.layer_info.start_layer, kvc.layer_info.end_layer
    return [i for i in dense if start <= i < end], [i for i in sparse if start <= i < end]


def _kv_heads(kvc) -> int:
    return kvc.model_config.get_num_kv_heads(attn_tp_size())


def compute_cell_size(original, self, kvc, num_layers):
    """AROUND ``DefaultPoolConfigurator._compute_cell_size``: the true MXFP4 bytes per token (pool.bytes_per_token),
    so ``--mem-fraction-static`` buys ``512 / 136`` = 3.76x the tokens of a bf16 main K/V."""
    if not _is_mxfp4(kvc):
        return original(self, kvc, num_layers)
    from .pool import bytes_per_token
    dense, sparse = _local_layers(kvc)
    return bytes_per_token(kv_heads=_kv_heads(kvc), num_layers=len(dense) + len(sparse), num_sparse_layers=len(sparse))


def build_minimax_pool(original, self, *, max_total_num_tokens):
    """AROUND ``KVCacheConfigurator._build_minimax_sparse_kv_pool``: our MXFP4 records pool."""
    if not _is_mxfp4(self):
        return original(self, max_total_num_tokens=max_total_num_tokens)
    from .pool import MXFP4MiniMaxKVPool
    dense, sparse = _local_layers(self)
    return MXFP4MiniMaxKVPool(size=max_total_num_tokens, page_size=self.page_size, head_num=_kv_heads(self),
                              dense_layer_ids=dense, sparse_layer_ids=sparse, device=self.device,
                              start_layer=self.layer_info.start_layer, end_layer=self.layer_info.end_layer)


def attention_forward(original, self, positions, hidden_states, forward_batch):
    """AROUND ``MiniMaxM3Attention.forward``: with our backend, the layer gets the raw fused projection."""
    from sglang.srt.model_executor.forward_context import get_attn_backend, has_forward_context

    from .backend import AtomMXFP4AttnBackend
    backend = get_attn_backend() if has_forward_context() else None  # the backend of this forward call
    if isinstance(backend, AtomMXFP4AttnBackend):
        return backend.forward_layer(self, positions, hidden_states, forward_batch)
    return original(self, positions, hidden_states, forward_batch)


def backend_wrapper(original, runner, full_attn_backend, *args, **kwargs):
    """AROUND ``attn_backend_wrapper``: for MiniMax-M3 SGLang wraps the chosen backend in its MiniMax hybrid
    (which builds its own sparse backend over its own pool); ours serves dense and sparse layers itself."""
    from .backend import AtomMXFP4AttnBackend
    if isinstance(full_attn_backend, AtomMXFP4AttnBackend):
        return full_attn_backend
    return original(runner, full_attn_backend, *args, **kwargs)


def model_override(server_args, hf_config) -> dict:
    """Model-override provider for every architecture: start-up refusals, then our backend and page size."""
    from sglang.srt.arg_groups.model_override_base import resolving_view
    from sglang.srt.runtime_context import attn_tp_size_of
    cfg = resolving_view(server_args)
    if cfg.kv_cache_dtype != KV_CACHE_DTYPE:
        return {}
    check_model(hf_config, attn_tp_size=int(attn_tp_size_of(cfg)))
    # what the user set (the raw record), not what platform / model providers resolved before us
    explicit = [getattr(server_args, name, None) for name in
                ("attention_backend", "prefill_attention_backend", "decode_attention_backend")]
    from .geometry import UNCOVERED_FEATURES
    check_server_settings(page_size=getattr(server_args, "page_size", None),
                          speculative_algorithm=cfg.speculative_algorithm, attention_backends=explicit,
                          features={name: getattr(cfg, name, None) for name in UNCOVERED_FEATURES},
                          disaggregation_mode=getattr(cfg, "disaggregation_mode", "null"))
    return {"attention_backend": BACKEND_NAME, "page_size": 128}


def create_backend(runner):
    from .backend import AtomMXFP4AttnBackend
    return AtomMXFP4AttnBackend(runner)
