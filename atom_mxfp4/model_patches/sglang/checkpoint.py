"""What a checkpoint declares about its KV cache, and what ``--kv-cache-dtype`` resolves to against it.

No SGLang import: the plugin's model-override provider (``hooks.model_override``) and the ``atom-mxfp4 config``
command both use this module. Accepted MXFP4 declarations (the flag of issue 12; docs/sglang.md):

- ModelOpt style, in a quantization section: ``kv_cache_quant_algo`` equal to ``MXFP4`` (any case), or
  ``kv_cache_scheme`` holding ``MXFP4_SCHEME`` (extra keys allowed);
- AMD Quark style: ``export.kv_cache_group`` non-empty and the ``output_tensors`` of every
  ``layer_quant_config[name]`` it names holding ``QUARK_SPEC`` (extra keys allowed).

Anything else stays SGLang's: ``num_bits: 4`` without group 32 + e8m0 is NVFP4 (``Kind.OTHER``), so are FP8 and
the rest; contradictory or mistyped fields are ``Kind.MALFORMED`` (never resolved to mxfp4). Where the section is
read from follows SGLang 0.5.23 (``ModelConfig._parse_quant_hf_config``, ``resolve_checkpoint_quant_spec``):
config.json ``quantization_config``, then ``text_config.quantization_config``, then ``compression_config``, and
only when config.json has none of them, ``hf_quant_config.json`` (its ``quantization`` section, or the file itself).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from enum import Enum
from pathlib import Path

from atom_mxfp4.errors import expect, fail

KV_CACHE_DTYPE = "mxfp4"  # = geometry.KV_CACHE_DTYPE (kept free of geometry's torch import)
CONFIG, HF_QUANT = "config.json", "hf_quant_config.json"
MXFP4_ALGO = "MXFP4"
MXFP4_SCHEME = {"type": "float", "num_bits": 4, "group_size": 32, "scale_format": "e8m0"}
QUARK_SPEC = {"dtype": "fp4", "qscheme": "per_group", "group_size": 32, "scale_format": "e8m0"}


class Kind(str, Enum):
    NONE = "none"            # no KV-cache quantization declared
    MXFP4 = "mxfp4"          # ours: --kv-cache-dtype auto resolves to mxfp4
    OTHER = "other"          # another KV quantization (FP8, NVFP4, ...): SGLang's business
    MALFORMED = "malformed"  # contradictory or mistyped fields: not resolved to mxfp4, left to SGLang


@dataclass(frozen=True)
class KVDeclaration:
    kind: Kind
    field: str = ""      # where, e.g. "config.json quantization_config.kv_cache_quant_algo"
    value: object = None
    note: str = ""

    def describe(self) -> str:
        text = f"{self.field} = {self.value!r}" if self.field else "nothing"
        return text + (f" ({self.note})" if self.note else "")


NOTHING = KVDeclaration(Kind.NONE)


def _matches(spec: object, wanted: dict) -> bool:
    """Every key of ``wanted`` with that exact value and type (``4.0`` or ``True`` is not ``4``); extra keys allowed."""
    return isinstance(spec, dict) and all(k in spec and type(spec[k]) is type(v) and spec[k] == v
                                          for k, v in wanted.items())


def _field(where: str, key: str) -> str:
    """``config.json quantization_config`` + key -> ``...quantization_config.key``; a file alone -> ``file key``."""
    return f"{where}.{key}" if " " in where else f"{where} {key}"


def _modelopt(where: str, section: dict) -> KVDeclaration:
    algo, scheme = section.get("kv_cache_quant_algo"), section.get("kv_cache_scheme")
    found = []
    if algo is not None:
        if not isinstance(algo, str):
            return KVDeclaration(Kind.MALFORMED, _field(where, "kv_cache_quant_algo"), algo, "must be a string")
        kind = Kind.MXFP4 if algo.upper() == MXFP4_ALGO else Kind.OTHER
        found.append(KVDeclaration(kind, _field(where, "kv_cache_quant_algo"), algo))
    if scheme is not None:
        field = _field(where, "kv_cache_scheme")
        if isinstance(scheme, dict):
            found.append(KVDeclaration(Kind.MXFP4 if _matches(scheme, MXFP4_SCHEME) else Kind.OTHER, field, scheme))
        elif isinstance(scheme, str) and scheme.upper() == MXFP4_ALGO:
            return KVDeclaration(Kind.MALFORMED, field, scheme, "a scheme name is not an accepted MXFP4 form: use "
                                 "kv_cache_quant_algo 'MXFP4' or the scheme dict")
        elif isinstance(scheme, str):
            found.append(KVDeclaration(Kind.OTHER, field, scheme))
        else:
            return KVDeclaration(Kind.MALFORMED, field, scheme, "must be a dict (or a scheme name)")
    return _combine(found)


def _quark(where: str, section: dict) -> KVDeclaration:
    export = section.get("export")
    group = export.get("kv_cache_group") if isinstance(export, dict) else None
    if not group:
        return NOTHING
    field = _field(where, "export.kv_cache_group")
    if not (isinstance(group, list) and all(isinstance(n, str) for n in group)):
        return KVDeclaration(Kind.MALFORMED, field, group, "must be a list of layer-name patterns")
    layers = section.get("layer_quant_config")
    layers = layers if isinstance(layers, dict) else {}
    missing = [n for n in group if not isinstance(layers.get(n), dict)]
    if missing:
        return KVDeclaration(Kind.MALFORMED, field, group, f"layer_quant_config has no entry for {missing}")
    specs = {n: layers[n].get("output_tensors") for n in group}
    ours = [n for n, spec in specs.items() if _matches(spec, QUARK_SPEC)]
    out_field = _field(where, f"layer_quant_config[{group[0]!r}].output_tensors")
    if len(ours) == len(group):
        return KVDeclaration(Kind.MXFP4, out_field, specs[group[0]])
    if ours:
        return KVDeclaration(Kind.MALFORMED, field, group, f"only {ours} hold the MXFP4 spec {QUARK_SPEC}")
    return KVDeclaration(Kind.OTHER, out_field, specs[group[0]])


def _combine(found: list[KVDeclaration]) -> KVDeclaration:
    found = [d for d in found if d.kind is not Kind.NONE]
    if not found:
        return NOTHING
    bad = [d for d in found if d.kind is Kind.MALFORMED]
    if bad:
        return bad[0]
    kinds = {d.kind for d in found}
    if kinds == {Kind.MXFP4, Kind.OTHER}:
        first = next(d for d in found if d.kind is Kind.MXFP4)
        other = next(d for d in found if d.kind is Kind.OTHER)
        return KVDeclaration(Kind.MALFORMED, first.field, first.value, f"contradicted by {other.describe()}")
    return found[0]


def _as_dict(value: object) -> object:
    return value.to_dict() if hasattr(value, "to_dict") and not isinstance(value, dict) else value


def quant_section(config: dict, hf_quant: dict | None) -> tuple[str, object]:
    """(where, section) of the quantization metadata SGLang reads; ("", None) when there is none."""
    text = config.get("text_config")
    for where, value in (("quantization_config", config.get("quantization_config")),
                         ("text_config.quantization_config",
                          text.get("quantization_config") if isinstance(text, dict) else None),
                         ("compression_config", config.get("compression_config"))):
        if value is not None:
            return f"{CONFIG} {where}", _as_dict(value)
    if hf_quant is None:
        return "", None
    section = hf_quant.get("quantization", hf_quant) if isinstance(hf_quant, dict) else hf_quant
    if isinstance(section, dict) and isinstance(section.get("quantization"), dict):
        section = section["quantization"]  # SGLang's unwrap_modelopt_quantization_config
    return (f"{HF_QUANT} quantization" if "quantization" in hf_quant else HF_QUANT), section


def declaration(config: dict, hf_quant: dict | None = None) -> KVDeclaration:
    """What config.json (a dict) and hf_quant_config.json (a dict, or None when absent) declare for the KV cache."""
    where, section = quant_section(config, hf_quant)
    if section is None:
        return NOTHING
    if not isinstance(section, dict):
        return KVDeclaration(Kind.MALFORMED, where, section, "must be a JSON object")
    return _combine([_modelopt(where, section), _quark(where, section)])


def is_quark_mxfp4_spec(kv_cache_config: object) -> bool:
    """The one Quark KV-cache spec the plugin lets SGLang's Quark validation accept."""
    return _matches(kv_cache_config, QUARK_SPEC)


