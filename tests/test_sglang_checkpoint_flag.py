"""The checkpoint's MXFP4 KV flag through SGLang's real argument resolution (``prepare_server_args`` +
``resolve_once`` + the model-override providers) on tiny MiniMax-M3 checkpoint directories (config.json, plus
hf_quant_config.json for that form; no weights): every accepted form resolves ``--kv-cache-dtype auto`` to mxfp4,
the rest stay SGLang's; explicit values win with one warning; refusals name the checkpoint field; ATOM owning the
model is refused; SGLang's Quark KV-cache validation accepts exactly the MXFP4 spec."""

from __future__ import annotations

import importlib.util
import json
import logging
import sys
from pathlib import Path

import pytest

if importlib.util.find_spec("sglang") is None:  # only a missing SGLang skips; a broken install fails loudly
    pytest.skip("SGLang is not installed (scripts/install.d/30-sglang.sh installs it)", allow_module_level=True)
from sglang_env import tiny_m3, torchvision_stand_in

with torchvision_stand_in.torchvision_stand_in():  # SGLang imports torchvision; no CPU wheel fits torch 2.13
    import sglang.srt.configs  # noqa: F401
    import sglang.srt.layers.attention.attention_registry  # noqa: F401
    import sglang.srt.layers.quantization.quark.quark  # noqa: F401
    import sglang.srt.models.minimax_m3  # noqa: F401
    import sglang.srt.server_args  # noqa: F401
    from sglang.srt.plugins import load_plugins

    load_plugins()

from atom_mxfp4.model_patches.sglang import coexist, hooks
from atom_mxfp4.model_patches.sglang.checkpoint import MXFP4_SCHEME, QUARK_SPEC
from atom_mxfp4.model_patches.sglang.geometry import BACKEND_NAME
from atom_mxfp4.model_patches.sglang.targets import hook_applied

HOOKS_LOGGER = hooks.__name__
MXFP8 = {"quant_algo": "MXFP8"}  # weights SGLang loads as mxfp8 (the MiniMax-M3 release style)
QUARK_FP4 = dict(QUARK_SPEC, is_dynamic=True, ch_axis=-1)


def quark(spec):
    layer = {"weight": None, "input_tensors": None, "output_tensors": spec, "bias": None}
    return {"quant_method": "quark", "export": {"kv_cache_group": ["*k_proj", "*v_proj"], "pack_method": "reorder"},
            "layer_quant_config": {"*k_proj": dict(layer), "*v_proj": dict(layer)},
            "global_quant_config": {"weight": None, "input_tensors": None, "output_tensors": None, "bias": None}}


def checkpoint(tmp_path, quantization_config=None, hf_quant=None, **changes) -> str:
    if quantization_config is not None:
        changes["quantization_config"] = quantization_config
    root = tiny_m3.write(tmp_path / "ckpt", serve=False, **changes)
    if hf_quant is not None:
        (Path(root) / "hf_quant_config.json").write_text(json.dumps(hf_quant))
    return root


def resolve(root, *extra):
    from sglang.srt.arg_groups.overrides import resolved_view
    from sglang.srt.server_args import prepare_server_args
    args = prepare_server_args(["--model-path", root, "--device", "cpu", *extra])
    args.resolve_once()
    return resolved_view(args)


@pytest.fixture(autouse=True)
def plain_environment(monkeypatch):
    for name in (coexist.PLUGINS_ENV, coexist.EXTERNAL_ENV, "ATOM_MXFP4_INDEX_K_DTYPE"):
        monkeypatch.delenv(name, raising=False)


class _Collect(logging.Handler):
    def __init__(self):
        super().__init__(logging.INFO)
        self.seen: list[logging.LogRecord] = []

    def emit(self, record):
        self.seen.append(record)


@pytest.fixture
def caplog():
    """The plugin's log lines, collected on its own logger: SGLang's resolution re-configures the root logger
    (``logging.basicConfig(force=True)``), which drops pytest's capture handler."""
    logger, handler = logging.getLogger(HOOKS_LOGGER), _Collect()
    level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    yield handler
    logger.removeHandler(handler)
    logger.setLevel(level)


