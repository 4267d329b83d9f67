"""Running beside ROCm/ATOM's SGLang plugin: what would make the MXFP4 pools unusable, found before they are built.

Facts from ATOM's source (docs/atom.md says which files): ATOM registers the ``sglang.srt.plugins`` entry point
``atom_sglang``; its MiniMax-M3 model class is used when ``SGLANG_EXTERNAL_MODEL_PACKAGE=atom.plugin.sglang.models``
(SGLang's model registry then takes the architectures that package exports, ``MiniMaxM3SparseForCausalLM`` among
them); its MiniMax-M3 cache binding views the pool's ``get_kv_buffer`` as bf16/fp8 ``[slots, heads, head_dim]``.
Two ways this plugin cannot serve mxfp4 there:

- ``SGLANG_PLUGINS`` set without ``atom_mxfp4``: SGLang's ``load_plugins`` loads only the entry points it names
  (comma-separated, whitespace stripped), so nothing of ours runs in the server. Only the ``atom-mxfp4`` commands
  can say so (``serve`` refuses, ``config show`` reports it).
- another package owning the model class (ATOM's wrapper): our attention hook patches SGLang's
  ``MiniMaxM3Attention``, which then never runs, and ATOM would bind its views over our uint8 records.
  ``hooks.model_override`` refuses mxfp4 at start-up.

No SGLang import: the commands use this module too. ``env`` is a mapping like ``os.environ``.
"""

from __future__ import annotations

from atom_mxfp4.errors import expect

PLUGIN = "atom_mxfp4"                         # our entry point in sglang.srt.plugins (pyproject.toml)
ATOM_PLUGIN = "atom_sglang"                   # ROCm/ATOM's entry point (its pyproject.toml)
ATOM_MODEL_PACKAGE = "atom.plugin.sglang.models"
PLUGINS_ENV = "SGLANG_PLUGINS"
EXTERNAL_ENV = "SGLANG_EXTERNAL_MODEL_PACKAGE"
SGLANG_MODEL_MODULE = "sglang.srt.models.minimax_m3"  # the model module whose attention hooks.py patches
PREFIX = "--kv-cache-dtype mxfp4: "


def plugins_allowed(env) -> set[str] | None:
    """The entry-point names SGLang loads under ``SGLANG_PLUGINS`` (None: all), parsed as its ``load_plugins`` does."""
    value = env.get(PLUGINS_ENV, "")
    return {x.strip() for x in value.split(",") if x.strip()} if value else None


def check_plugin_loaded(env) -> None:
    allowed = plugins_allowed(env)
    expect(allowed is None or PLUGIN in allowed, PLUGINS_ENV,
           f"unset or naming {PLUGIN} (SGLang loads only the plugins it names, so without it mxfp4 is refused and a "
           f"checkpoint's MXFP4 KV flag is ignored; e.g. {PLUGINS_ENV}={','.join(sorted(allowed or ()) + [PLUGIN])})",
           repr(env.get(PLUGINS_ENV, "")))


def is_atom_package(name: str) -> bool:
    return name == "atom" or name.startswith("atom.")


def check_external_package(env) -> None:
    """``SGLANG_EXTERNAL_MODEL_PACKAGE`` naming ATOM's package: ATOM's MiniMax-M3 wrapper owns the model."""
    package = env.get(EXTERNAL_ENV, "")
    expect(not is_atom_package(package), PREFIX + EXTERNAL_ENV,
           "unset (it names ATOM's model package: ATOM's MiniMax-M3 wrapper would own the model and bind bf16/fp8 "
           "views over the MXFP4 pools; unset it to serve mxfp4 through SGLang's model, or keep it and pass "
           "--kv-cache-dtype bf16 or fp8_e4m3 to serve through ATOM)", repr(package))


def check_model_class(architecture: str, model_class, env) -> None:
    """The class SGLang's registry serves ``architecture`` with must be SGLang's own (None: not registered yet,
    SGLang's own is used)."""
    if model_class is None:
        return
    module = model_class if isinstance(model_class, str) else getattr(model_class, "__module__", "?")
    name = module if isinstance(model_class, str) else f"{module}.{getattr(model_class, '__name__', '?')}"
    owner = "ATOM's" if is_atom_package(module) else "another package's"
    expect(module == SGLANG_MODEL_MODULE or module.startswith(SGLANG_MODEL_MODULE + "."),
           PREFIX + f"the model class SGLang serves {architecture} with",
           f"SGLang's {SGLANG_MODEL_MODULE} (the plugin patches its attention; {owner} class would run its own "
           f"attention over the MXFP4 pools; {EXTERNAL_ENV}={env.get(EXTERNAL_ENV, '')!r})", name)


def problems(env) -> list[str]:
    """Every environment refusal, as messages (for ``atom-mxfp4 config show``)."""
    found = []
    for check in (check_plugin_loaded, check_external_package):
        try:
            check(env)
        except ValueError as error:
            found.append(str(error))
    return found
