"""``atom-mxfp4 config enable-kv DIR``: declare an MXFP4 KV cache in a local checkpoint, ModelOpt style.

Where the field goes is where SGLang 0.5.23 reads it (checkpoint.quant_section): into config.json's
``quantization_config`` when the checkpoint has one; otherwise into hf_quant_config.json's ``quantization``
section (the file is created when missing). An unquantized checkpoint cannot carry the field in config.json:
SGLang refuses a ``quantization_config`` that names no weight method (``Unknown quantization method: .``), and
transformers and SGLang would try to load the weights through a ModelOpt method if one were named.

The field is inserted as text into the existing object, so every other byte of the file stays as it was; the
result is re-parsed and compared with the intended object, and only if that check fails is the file re-serialized.
The new text goes to a temporary file in the same folder, then ``os.replace`` (a symlinked file, e.g. in the
Hugging Face cache, is replaced by a regular file; its target is left alone). On any failure the original stays.
"""

from __future__ import annotations

import copy
import json
import os
import stat
import tempfile
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path

from atom_mxfp4.errors import expect, fail

from .checkpoint import CONFIG, HF_QUANT, MXFP4_ALGO, Kind, declaration, read_json

FIELD = "kv_cache_quant_algo"
NEW_HF_QUANT = {"producer": {"name": "atom-mxfp4"}, "quantization": {FIELD: MXFP4_ALGO}}


@dataclass(frozen=True)
class Edit:
    path: Path
    changed: bool
    how: str  # one line for the user


def _skip_ws(s: str, i: int) -> int:
    while i < len(s) and s[i] in " \t\r\n":
        i += 1
    return i


def _end_of_string(s: str, i: int) -> int:
    i += 1  # s[i] is the opening quote
    while s[i] != '"':
        i += 2 if s[i] == "\\" else 1
    return i + 1


def _end_of_value(s: str, i: int) -> int:
    i = _skip_ws(s, i)
    if s[i] == '"':
        return _end_of_string(s, i)
    if s[i] in "{[":
        close, i = ("}" if s[i] == "{" else "]"), i + 1
        while True:
            i = _skip_ws(s, i)
            if s[i] == close:
                return i + 1
            if close == "}":
                i = _skip_ws(s, _end_of_string(s, i)) + 1  # key, then ':'
            i = _skip_ws(s, _end_of_value(s, i))
            if s[i] == ",":
                i += 1
    while i < len(s) and s[i] not in ",}] \t\r\n":
        i += 1
    return i


def _members(s: str, start: int):
    """(key, key_start, value_start) of the object opening at ``s[start]`` (valid JSON assumed)."""
    i = start + 1
    while True:
        i = _skip_ws(s, i)
        if s[i] == "}":
            return
        key_end = _end_of_string(s, i)
        value_start = _skip_ws(s, _skip_ws(s, key_end) + 1)
        yield json.loads(s[i:key_end]), i, value_start
        i = _skip_ws(s, _end_of_value(s, value_start))
        if s[i] == ",":
            i += 1


def _object_at(s: str, path: tuple[str, ...]) -> int:
    i = _skip_ws(s, 1 if s.startswith("\ufeff") else 0)
    for key in path:  # the last duplicate wins, as in json.loads
        i = [v for k, _, v in _members(s, i) if k == key][-1]
    return i


def insert_field(text: str, path: tuple[str, ...], key: str, value: str) -> str:
    """``text`` with ``"key": "value"`` as the first member of the object at ``path``, in the file's own style."""
    start = _object_at(text, path)
    members = list(_members(text, start))
    item = json.dumps(key)
    if not members:
        return text[:start + 1] + f"{item}: {json.dumps(value)}" + text[start + 1:]
    _, first_key, first_value = members[0]
    lead = text[start + 1:first_key]  # e.g. "\n    " (indented) or "" (compact)
    key_end = _end_of_string(text, first_key)
    sep = text[key_end:first_value]   # e.g. ": "
    gap = lead if "\n" in lead else (text[_skip_ws(text, _end_of_value(text, first_value)) + 1:members[1][1]]
                                     if len(members) > 1 else " ")
    return text[:first_key] + f"{item}{sep}{json.dumps(value)}," + gap + text[first_key:]


