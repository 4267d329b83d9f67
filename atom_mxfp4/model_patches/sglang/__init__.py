"""SGLang plugin: ``--kv-cache-dtype mxfp4`` serves MiniMax-M3 sparse models through atom_mxfp4's layer.

Loaded by SGLang's ``sglang.srt.plugins`` entry point (``register``) in the server, the Engine and every scheduler
process. ``register`` is idempotent; it only registers (SGLang's ``load_plugins`` applies the hooks afterwards).
"""

from __future__ import annotations

_registered = False


def register() -> None:
    global _registered
    if _registered:
        return
    from sglang.srt.arg_groups.choices import add_attention_backend_choices
    from sglang.srt.arg_groups.model_override_base import register_model_override_predicate
    from sglang.srt.layers.attention.attention_registry import register_attention_backend
    from sglang.srt.plugins.hook_registry import HookRegistry, HookType

    from . import hooks
    from .geometry import BACKEND_NAME

    register_attention_backend(BACKEND_NAME)(hooks.create_backend)
    add_attention_backend_choices([BACKEND_NAME])
    register_model_override_predicate(lambda architecture: True)(hooks.model_override)
    HookRegistry.register(hooks.T_ADD_CLI_ARGS, hooks.add_cli_choice, HookType.AFTER)
    HookRegistry.register(hooks.T_CONFIGURE_DTYPE, hooks.configure_kv_cache_dtype, HookType.AROUND)
    HookRegistry.register(hooks.T_CELL_SIZE, hooks.compute_cell_size, HookType.AROUND)
    HookRegistry.register(hooks.T_BUILD_POOL, hooks.build_minimax_pool, HookType.AROUND)
    HookRegistry.register(hooks.T_ATTENTION_FORWARD, hooks.attention_forward, HookType.AROUND)
    HookRegistry.register(hooks.T_BACKEND_WRAPPER, hooks.backend_wrapper, HookType.AROUND)
    HookRegistry.register(hooks.T_QUARK_KV_VALIDATE, hooks.quark_kv_cache_validate, HookType.AROUND)
    _registered = True
