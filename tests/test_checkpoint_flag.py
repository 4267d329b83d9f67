"""The checkpoint's MXFP4 KV flag without SGLang: which declarations are ours
(atom_mxfp4/model_patches/sglang/checkpoint.py), how ``--kv-cache-dtype`` resolves against them, ``atom-mxfp4 config
show`` / ``config enable-kv`` (round trip, idempotence, byte-for-byte edits, refusals, a failure mid-write), and the
``serve`` wrapper's environment refusals.
Resolution through SGLang itself: tests/test_sglang_checkpoint_flag.py."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from sglang_env import tiny_m3

from atom_mxfp4 import cli
from atom_mxfp4.model_patches.sglang import checkpoint_edit, coexist
from atom_mxfp4.model_patches.sglang.checkpoint import (MXFP4_SCHEME, QUARK_SPEC, Kind, declaration,
                                                        load_local, resolve_kv_dtype)

FP8_WEIGHTS = {"quant_method": "modelopt", "quant_algo": "FP8"}
QUARK_FP4 = dict(QUARK_SPEC, is_dynamic=True, ch_axis=-1)


def quark(spec_k, spec_v=None, group=("*k_proj", "*v_proj")):
    layer = lambda spec: {"weight": None, "input_tensors": None, "output_tensors": spec, "bias": None}  # noqa: E731
    return {"quant_method": "quark", "export": {"kv_cache_group": list(group), "pack_method": "reorder"},
            "layer_quant_config": {"*k_proj": layer(spec_k), "*v_proj": layer(spec_v or spec_k)}}


def decl(quantization_config=None, hf_quant=None, **config):
    if quantization_config is not None:
        config["quantization_config"] = quantization_config
    return declaration(config, hf_quant)


QC = "config.json quantization_config."
ACCEPTED = {  # id -> (config.json quantization_config, hf_quant_config.json, the field named)
    "algo": (dict(FP8_WEIGHTS, kv_cache_quant_algo="MXFP4"), None, QC + "kv_cache_quant_algo"),
    "algo-lower": (dict(FP8_WEIGHTS, kv_cache_quant_algo="mxfp4"), None, QC + "kv_cache_quant_algo"),
    "scheme": (dict(FP8_WEIGHTS, kv_cache_scheme=MXFP4_SCHEME), None, QC + "kv_cache_scheme"),
    "scheme-extra-keys": (dict(FP8_WEIGHTS, kv_cache_scheme=dict(MXFP4_SCHEME, dynamic=True)), None,
                          QC + "kv_cache_scheme"),
    "both-agree": (dict(FP8_WEIGHTS, kv_cache_quant_algo="MXFP4", kv_cache_scheme=MXFP4_SCHEME), None,
                   QC + "kv_cache_quant_algo"),
    "hf-quant-nested": (None, {"producer": {"name": "modelopt"}, "quantization": {"kv_cache_quant_algo": "MXFP4"}},
                        "hf_quant_config.json quantization.kv_cache_quant_algo"),
    "hf-quant-flat": (None, {"kv_cache_quant_algo": "Mxfp4"}, "hf_quant_config.json kv_cache_quant_algo"),
    "quark": (quark(QUARK_FP4), None, QC + "layer_quant_config['*k_proj'].output_tensors"),
}


@pytest.mark.parametrize("qc, hf_quant, field", ACCEPTED.values(), ids=ACCEPTED.keys())
def test_accepted_forms_are_mxfp4(qc, hf_quant, field):
    d = decl(qc, hf_quant)
    assert (d.kind, d.field) == (Kind.MXFP4, field), d


def test_text_config_section_is_read():
    d = declaration({"text_config": {"quantization_config": dict(FP8_WEIGHTS, kv_cache_quant_algo="MXFP4")}})
    assert d.kind is Kind.MXFP4 and d.field == "config.json text_config.quantization_config.kv_cache_quant_algo"


NOT_OURS = {  # id -> (config.json quantization_config, hf_quant_config.json, kind)
    "none": (None, None, Kind.NONE),
    "fp8-weights-only": (FP8_WEIGHTS, None, Kind.NONE),
    "nvfp4-algo": (dict(FP8_WEIGHTS, kv_cache_quant_algo="NVFP4"), None, Kind.OTHER),
    "fp8-algo": (dict(FP8_WEIGHTS, kv_cache_quant_algo="FP8"), None, Kind.OTHER),
    "bare-num-bits-4": (dict(FP8_WEIGHTS, kv_cache_scheme={"type": "float", "num_bits": 4}), None, Kind.OTHER),
    "nvfp4-group-16": (dict(FP8_WEIGHTS, kv_cache_scheme=dict(MXFP4_SCHEME, group_size=16)), None, Kind.OTHER),
    "no-e8m0": (dict(FP8_WEIGHTS, kv_cache_scheme={"type": "float", "num_bits": 4, "group_size": 32}), None,
                Kind.OTHER),
    "num-bits-float": (dict(FP8_WEIGHTS, kv_cache_scheme=dict(MXFP4_SCHEME, num_bits=4.0)), None, Kind.OTHER),
    "scheme-name-nvfp4": (dict(FP8_WEIGHTS, kv_cache_scheme="NVFP4"), None, Kind.OTHER),
    "quark-fp8": (quark({"dtype": "fp8_e4m3", "qscheme": "per_tensor"}), None, Kind.OTHER),
    "quark-fp4-group-16": (quark(dict(QUARK_FP4, group_size=16)), None, Kind.OTHER),
    "quark-empty-group": (quark(QUARK_FP4, group=()), None, Kind.NONE),
    "algo-not-a-string": (dict(FP8_WEIGHTS, kv_cache_quant_algo=4), None, Kind.MALFORMED),
    "scheme-a-list": (dict(FP8_WEIGHTS, kv_cache_scheme=[4, 32]), None, Kind.MALFORMED),
    "scheme-name-mxfp4": (dict(FP8_WEIGHTS, kv_cache_scheme="MXFP4"), None, Kind.MALFORMED),
    "algo-vs-scheme": (dict(FP8_WEIGHTS, kv_cache_quant_algo="MXFP4",
                            kv_cache_scheme={"type": "float", "num_bits": 8}), None, Kind.MALFORMED),
    "quark-missing-entry": (quark(QUARK_FP4, group=("*k_proj", "*v_proj", "*kv_b_proj")), None, Kind.MALFORMED),
    "quark-half-mxfp4": (quark(QUARK_FP4, {"dtype": "fp8_e4m3", "qscheme": "per_tensor"}), None, Kind.MALFORMED),
    "quant-config-a-list": (["kv_cache_quant_algo", "MXFP4"], None, Kind.MALFORMED),
    # SGLang reads hf_quant_config.json only when config.json has no quantization section
    "hf-quant-shadowed": (FP8_WEIGHTS, {"quantization": {"kv_cache_quant_algo": "MXFP4"}}, Kind.NONE),
}


@pytest.mark.parametrize("qc, hf_quant, kind", NOT_OURS.values(), ids=NOT_OURS.keys())
def test_other_and_malformed_forms_are_not_mxfp4(qc, hf_quant, kind):
    assert decl(qc, hf_quant).kind is kind


MX = decl(dict(FP8_WEIGHTS, kv_cache_quant_algo="MXFP4"))
NV = decl(dict(FP8_WEIGHTS, kv_cache_quant_algo="NVFP4"))
BAD = decl(dict(FP8_WEIGHTS, kv_cache_scheme="MXFP4"))
RESOLUTIONS = [  # requested, declaration, dtype, source starts, warning holds
    ("auto", MX, "mxfp4", "checkpoint config.json quantization_config.kv_cache_quant_algo = 'MXFP4'", ""),
    ("auto", NV, "auto", "", ""),
    ("auto", BAD, "auto", "", "is not an MXFP4 declaration atom_mxfp4 accepts"),
    ("bf16", MX, "bf16", "", "--kv-cache-dtype bf16 wins over the checkpoint's MXFP4 KV cache (config.json "
                             "quantization_config.kv_cache_quant_algo = 'MXFP4')"),
    ("fp8_e4m3", NV, "fp8_e4m3", "", ""),
    ("mxfp4", decl(), "mxfp4", "--kv-cache-dtype mxfp4", ""),
    ("mxfp4", MX, "mxfp4", "--kv-cache-dtype mxfp4", ""),
    ("mxfp4", NV, "mxfp4", "--kv-cache-dtype mxfp4", "--kv-cache-dtype mxfp4 wins over the checkpoint's KV cache "
                                                      "declaration config.json"),
]


@pytest.mark.parametrize("requested, d, dtype, source, warning", RESOLUTIONS)
def test_resolve_kv_dtype(requested, d, dtype, source, warning):
    choice = resolve_kv_dtype(requested, d)
    assert (choice.dtype, choice.source) == (dtype, source)
    assert (warning in choice.warning) if warning else choice.warning == ""
    assert "\n" not in choice.warning


# --- config enable-kv ---

def checkpoint(tmp_path, **changes) -> Path:
    return Path(tiny_m3.write(tmp_path / "ckpt", serve=False, **changes))


def files_of(root: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(root.iterdir())}


def run_cli(argv, capsys) -> tuple[int, str, str]:
    code = cli.main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def test_enable_kv_on_an_unquantized_checkpoint_writes_hf_quant_config(tmp_path, capsys):
    root = checkpoint(tmp_path)
    before = files_of(root)
    code, out, _ = run_cli(["config", "enable-kv", str(root)], capsys)
    assert code == 0 and "wrote" in out and "hf_quant_config.json" in out
    after = files_of(root)
    assert after["config.json"] == before["config.json"]  # config.json untouched
    assert json.loads(after["hf_quant_config.json"])["quantization"] == {"kv_cache_quant_algo": "MXFP4"}
    assert declaration(*load_local(root)).kind is Kind.MXFP4
    code, out, _ = run_cli(["config", "enable-kv", str(root)], capsys)  # idempotent
    assert code == 0 and "already declares an MXFP4 KV cache" in out and files_of(root) == after


@pytest.mark.parametrize("style", ["indent-1", "indent-4-crlf", "compact", "empty-section"])
def test_enable_kv_inserts_into_config_json_keeping_every_other_byte(tmp_path, capsys, style):
    root = checkpoint(tmp_path)
    config = tiny_m3.config(quantization_config={} if style == "empty-section" else dict(FP8_WEIGHTS))
    text = {"indent-1": json.dumps(config, indent=1), "indent-4-crlf": json.dumps(config, indent=4).replace(
        "\n", "\r\n") + "\r\n", "compact": json.dumps(config, separators=(",", ":")),
            "empty-section": json.dumps(config, indent=2)}[style]
    (root / "config.json").write_bytes(text.encode())
    code, out, _ = run_cli(["config", "enable-kv", str(root)], capsys)
    assert code == 0 and out.startswith("inserted kv_cache_quant_algo: MXFP4 into") and "quantization_config" in out
    new = (root / "config.json").read_bytes().decode()
    assert json.loads(new) == dict(config, quantization_config=dict(config["quantization_config"],
                                                                    kv_cache_quant_algo="MXFP4"))
    inserted = len(new) - len(text)
    start = next(i for i in range(len(text)) if new[i] != text[i])
    assert new[:start] + new[start + inserted:] == text  # one contiguous insertion, the rest byte for byte
    assert "kv_cache_quant_algo" in new[start:start + inserted]
    assert not (root / "hf_quant_config.json").exists()
    assert run_cli(["config", "enable-kv", str(root)], capsys)[0] == 0
    assert (root / "config.json").read_bytes().decode() == new  # idempotent


def test_enable_kv_into_an_existing_hf_quant_config(tmp_path, capsys):
    root = checkpoint(tmp_path)
    original = ('{\n  "producer": {"name": "modelopt", "version": "0.1"},\n'
                '  "quantization": {\n    "quant_algo": "FP8"\n  }\n}\n')
    (root / "hf_quant_config.json").write_text(original)
    assert run_cli(["config", "enable-kv", str(root)], capsys)[0] == 0
    new = (root / "hf_quant_config.json").read_text()
    assert new == original.replace('{\n    "quant_algo"', '{\n    "kv_cache_quant_algo": "MXFP4",\n    "quant_algo"')


@pytest.mark.parametrize("case", ["garbage-config", "array-config", "garbage-hf-quant", "other-kv", "quark-fp8",
                                  "llama", "no-config"])
def test_enable_kv_refusals_leave_the_files_as_they_were(tmp_path, capsys, case):
    root = checkpoint(tmp_path, **({"architectures": ["LlamaForCausalLM"]} if case == "llama" else {}))
    if case == "garbage-config":
        (root / "config.json").write_text('{"architectures": ["MiniMaxM3SparseForCausalLM"],')
    elif case == "array-config":
        (root / "config.json").write_text("[1, 2]")
    elif case == "garbage-hf-quant":
        (root / "hf_quant_config.json").write_text("quantization: MXFP4\n")
    elif case == "other-kv":
        tiny_m3.write(root, serve=False, quantization_config=dict(FP8_WEIGHTS, kv_cache_quant_algo="FP8"))
    elif case == "quark-fp8":
        tiny_m3.write(root, serve=False, quantization_config=quark({"dtype": "fp8_e4m3", "qscheme": "per_tensor"}))
    elif case == "no-config":
        (root / "config.json").unlink()
    before = files_of(root)
    code, out, err = run_cli(["config", "enable-kv", str(root)], capsys)
    assert code == 1 and out == "" and err.count("\n") == 1 and err.startswith("atom-mxfp4 config enable-kv: error: ")
    needle = {"garbage-config": "config.json must be a JSON file, got JSONDecodeError",
              "array-config": "config.json must be a JSON object, got list",
              "garbage-hf-quant": "hf_quant_config.json must be a JSON file",
              "other-kv": "KV cache declaration must be none (enable-kv adds one; it does not replace another",
              "quark-fp8": "layer_quant_config['*k_proj'].output_tensors",
              "llama": "model architecture must be one of ['MiniMaxM3SparseForCausalLM'], got LlamaForCausalLM",
              "no-config": "config.json must be an existing file, got no such file"}[case]
    assert needle in err, err
    assert files_of(root) == before


@pytest.mark.parametrize("where", ["config.json", "hf_quant_config.json (new)", "hf_quant_config.json (edit)"])
def test_enable_kv_failure_mid_write_leaves_the_original(tmp_path, capsys, monkeypatch, where):
    root = checkpoint(tmp_path, **({"quantization_config": FP8_WEIGHTS} if where == "config.json" else {}))
    if where.endswith("(edit)"):
        (root / "hf_quant_config.json").write_text('{"quantization": {"quant_algo": "FP8"}}')
    before = files_of(root)

    def replace(src, dst):
        assert Path(src).parent == Path(dst).parent == root and Path(src).read_text()  # a full temp file, same dir
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", replace)
    code, out, err = run_cli(["config", "enable-kv", str(root)], capsys)
    assert code == 1 and err.count("\n") == 1 and "No space left on device" in err and "left as they were" in err
    assert files_of(root) == before  # the original intact, no temporary file left behind


def test_write_atomic_keeps_the_mode(tmp_path):
    path = tmp_path / "config.json"
    path.write_text("{}")
    path.chmod(0o640)
    checkpoint_edit.write_atomic(path, '{"a": 1}')
    assert path.read_text() == '{"a": 1}' and (path.stat().st_mode & 0o777) == 0o640
    assert [p.name for p in tmp_path.iterdir()] == ["config.json"]


# --- config show ---

def test_config_show_local(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv(coexist.PLUGINS_ENV, raising=False)
    monkeypatch.delenv(coexist.EXTERNAL_ENV, raising=False)
    root = checkpoint(tmp_path, quantization_config=dict(FP8_WEIGHTS, kv_cache_scheme=MXFP4_SCHEME))
    code, out, _ = run_cli(["config", "show", str(root)], capsys)
    assert code == 0
    assert "KV cache declared: mxfp4: config.json quantization_config.kv_cache_scheme = " in out
    assert "--kv-cache-dtype auto (the default): mxfp4, from checkpoint config.json" in out
    assert "--kv-cache-dtype bf16 (or another explicit value): that value wins" in out
    assert "environment: nothing keeps SGLang from loading atom_mxfp4" in out


def test_config_show_refusals_and_environment(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv(coexist.PLUGINS_ENV, "atom_sglang")
    monkeypatch.setenv(coexist.EXTERNAL_ENV, coexist.ATOM_MODEL_PACKAGE)
    root = checkpoint(tmp_path, head_dim=64, quantization_config=dict(FP8_WEIGHTS, kv_cache_quant_algo="MXFP4"))
    code, out, _ = run_cli(["config", "show", str(root)], capsys)
    assert code == 0
    assert "mxfp4, from checkpoint config.json quantization_config.kv_cache_quant_algo = 'MXFP4'; refused at " \
           "start-up: --kv-cache-dtype mxfp4: head_dim must be 128" in out
    assert "environment: SGLANG_PLUGINS must be unset or naming atom_mxfp4" in out
    assert "SGLANG_PLUGINS=atom_sglang,atom_mxfp4" in out
    assert "environment: --kv-cache-dtype mxfp4: SGLANG_EXTERNAL_MODEL_PACKAGE must be unset" in out


def test_config_show_malformed(tmp_path, capsys):
    root = checkpoint(tmp_path, quantization_config=dict(FP8_WEIGHTS, kv_cache_scheme="MXFP4"))
    out = run_cli(["config", "show", str(root)], capsys)[1]
    assert "KV cache declared: malformed: config.json quantization_config.kv_cache_scheme = 'MXFP4'" in out
    assert "SGLang's own choice; atom_mxfp4 stays out (the server logs: atom_mxfp4: the checkpoint's" in out


def test_config_show_hub_id_offline_is_one_line(capsys, monkeypatch):
    pytest.importorskip("huggingface_hub")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    code, out, err = run_cli(["config", "show", "atom-mxfp4-tests/no-such-model"], capsys)
    assert code == 1 and out == "" and err.count("\n") == 1
    assert err == ("atom-mxfp4 config show: error: atom-mxfp4-tests/no-such-model config.json must be fetchable from "
                   "the Hugging Face Hub or its local cache, got could not be fetched: HF_HUB_OFFLINE=1 and it is not "
                   "in the local cache\n")


def test_config_show_bad_reference_exits_2(capsys):
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["config", "show", "no-such-dir"])
    assert exit_info.value.code == 2
    assert "argument DIR|HF_ID: must be an existing directory or a Hugging Face model id (owner/name), got " \
           "'no-such-dir' (no such directory)" in capsys.readouterr().err


# --- the serve wrapper: where SGLang would not run us ---

@pytest.mark.parametrize("env, needle", [
    ({coexist.PLUGINS_ENV: "atom_sglang"}, "SGLANG_PLUGINS must be unset or naming atom_mxfp4 (SGLang loads only the "
     "plugins it names, so without it mxfp4 is refused and a checkpoint's MXFP4 KV flag is ignored; e.g. "
     "SGLANG_PLUGINS=atom_sglang,atom_mxfp4), got 'atom_sglang'"),
    ({coexist.EXTERNAL_ENV: "atom.plugin.sglang.models"}, "SGLANG_EXTERNAL_MODEL_PACKAGE must be unset (it names "
     "ATOM's model package"),
])
def test_serve_refuses_where_sglang_would_not_run_the_plugin(env, needle, capsys, monkeypatch):
    for name in (coexist.PLUGINS_ENV, coexist.EXTERNAL_ENV):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr(os, "execv", lambda *a: pytest.fail("execv"))
    code, out, err = run_cli(["serve", "--dry-run", "M"], capsys)
    assert code == 1 and out == "" and err.count("\n") == 1 and needle in err, err


def test_serve_accepts_a_plugin_list_naming_us(capsys, monkeypatch):
    monkeypatch.setenv(coexist.PLUGINS_ENV, " atom_sglang , atom_mxfp4 ")
    monkeypatch.delenv(coexist.EXTERNAL_ENV, raising=False)
    code, out, _ = run_cli(["serve", "--dry-run", "M"], capsys)
    assert code == 0 and out.split()[-3:] == ["M", "--kv-cache-dtype", "mxfp4"]