def _indent_of(text: str) -> int | None:
    """The indent of the file's second non-blank line (None: a one-line file)."""
    lines = [ln for ln in text.splitlines()[1:] if ln.strip()]
    if not lines:
        return None
    return len(lines[0]) - len(lines[0].lstrip(" ")) or None


def write_atomic(path: Path, text: str, mode_from: Path | None = None) -> None:
    """Write ``text`` to a temporary file beside ``path``, then ``os.replace``; the temporary file never outlives a
    failure, and ``path`` is either the old file or the new one."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        source = path if path.exists() else mode_from
        if source is not None and source.exists():
            os.chmod(tmp, stat.S_IMODE(source.stat().st_mode))
        os.replace(tmp, path)
    except BaseException:
        with suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def _target(root: Path, config: dict) -> tuple[Path, tuple[str, ...]]:
    """The file and the object path SGLang reads the KV field from (checkpoint.quant_section's order)."""
    text_config = config.get("text_config")
    if config.get("quantization_config") is not None:
        return root / CONFIG, ("quantization_config",)
    if isinstance(text_config, dict) and text_config.get("quantization_config") is not None:
        return root / CONFIG, ("text_config", "quantization_config")
    if config.get("compression_config") is not None:
        return root / CONFIG, ("compression_config",)
    return root / HF_QUANT, ("quantization",)


def enable_kv(root) -> Edit:
    """Declare ``kv_cache_quant_algo: MXFP4`` in the checkpoint at ``root``; idempotent."""
    root = Path(root)
    config, config_text = read_json(root / CONFIG)
    path, obj_path = _target(root, config)
    if path.name == HF_QUANT and not path.exists():
        write_atomic(path, json.dumps(NEW_HF_QUANT, indent=4) + "\n", mode_from=root / CONFIG)
        return Edit(path, True, f"wrote {path} ({FIELD}: {MXFP4_ALGO}; config.json has no quantization_config, so "
                    "SGLang reads the KV field from this file)")
    document, text = (config, config_text) if path.name == CONFIG else read_json(path)
    if path.name == HF_QUANT and not isinstance(document.get("quantization"), dict):
        expect("quantization" not in document, f"{path} 'quantization'", "a JSON object",
               type(document.get("quantization")).__name__)
        obj_path = ()  # a flat hf_quant_config.json
    decl = declaration(config, document if path.name == HF_QUANT else None)
    if decl.kind is Kind.MXFP4:
        return Edit(path, False, f"{path} already declares an MXFP4 KV cache: {decl.describe()}")
    expect(decl.kind is Kind.NONE, "the checkpoint's KV cache declaration", "none (enable-kv adds one; it does not "
           "replace another: edit the file to change it)", decl.describe())
    section = document
    for key in obj_path:
        section = section[key]
    expect(isinstance(section, dict), f"{path} {'.'.join(obj_path) or 'top level'}", "a JSON object",
           type(section).__name__)
    expected = copy.deepcopy(document)
    target = expected
    for key in obj_path:
        target = target[key]
    target[FIELD] = MXFP4_ALGO
    new_text, how = insert_field(text, obj_path, FIELD, MXFP4_ALGO), "inserted"
    if json.loads(new_text.removeprefix("\ufeff")) != expected:  # the scanner misread an unusual file: re-serialize
        new_text, how = json.dumps(expected, indent=_indent_of(text), ensure_ascii=False) + "\n", "re-serialized"
    write_atomic(path, new_text)
    where = ".".join(obj_path) or "top level"
    return Edit(path, True, f"{how} {FIELD}: {MXFP4_ALGO} into {path} ({where})")


def enable_kv_or_refuse(root) -> Edit:
    """``enable_kv`` with an ``OSError`` (permissions, a full disk) as a one-line refusal."""
    try:
        return enable_kv(root)
    except OSError as error:
        fail(f"writing the KV field into {root}", "possible (the files are left as they were)",
             f"{type(error).__name__}: {error}")
