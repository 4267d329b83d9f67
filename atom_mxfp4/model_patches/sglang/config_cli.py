"""``atom-mxfp4 config show DIR|HF_ID`` and ``atom-mxfp4 config enable-kv DIR``: a checkpoint's MXFP4 KV flag.

``show`` prints what the checkpoint declares for its KV cache (config.json / hf_quant_config.json, read the way
SGLang 0.5.23 reads them), what ``--kv-cache-dtype auto`` and an explicit value resolve to with the atom_mxfp4
plugin (the model checks at TP 1; other TP sizes are checked at start-up), and whether this environment lets
SGLang load the plugin (SGLANG_PLUGINS, SGLANG_EXTERNAL_MODEL_PACKAGE). An HF_ID is fetched through
huggingface_hub (only the local cache when HF_HUB_OFFLINE=1); nothing else is downloaded.

``enable-kv`` writes ``kv_cache_quant_algo: MXFP4`` where SGLang reads it (checkpoint_edit.py): idempotent, every
other byte kept, never a half-written file; it refuses a checkpoint the MXFP4 cache cannot serve, a file it cannot
parse, and a checkpoint that already declares another KV quantization.

Examples:
  atom-mxfp4 config show MiniMaxAI/MiniMax-M3
  atom-mxfp4 config enable-kv /models/MiniMax-M3
"""

from __future__ import annotations

import argparse
import os
import re
from pathlib import Path
from types import SimpleNamespace

from atom_mxfp4.argtypes import existing_dir
from atom_mxfp4.commands import HelpFormatter, command
from atom_mxfp4.errors import fail, must_be

from . import coexist
from .checkpoint import CONFIG, HF_QUANT, Kind, declaration, load_local, read_json, resolve_kv_dtype

HUB_ID = re.compile(r"^[\w.-]+/[\w.-]+$")
TRUE = {"1", "ON", "YES", "TRUE"}


def checkpoint_ref(text: str) -> str:
    """argparse type: an existing directory, or a Hugging Face model id ``owner/name``."""
    if Path(text).expanduser().is_dir() or HUB_ID.match(text):
        return text
    raise argparse.ArgumentTypeError(must_be("an existing directory or a Hugging Face model id (owner/name)",
                                             f"{text!r} (no such directory)"))


def _offline() -> bool:
    return os.environ.get("HF_HUB_OFFLINE", "").upper() in TRUE


def _hub_file(repo: str, filename: str, required: bool) -> Path | None:
    """A file of a Hub repo through huggingface_hub (cache only when offline); None when the repo lacks it."""
    try:
        from huggingface_hub import hf_hub_download
        from huggingface_hub.errors import EntryNotFoundError, LocalEntryNotFoundError
    except ImportError as error:
        fail(f"{repo} {filename}", "fetchable (huggingface_hub, which SGLang installs, is missing)", error)
    try:
        return Path(hf_hub_download(repo, filename, local_files_only=_offline()))
    except LocalEntryNotFoundError:
        if not required:
            return None
        why = ("HF_HUB_OFFLINE=1 and it is not in the local cache" if _offline() else
               "the Hub is unreachable and it is not in the local cache (HF_HUB_OFFLINE=1 reads the cache only)")
        fail(f"{repo} {filename}", "fetchable from the Hugging Face Hub or its local cache",
             f"could not be fetched: {why}")
    except EntryNotFoundError:
        if required:
            fail(f"{repo} {filename}", "present in the repository", "no such file")
        return None
    except (OSError, ValueError) as error:  # network / HTTP errors are OSError; a malformed id ValueError
        fail(f"{repo} {filename}", "fetchable from the Hugging Face Hub or its local cache",
             f"could not be fetched: {type(error).__name__}: {(str(error).splitlines() or [''])[0]}")


def load(ref: str) -> tuple[dict, dict | None, str]:
    """(config.json, hf_quant_config.json or None, a description of where they came from)."""
    root = Path(ref).expanduser()
    if root.is_dir():
        config, hf_quant = load_local(root)
        return config, hf_quant, f"{root} (local directory)"
    config, _ = read_json(_hub_file(ref, CONFIG, required=True))
    hf_quant_path = _hub_file(ref, HF_QUANT, required=False)
    hf_quant = read_json(hf_quant_path)[0] if hf_quant_path is not None else None
    return config, hf_quant, f"{ref} (Hugging Face Hub{', local cache only' if _offline() else ''})"