def records(caplog, level):
    return [r.getMessage() for r in caplog.seen if r.levelno == level]


ACCEPTED = {  # id -> (config.json quantization_config, hf_quant_config.json, the source the log names)
    "modelopt-algo": (dict(MXFP8, kv_cache_quant_algo="MXFP4"),
                      None, "config.json quantization_config.kv_cache_quant_algo = 'MXFP4'"),
    "modelopt-algo-lower": ({"quant_method": "fp8", "activation_scheme": "dynamic", "kv_cache_quant_algo": "mxfp4"},
                            None, "config.json quantization_config.kv_cache_quant_algo = 'mxfp4'"),
    "modelopt-scheme": (dict(MXFP8, kv_cache_scheme=dict(MXFP4_SCHEME, dynamic=True)),
                        None, "config.json quantization_config.kv_cache_scheme = {"),
    "hf-quant-config": (None, {"producer": {"name": "modelopt"}, "quantization": {"kv_cache_quant_algo": "MXFP4"}},
                        "hf_quant_config.json quantization.kv_cache_quant_algo = 'MXFP4'"),
    "quark": (quark(QUARK_FP4), None, "config.json quantization_config.layer_quant_config['*k_proj'].output_tensors"),
}


@pytest.mark.parametrize("qc, hf_quant, source", ACCEPTED.values(), ids=ACCEPTED.keys())
def test_accepted_forms_resolve_auto_to_mxfp4(tmp_path, caplog, qc, hf_quant, source):
    view = resolve(checkpoint(tmp_path, qc, hf_quant))  # no --kv-cache-dtype: auto
    assert (view.kv_cache_dtype, view.attention_backend, view.page_size) == ("mxfp4", BACKEND_NAME, 128)
    (line,) = records(caplog, logging.INFO)  # the start-up log: the dtype in force and where it came from
    assert line.startswith("atom_mxfp4: KV cache dtype mxfp4 (from checkpoint " + source), line
    assert not records(caplog, logging.WARNING)


NOT_OURS = {  # id -> (config.json quantization_config, hf_quant_config.json, warning logged)
    "unflagged": (None, None, ""),
    "modelopt-nvfp4-algo": (dict(MXFP8, kv_cache_quant_algo="NVFP4"), None, ""),
    "modelopt-fp8-algo": ({"quant_method": "fp8", "activation_scheme": "dynamic", "kv_cache_quant_algo": "FP8"}, None,
                          ""),
    "bare-num-bits-4": (None, {"quantization": {"kv_cache_scheme": {"type": "float", "num_bits": 4}}}, ""),
    "nvfp4-group-16": (None, {"quantization": {"kv_cache_scheme": dict(MXFP4_SCHEME, group_size=16)}}, ""),
    "malformed-scheme-name": (dict(MXFP8, kv_cache_scheme="MXFP4"), None, "is not an MXFP4 declaration"),
    "malformed-conflict": (dict(MXFP8, kv_cache_quant_algo="MXFP4", kv_cache_scheme={"type": "float", "num_bits": 8}),
                           None, "contradicted by config.json quantization_config.kv_cache_scheme"),
    "quark-fp4-group-16": (quark(dict(QUARK_FP4, group_size=16)), None, ""),
}


@pytest.mark.parametrize("qc, hf_quant, warning", NOT_OURS.values(), ids=NOT_OURS.keys())
def test_other_forms_stay_sglangs(tmp_path, caplog, qc, hf_quant, warning):
    view = resolve(checkpoint(tmp_path, qc, hf_quant))
    assert view.kv_cache_dtype == "auto" and view.attention_backend != BACKEND_NAME
    assert not records(caplog, logging.INFO)
    warnings = records(caplog, logging.WARNING)
    assert (len(warnings) == 1 and warning in warnings[0]) if warning else not warnings, warnings


def test_explicit_dtype_wins_with_one_warning(tmp_path, caplog):
    view = resolve(checkpoint(tmp_path, dict(MXFP8, kv_cache_quant_algo="MXFP4")), "--kv-cache-dtype", "bf16")
    assert view.kv_cache_dtype == "bf16" and view.attention_backend != BACKEND_NAME
    assert records(caplog, logging.WARNING) == [
        "atom_mxfp4: --kv-cache-dtype bf16 wins over the checkpoint's MXFP4 KV cache (config.json "
        "quantization_config.kv_cache_quant_algo = 'MXFP4')"]
    assert not records(caplog, logging.INFO)


