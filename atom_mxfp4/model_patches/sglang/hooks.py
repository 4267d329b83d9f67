"""Every SGLang internal the plugin touches, in one place (docs/sglang.md lists them with the reason for each).

Extension points (public registries): ``register_attention_backend``, ``add_attention_backend_choices``,
``register_model_override_predicate`` (start-up checks and the backend / page-size choice), ``HookRegistry`` (the
rest). Each hook passes through to SGLang unchanged unless ``--kv-cache-dtype mxfp4`` is in force (from the flag or
from the checkpoint's MXFP4 KV declaration, resolved by ``model_override``).
"""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path

import torch

from . import coexist, options
from .checkpoint import HF_QUANT, declaration, is_quark_mxfp4_spec, quant_section, read_json, resolve_kv_dtype
from .geometry import BACKEND_NAME, KV_CACHE_DTYPE, check_model, check_server_settings, layer_ids
from .targets import (MODEL_REGISTRY, T_ADD_CLI_ARGS, T_ATTENTION_FORWARD, T_BACKEND_WRAPPER,  # noqa: F401
                      T_BUILD_POOL, T_CELL_SIZE, T_CONFIGURE_DTYPE, T_QUARK_KV_VALIDATE, attn_tp_size)

logger = logging.getLogger(__name__)


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
    """AROUND ``DefaultPoolConfigurator._compute_cell_size``: the true MXFP4 bytes per token (pool.bytes_per_token,
    with the index-K dtype of ``ATOM_MXFP4_INDEX_K_DTYPE``), so ``--mem-fraction-static`` buys ``512 / 136`` = 3.76x
    the tokens of a bf16 main K/V."""
    if not _is_mxfp4(kvc):
        return original(self, kvc, num_layers)
    from .pool import bytes_per_token
    dense, sparse = _local_layers(kvc)
    return bytes_per_token(kv_heads=_kv_heads(kvc), num_layers=len(dense) + len(sparse), num_sparse_layers=len(sparse),
                           index_k_dtype=options.index_k_dtype(os.environ))


def build_minimax_pool(original, self, *, max_total_num_tokens):
    """AROUND ``KVCacheConfigurator._build_minimax_sparse_kv_pool``: our MXFP4 records pool."""
    if not _is_mxfp4(self):
        return original(self, max_total_num_tokens=max_total_num_tokens)
    from .pool import MXFP4MiniMaxKVPool
    dense, sparse = _local_layers(self)
    return MXFP4MiniMaxKVPool(size=max_total_num_tokens, page_size=self.page_size, head_num=_kv_heads(self),
                              dense_layer_ids=dense, sparse_layer_ids=sparse, device=self.device,
                              start_layer=self.layer_info.start_layer, end_layer=self.layer_info.end_layer,
                              index_k_dtype=options.index_k_dtype(os.environ))


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


def quark_kv_cache_validate(original, kv_cache_config):
    """AROUND ``QuarkKVCacheMethod.validate_kv_cache_config`` (static): SGLang accepts only fp8_e4m3 per_tensor; let
    it accept exactly the MXFP4 KV spec too (``checkpoint.QUARK_SPEC``: the layer's k/v scales stay unused). Every
    other spec goes to SGLang's check unchanged."""
    if is_quark_mxfp4_spec(kv_cache_config):
        return None
    return original(kv_cache_config)


def _hf_quant_config(model_path: str, revision) -> dict | None:
    """hf_quant_config.json where SGLang read it: the local folder, or the Hub cache (SGLang fetched it already when
    config.json has no quantization section; nothing is downloaded here)."""
    root = Path(model_path)
    if root.is_dir():
        return read_json(root / HF_QUANT)[0] if (root / HF_QUANT).is_file() else None
    try:
        from huggingface_hub import try_to_load_from_cache
        cached = try_to_load_from_cache(model_path, HF_QUANT, revision=revision)
    except (ImportError, ValueError):  # ValueError: not a Hub repo id
        return None
    return read_json(Path(cached))[0] if isinstance(cached, str) else None


