"""``atom-mxfp4 serve ...``: start ``sglang serve`` with the plugin and ``--kv-cache-dtype mxfp4``.

The plugin itself is loaded by SGLang through its entry point (in the server and every scheduler process); this
wrapper only adds ``--kv-cache-dtype mxfp4`` and passes every other argument through unchanged. It refuses to start
(one line, exit 1) where SGLang would not run the plugin or ATOM would own the model: ``SGLANG_PLUGINS`` set without
``atom_mxfp4``, ``SGLANG_EXTERNAL_MODEL_PACKAGE`` naming ATOM's package (coexist.py).

``--index-k-dtype mxfp4|fp8`` sets ``ATOM_MXFP4_INDEX_K_DTYPE`` for the server (the index-K cache dtype of sparse
layers; options.py); ``--dry-run`` shows it in front of the command.

The wrapper's own flags (``--dry-run``, ``--index-k-dtype D``, ``-h``) come first; the first other argument (or what
follows ``--``)
starts the SGLang arguments. ``--dry-run`` is the wrapper's wherever it stands (``sglang serve`` has no such flag),
so a line holding it never starts SGLang.
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys

from atom_mxfp4.commands import HelpFormatter, command
from atom_mxfp4.errors import expect

from atom_mxfp4.index_k import DEFAULT_INDEX_K_DTYPE, IndexKDtype

from . import coexist, options
from .geometry import KV_CACHE_DTYPE

SGLANG = [sys.executable, "-c", "import sys; from sglang.cli.main import main; sys.argv[0] = 'sglang'; main()"]
DRY_RUN = "--dry-run"
INDEX_K = "--index-k-dtype"
HELP = ("-h", "--help")
EXAMPLES = (  # shown by --help; tests/test_cli.py parses each one
    "atom-mxfp4 serve MiniMaxAI/MiniMax-M3 --tp 4",
    "atom-mxfp4 serve --model-path MiniMaxAI/MiniMax-M3 --tp 4",
    "atom-mxfp4 serve --dry-run -- --model-path MiniMaxAI/MiniMax-M3 --tp 4",
    "atom-mxfp4 serve --index-k-dtype mxfp4 MiniMaxAI/MiniMax-M3 --tp 4",
)


def rewrite_argv(tokens: list[str]) -> list[str]:
    """serve's tokens as ``[wrapper flags] -- [SGLang arguments]`` for argparse.

    argparse's REMAINDER positional cannot start with an option it does not know (``--model-path``) and keeps a
    ``--dry-run`` that follows the first SGLang argument for SGLang; this split does neither.
    """
    tokens = list(tokens)
    wrapper = []
    while tokens and (tokens[0] in (DRY_RUN, INDEX_K, *HELP) or tokens[0].startswith(INDEX_K + "=")):
        wrapper.append(tokens.pop(0))
        if wrapper[-1] == INDEX_K and tokens:  # its value
            wrapper.append(tokens.pop(0))
    if tokens[:1] == ["--"]:
        tokens.pop(0)
    if DRY_RUN in tokens:
        wrapper.append(DRY_RUN)
        tokens = [t for t in tokens if t != DRY_RUN]
    return wrapper + ["--"] + tokens


def sglang_command(passthrough: list[str]) -> list[str]:
    """The ``sglang serve`` argv for the user's arguments; refuses a conflicting ``--kv-cache-dtype``."""
    args = list(passthrough)
    if args[:1] == ["--"]:
        args = args[1:]
    for i, arg in enumerate(args):
        if arg == "--kv-cache-dtype":
            value = args[i + 1] if i + 1 < len(args) else "nothing"
        elif arg.startswith("--kv-cache-dtype="):
            value = arg.split("=", 1)[1]
        else:
            continue
        expect(value == KV_CACHE_DTYPE, "--kv-cache-dtype", f"{KV_CACHE_DTYPE} (or left out)", value)
    if not any(a == "--kv-cache-dtype" or a.startswith("--kv-cache-dtype=") for a in args):
        args += ["--kv-cache-dtype", KV_CACHE_DTYPE]
    return SGLANG + ["serve"] + args


def _passthrough(args) -> list[str]:
    # argparse keeps the "--" that rewrite_argv put in front of the REMAINDER on some Python versions
    return args.sglang_args[1:] if args.sglang_args[:1] == ["--"] else args.sglang_args


def check(args) -> None:
    passthrough = _passthrough(args)
    expect(bool(passthrough), "the SGLang arguments", "given (MODEL_PATH [OPTIONS ...] or --model-path M ...)",
           "none")
    sglang_command(passthrough)  # refuses a conflicting --kv-cache-dtype


def run(args) -> int:
    command_line = sglang_command(_passthrough(args))
    coexist.check_plugin_loaded(os.environ)  # inside SGLang nothing of ours would run to say so
    coexist.check_external_package(os.environ)
    env = {} if args.index_k_dtype is None else {options.INDEX_K_DTYPE_ENV: args.index_k_dtype}
    if args.dry_run:
        print(shlex.join([f"{k}={v}" for k, v in env.items()] + command_line))
        return 0
    os.environ.update(env)  # inherited by sglang serve and its scheduler processes
    os.execv(command_line[0], command_line)  # replaces this process: signals and exit status are SGLang's
    return 0  # not reached


def add_parser(subparsers) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "serve", help="sglang serve with --kv-cache-dtype mxfp4 (MiniMax-M3 sparse models)",
        description=__doc__ + "\nExamples:\n" + "\n".join(f"  {e}" for e in EXAMPLES),
        formatter_class=HelpFormatter)
    parser.add_argument(DRY_RUN, action="store_true",
                        help="print the sglang command instead of running it (default: run it)")
    parser.add_argument(INDEX_K, choices=[m.value for m in IndexKDtype], default=None,
                        help="the index-K cache dtype of sparse layers: sets "
                        f"{options.INDEX_K_DTYPE_ENV} for the server "
                        f"(default: leave it as it is; unset means {DEFAULT_INDEX_K_DTYPE}). fp8 costs 132 B per token "
                        "and sparse layer, mxfp4 68 B but loses needles at long context (docs/accuracy.md)")
    parser.add_argument("sglang_args", nargs=argparse.REMAINDER, metavar="SGLANG_ARGS",
                        help="arguments passed to sglang serve unchanged, --kv-cache-dtype mxfp4 added "
                        "(a model path first, or --model-path M; anything else sglang serve takes)")
    command(parser, run, check)
    return parser
