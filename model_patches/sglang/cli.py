"""``atom-mxfp4 serve ...``: start ``sglang serve`` with the plugin and ``--kv-cache-dtype mxfp4``.

The plugin itself is loaded by SGLang through its entry point (in the server and every scheduler process); this
wrapper only adds ``--kv-cache-dtype mxfp4`` and passes every other argument through unchanged.
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys

from atom_mxfp4.cli import command

from .geometry import KV_CACHE_DTYPE

SGLANG = [sys.executable, "-c", "import sys; from sglang.cli.main import main; sys.argv[0] = 'sglang'; main()"]


def sglang_command(passthrough: list[str]) -> list[str]:
    """The ``sglang serve`` argv for the user's arguments; refuses a conflicting ``--kv-cache-dtype``."""
    args = list(passthrough)
    if args[:1] == ["--"]:
        args = args[1:]
    for i, arg in enumerate(args):
        value = arg.split("=", 1)[1] if arg.startswith("--kv-cache-dtype=") else (
            args[i + 1] if arg == "--kv-cache-dtype" and i + 1 < len(args) else None)
        if value is not None and value != KV_CACHE_DTYPE:
            raise SystemExit(f"atom-mxfp4 serve: --kv-cache-dtype must be {KV_CACHE_DTYPE} (or left out), got {value}")
    if not any(a == "--kv-cache-dtype" or a.startswith("--kv-cache-dtype=") for a in args):
        args += ["--kv-cache-dtype", KV_CACHE_DTYPE]
    return SGLANG + ["serve"] + args


def run(args) -> int:
    command = sglang_command(args.sglang_args)
    if args.dry_run:
        print(shlex.join(command))
        return 0
    os.execv(command[0], command)  # replaces this process: signals and exit status are SGLang's
    return 0  # not reached


def add_parser(subparsers) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "serve", help="sglang serve with --kv-cache-dtype mxfp4 (MiniMax-M3 sparse models)",
        description=__doc__ + "\nExample: atom-mxfp4 serve --model-path MiniMaxAI/MiniMax-M3 --tp 4",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dry-run", action="store_true", help="print the sglang command instead of running it")
    parser.add_argument("sglang_args", nargs=argparse.REMAINDER, help="arguments passed to sglang serve")
    command(parser, run)
    return parser