def checkpoint_declaration(cfg, hf_config):
    """The checkpoint's KV-cache declaration (checkpoint.declaration) from the HF config SGLang loaded."""
    def as_dict(value):
        return value.to_dict() if hasattr(value, "to_dict") and not isinstance(value, dict) else value
    text = getattr(hf_config, "text_config", None)
    config = {"quantization_config": as_dict(getattr(hf_config, "quantization_config", None)),
              "text_config": {"quantization_config": as_dict(getattr(text, "quantization_config", None))},
              "compression_config": as_dict(getattr(hf_config, "compression_config", None))}
    hf_quant = None
    if quant_section(config, None)[1] is None:
        hf_quant = _hf_quant_config(str(cfg.model_path), getattr(cfg, "revision", None))
    return declaration(config, hf_quant)


def registered_model_class(architecture: str):
    """The class SGLang's model registry holds for ``architecture``, read only when the registry is loaded or will
    load an external package first (importing it otherwise imports every SGLang model; SGLang's own class is used)."""
    if not os.environ.get(coexist.EXTERNAL_ENV) and MODEL_REGISTRY not in sys.modules:
        return None
    try:
        from sglang.srt.models.registry import ModelRegistry
    except ImportError:  # an external package that does not import: SGLang reports it when it loads the model
        return None
    return ModelRegistry.models.get(architecture)


def _check_start_up(server_args, cfg, hf_config) -> None:
    from sglang.srt.runtime_context import attn_tp_size_of

    from .geometry import UNCOVERED_FEATURES
    check_model(hf_config, attn_tp_size=int(attn_tp_size_of(cfg)))
    coexist.check_external_package(os.environ)
    architecture = hf_config.architectures[0]
    coexist.check_model_class(architecture, registered_model_class(architecture), os.environ)
    # what the user set (the raw record), not what platform / model providers resolved before us
    explicit = [getattr(server_args, name, None) for name in
                ("attention_backend", "prefill_attention_backend", "decode_attention_backend")]
    check_server_settings(page_size=getattr(server_args, "page_size", None),
                          speculative_algorithm=cfg.speculative_algorithm, attention_backends=explicit,
                          features={name: getattr(cfg, name, None) for name in UNCOVERED_FEATURES},
                          disaggregation_mode=getattr(cfg, "disaggregation_mode", "null"))


def model_override(server_args, hf_config) -> dict:
    """Model-override provider for every architecture: resolves ``--kv-cache-dtype`` against the checkpoint's KV
    declaration (checkpoint.resolve_kv_dtype), then, for mxfp4, the start-up refusals, our backend and page size."""
    from sglang.srt.arg_groups.model_override_base import resolving_view
    cfg = resolving_view(server_args)
    requested = getattr(server_args, "kv_cache_dtype", None) or "auto"  # what the user set (the raw record)
    choice = resolve_kv_dtype(requested, checkpoint_declaration(cfg, hf_config))
    if choice.warning:
        logger.warning("atom_mxfp4: %s", choice.warning)
    if choice.dtype != KV_CACHE_DTYPE:
        return {}
    try:
        _check_start_up(server_args, cfg, hf_config)
        index_k_dtype = options.index_k_dtype(os.environ)  # a bad value is refused here, before any pool exists
    except ValueError as error:
        if not choice.from_checkpoint:
            raise
        raise type(error)(f"{choice.source} declares an MXFP4 KV cache, so --kv-cache-dtype auto resolves to mxfp4 "
                          f"(pass another --kv-cache-dtype to serve without it): {error}") from None
    logger.info("atom_mxfp4: KV cache dtype mxfp4 (from %s), index-K %s (%s), attention backend %s, page size 128",
                choice.source, index_k_dtype.value, options.INDEX_K_DTYPE_ENV, BACKEND_NAME)
    declared = {"attention_backend": BACKEND_NAME, "page_size": 128}
    return {**declared, "kv_cache_dtype": KV_CACHE_DTYPE} if choice.from_checkpoint else declared


def create_backend(runner):
    from .backend import AtomMXFP4AttnBackend
    return AtomMXFP4AttnBackend(runner)