@dataclass(frozen=True)
class KVChoice:
    dtype: str          # what --kv-cache-dtype resolves to before SGLang's own rules ("auto": SGLang decides)
    source: str = ""    # where mxfp4 came from: "--kv-cache-dtype mxfp4" or "checkpoint <field> = <value>"
    warning: str = ""   # one line for the server log, or ""

    @property
    def from_checkpoint(self) -> bool:
        return self.source.startswith("checkpoint ")


def resolve_kv_dtype(requested: str, decl: KVDeclaration) -> KVChoice:
    """``--kv-cache-dtype`` against the checkpoint: an explicit value wins (one warning when the checkpoint asks
    for MXFP4 or mxfp4 overrides another declaration); ``auto`` on an MXFP4 declaration resolves to mxfp4."""
    requested = requested or "auto"
    if requested == KV_CACHE_DTYPE:
        warning = (f"--kv-cache-dtype mxfp4 wins over the checkpoint's KV cache declaration {decl.describe()}"
                   if decl.kind is Kind.OTHER else "")
        return KVChoice(KV_CACHE_DTYPE, "--kv-cache-dtype mxfp4", warning)
    if requested != "auto":
        warning = (f"--kv-cache-dtype {requested} wins over the checkpoint's MXFP4 KV cache ({decl.describe()})"
                   if decl.kind is Kind.MXFP4 else "")
        return KVChoice(requested, "", warning)
    if decl.kind is Kind.MXFP4:
        return KVChoice(KV_CACHE_DTYPE, f"checkpoint {decl.describe()}")
    if decl.kind is Kind.MALFORMED:
        return KVChoice("auto", "", f"the checkpoint's KV cache declaration {decl.describe()} is not an MXFP4 "
                        "declaration atom_mxfp4 accepts; --kv-cache-dtype auto is left to SGLang")
    return KVChoice("auto")


def read_json(path: Path) -> tuple[dict, str]:
    """(object, text) of a JSON file; refuses a missing, unreadable or non-object file naming it."""
    path = Path(path)
    expect(path.is_file(), str(path), "an existing file", "no such file")
    try:
        with open(path, encoding="utf-8", newline="") as f:  # newline="": keep \r\n for byte-exact rewrites
            text = f.read()
        value = json.loads(text.removeprefix("\ufeff"))
    except (UnicodeDecodeError, ValueError) as error:
        fail(str(path), "a JSON file", f"{type(error).__name__}: {str(error).splitlines()[0]}")
    expect(isinstance(value, dict), str(path), "a JSON object", type(value).__name__)
    return value, text


def load_local(root) -> tuple[dict, dict | None]:
    """config.json and hf_quant_config.json (None when absent) of a local checkpoint directory."""
    root = Path(root)
    config, _ = read_json(root / CONFIG)
    hf_quant = read_json(root / HF_QUANT)[0] if (root / HF_QUANT).exists() else None
    return config, hf_quant