def test_explicit_mxfp4_on_an_unflagged_checkpoint_works_as_before(tmp_path, caplog):
    view = resolve(checkpoint(tmp_path), "--kv-cache-dtype", "mxfp4")
    assert (view.kv_cache_dtype, view.attention_backend, view.page_size) == ("mxfp4", BACKEND_NAME, 128)
    assert records(caplog, logging.INFO) == ["atom_mxfp4: KV cache dtype mxfp4 (from --kv-cache-dtype mxfp4), "
                                             "index-K fp8 (ATOM_MXFP4_INDEX_K_DTYPE), attention backend atom_mxfp4, "
                                             "page size 128"]


def test_explicit_mxfp4_over_another_declaration_warns(tmp_path, caplog):
    view = resolve(checkpoint(tmp_path, dict(MXFP8, kv_cache_quant_algo="NVFP4")), "--kv-cache-dtype", "mxfp4")
    assert view.kv_cache_dtype == "mxfp4"
    assert records(caplog, logging.WARNING) == [
        "atom_mxfp4: --kv-cache-dtype mxfp4 wins over the checkpoint's KV cache declaration config.json "
        "quantization_config.kv_cache_quant_algo = 'NVFP4'"]


def test_engine_style_server_args_read_the_flag(tmp_path):
    from sglang.srt.arg_groups.overrides import resolved_view
    from sglang.srt.server_args import ServerArgs
    args = ServerArgs(model_path=checkpoint(tmp_path, None, {"quantization": {"kv_cache_quant_algo": "MXFP4"}}),
                      device="cpu")
    args.resolve_once()
    assert resolved_view(args).kv_cache_dtype == "mxfp4"


FIELD = "checkpoint config.json quantization_config.kv_cache_quant_algo = 'MXFP4' declares an MXFP4 KV cache, so " \
        "--kv-cache-dtype auto resolves to mxfp4 (pass another --kv-cache-dtype to serve without it): " \
        "--kv-cache-dtype mxfp4: "
REFUSALS = [  # config changes, extra args, message after FIELD
    (dict(architectures=["LlamaForCausalLM"]), [],
     "model architecture must be one of ['MiniMaxM3SparseForCausalLM'], got LlamaForCausalLM"),
    (dict(head_dim=64), [], "head_dim must be 128 (the only head_dim of the MXFP4 kernels), got 64"),
    ({}, ["--page-size", "64"], "--page-size must be 128 (or unset), got 64"),
    ({}, ["--attention-backend", "triton"], "attention backend must be 'atom_mxfp4' (or unset), got ['triton']"),
]


@pytest.mark.parametrize("changes, extra, message", REFUSALS, ids=["other-arch", "head_dim", "page", "backend"])
def test_refusals_name_the_checkpoint_field(tmp_path, changes, extra, message):
    root = checkpoint(tmp_path, dict(MXFP8, kv_cache_quant_algo="MXFP4"), **changes)
    with pytest.raises(ValueError) as error:
        resolve(root, *extra)
    assert FIELD + message in str(error.value)


def test_other_architecture_with_the_flag_serves_with_an_explicit_dtype(tmp_path, caplog):
    root = checkpoint(tmp_path, dict(MXFP8, kv_cache_quant_algo="MXFP4"), architectures=["LlamaForCausalLM"])
    assert resolve(root, "--kv-cache-dtype", "bf16").kv_cache_dtype == "bf16"
    assert len(records(caplog, logging.WARNING)) == 1


ATOM_PACKAGE = "--kv-cache-dtype mxfp4: SGLANG_EXTERNAL_MODEL_PACKAGE must be unset (it names ATOM's model package: " \
               "ATOM's MiniMax-M3 wrapper would own the model and bind bf16/fp8 views over the MXFP4 pools; unset it " \
               "to serve mxfp4 through SGLang's model, or keep it and pass --kv-cache-dtype bf16 or fp8_e4m3 to " \
               "serve through ATOM), got 'atom.plugin.sglang.models'"


