"""The SGLang functions the plugin hooks (HookRegistry dotted paths) and the runtime facts it reads from SGLang.

The bottom of the plugin's one-way import chain: ``__init__`` -> ``hooks`` -> ``backend`` / ``pool`` -> ``targets``,
``geometry``, ``checkpoint``, ``coexist`` (the last two import no SGLang: the ``config`` command uses them).
docs/sglang.md lists every SGLang internal with the reason for it.
"""

from __future__ import annotations

import pkgutil

T_ADD_CLI_ARGS = "sglang.srt.server_args.ServerArgs.add_cli_args"
T_CONFIGURE_DTYPE = "sglang.srt.mem_cache.kv_cache_dtype.configure_kv_cache_dtype"
T_CELL_SIZE = "sglang.srt.model_executor.pool_configurator.DefaultPoolConfigurator._compute_cell_size"
T_BUILD_POOL = "sglang.srt.mem_cache.kv_cache_configurator.KVCacheConfigurator._build_minimax_sparse_kv_pool"
T_ATTENTION_FORWARD = "sglang.srt.models.minimax_m3.MiniMaxM3Attention.forward"
T_BACKEND_WRAPPER = "sglang.srt.layers.attention.attention_registry.attn_backend_wrapper"
T_QUARK_KV_VALIDATE = "sglang.srt.layers.quantization.quark.quark.QuarkKVCacheMethod.validate_kv_cache_config"
MODEL_REGISTRY = "sglang.srt.models.registry"  # read (not hooked) by hooks.registered_model_class
HOOKS_MODULE = __name__.rsplit(".", 1)[0] + ".hooks"


def hook_applied(target: str) -> bool:
    """Whether ``target`` is wrapped by one of this plugin's hooks: HookRegistry's wrappers keep the original in
    ``__wrapped__`` (functools.wraps) and the hook in their closure."""
    try:
        fn = pkgutil.resolve_name(target)
    except (ImportError, AttributeError):
        return False
    while fn is not None:
        for cell in getattr(fn, "__closure__", None) or ():
            try:
                if getattr(cell.cell_contents, "__module__", None) == HOOKS_MODULE:
                    return True
            except ValueError:  # an empty cell
                continue
        fn = getattr(fn, "__wrapped__", None)
    return False


def attn_tp_size() -> int:
    """The attention TP size of this process (SGLang's runtime context; raises if nothing is published)."""
    from sglang.srt.runtime_context import get_parallel
    return int(get_parallel().attn_tp_size)