def model_refusal(config: dict) -> str:
    """Why the MXFP4 cache cannot serve this config.json at TP 1 ("" if it can): geometry.check_model's message."""
    from .geometry import check_model
    try:
        check_model(SimpleNamespace(**config), attn_tp_size=1)
    except ValueError as error:
        return str(error)
    except (TypeError, KeyError, AttributeError) as error:  # a field the checks read is missing or mistyped
        return (f"--kv-cache-dtype mxfp4: config.json must hold the MiniMax-M3 fields, "
                f"got {type(error).__name__}: {error}")
    return ""


def report(config: dict, hf_quant: dict | None, where: str, env) -> list[str]:
    decl = declaration(config, hf_quant)
    refusal = model_refusal(config)
    lines = [f"checkpoint: {where}", f"architecture: {(config.get('architectures') or [None])[0]}",
             f"KV cache declared: {decl.kind.value}" + (f": {decl.describe()}" if decl.kind is not Kind.NONE else "")]
    auto = resolve_kv_dtype("auto", decl)
    if auto.dtype == "mxfp4":
        lines.append(f"--kv-cache-dtype auto (the default): mxfp4, from {auto.source}"
                     + (f"; refused at start-up: {refusal}" if refusal else ""))
    else:
        lines.append("--kv-cache-dtype auto (the default): SGLang's own choice; atom_mxfp4 stays out"
                     + (f" (the server logs: atom_mxfp4: {auto.warning})" if auto.warning else ""))
    lines.append("--kv-cache-dtype mxfp4: " + (f"refused at start-up: {refusal}" if refusal else
                                               "served by atom_mxfp4 (checked at TP 1)"))
    if decl.kind is Kind.MXFP4:
        lines.append("--kv-cache-dtype bf16 (or another explicit value): that value wins; the server logs: "
                     f"atom_mxfp4: {resolve_kv_dtype('bf16', decl).warning}")
    problems = coexist.problems(env)
    lines += [f"environment: {p}" for p in problems] or [
        "environment: nothing keeps SGLang from loading atom_mxfp4 "
        f"({coexist.PLUGINS_ENV}={env.get(coexist.PLUGINS_ENV, '')!r}, "
        f"{coexist.EXTERNAL_ENV}={env.get(coexist.EXTERNAL_ENV, '')!r})"]
    return lines


def show(args) -> int:
    print("\n".join(report(*load(args.checkpoint), os.environ)))
    return 0


def enable(args) -> int:
    from .checkpoint_edit import enable_kv_or_refuse
    config, _ = read_json(args.directory / CONFIG)
    refusal = model_refusal(config)
    if refusal:
        fail(str(args.directory), "a checkpoint the MXFP4 KV cache serves (flagged, SGLang with atom_mxfp4 would "
             "refuse it at start-up; nothing was written)", refusal)
    print(enable_kv_or_refuse(args.directory).how)
    return 0


def add_parser(subparsers) -> argparse.ArgumentParser:
    parser = subparsers.add_parser("config", help="a checkpoint's MXFP4 KV-cache flag: show it, or write it",
                                   description=__doc__, formatter_class=HelpFormatter)
    sub = parser.add_subparsers(dest="config_command", required=True)
    show_parser = sub.add_parser("show", help="what the checkpoint declares and what SGLang would resolve",
                                 description=__doc__, formatter_class=HelpFormatter)
    show_parser.add_argument("checkpoint", type=checkpoint_ref, metavar="DIR|HF_ID",
                             help="a local checkpoint directory or a Hugging Face model id (required)")
    command(show_parser, show)
    enable_parser = sub.add_parser("enable-kv", help="declare an MXFP4 KV cache in a local checkpoint",
                                   description=__doc__, formatter_class=HelpFormatter)
    enable_parser.add_argument("directory", type=existing_dir, metavar="DIR",
                               help="the local checkpoint directory holding config.json (required)")
    command(enable_parser, enable)
    return parser