@pytest.mark.parametrize("flag", ["explicit", "checkpoint"])
def test_atom_external_model_package_is_refused(tmp_path, monkeypatch, flag):
    monkeypatch.setenv(coexist.EXTERNAL_ENV, coexist.ATOM_MODEL_PACKAGE)
    root = checkpoint(tmp_path, *((dict(MXFP8, kv_cache_quant_algo="MXFP4"),) if flag == "checkpoint" else ()))
    with pytest.raises(ValueError) as error:
        resolve(root, *(["--kv-cache-dtype", "mxfp4"] if flag == "explicit" else []))
    assert str(error.value).endswith(ATOM_PACKAGE)
    assert ("checkpoint config.json" in str(error.value)) == (flag == "checkpoint")


def test_atom_package_leaves_other_dtypes_alone(tmp_path, monkeypatch):
    monkeypatch.setenv(coexist.EXTERNAL_ENV, coexist.ATOM_MODEL_PACKAGE)
    assert resolve(checkpoint(tmp_path), "--kv-cache-dtype", "bf16").kv_cache_dtype == "bf16"


def test_atom_model_class_registered_is_refused(tmp_path, monkeypatch):
    atom_class = type("MiniMaxM3SparseForCausalLM", (), {"__module__": "atom.plugin.sglang.models.base_model_wrapper"})
    monkeypatch.setattr(hooks, "registered_model_class", lambda arch: atom_class)
    with pytest.raises(ValueError) as error:
        resolve(checkpoint(tmp_path), "--kv-cache-dtype", "mxfp4")
    assert "--kv-cache-dtype mxfp4: the model class SGLang serves MiniMaxM3SparseForCausalLM with must be SGLang's " \
           "sglang.srt.models.minimax_m3 (the plugin patches its attention; ATOM's class would run its own attention " \
           "over the MXFP4 pools; SGLANG_EXTERNAL_MODEL_PACKAGE=''), got atom.plugin.sglang.models.base_model_wrapper" \
           ".MiniMaxM3SparseForCausalLM" in str(error.value)
    sglang_class = sglang.srt.models.minimax_m3.MiniMaxM3SparseForCausalLM
    monkeypatch.setattr(hooks, "registered_model_class", lambda arch: sglang_class)
    assert resolve(checkpoint(tmp_path / "b"), "--kv-cache-dtype", "mxfp4").kv_cache_dtype == "mxfp4"


def test_registry_is_not_imported_to_check_the_owner():
    """Importing SGLang's model registry without an external package would import every SGLang model."""
    assert hooks.registered_model_class("MiniMaxM3SparseForCausalLM") is None or "sglang.srt.models.registry" in \
        sys.modules


def test_quark_validation_accepts_exactly_the_mxfp4_spec():
    from sglang.srt.layers.quantization.quark.quark import QuarkConfig, QuarkKVCacheMethod
    assert hook_applied(hooks.T_QUARK_KV_VALIDATE)
    QuarkKVCacheMethod.validate_kv_cache_config(QUARK_FP4)  # ours: accepted
    QuarkKVCacheMethod.validate_kv_cache_config({"dtype": "fp8_e4m3", "qscheme": "per_tensor"})  # SGLang's own
    QuarkKVCacheMethod.validate_kv_cache_config(None)
    no_scale_format = {k: v for k, v in QUARK_FP4.items() if k != "scale_format"}
    for near_miss in (dict(QUARK_FP4, group_size=16), dict(QUARK_FP4, scale_format="fp8_e4m3"),
                      dict(QUARK_FP4, qscheme="per_tensor"), no_scale_format):
        with pytest.raises(NotImplementedError):  # SGLang's refusal, unchanged
            QuarkKVCacheMethod.validate_kv_cache_config(near_miss)
    config = QuarkConfig.from_config(dict(quark(QUARK_FP4), packed_modules_mapping={}))  # as the loader passes it
    assert config.kv_cache_config == QUARK_FP4
    QuarkKVCacheMethod(config)  # what the model's attention layers construct
