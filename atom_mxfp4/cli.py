"""The ``atom-mxfp4`` command: ``demo``, ``eval ...`` (evals), ``serve ...`` (SGLang with the plugin), ``config ...``
(a checkpoint's MXFP4 KV-cache flag).

This is the entry point only: it assembles the sub-commands, each registered with ``commands.command(parser,
handler, check)``; ``atom_mxfp4.commands`` says what happens to bad input.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from . import demo
from .commands import HelpFormatter, command, parse, run  # noqa: F401  (parse: the tests' entry)


def _optional(module: str):
    """Sub-commands whose modules need optional extras register only when importable; say why otherwise."""
    try:
        return importlib.import_module(module), None
    except ImportError as error:
        return None, f"{module}: {error}"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="atom-mxfp4", description="MXFP4 KV cache + block-sparse attention")
    parser.argv_rewriters = {}  # command -> rewrite of its own arguments before argparse sees them (serve)
    sub = parser.add_subparsers(dest="command", required=True)
    demo_parser = sub.add_parser("demo", help="run the layer on synthetic MiniMax-M3 requests vs the oracle",
                                 description=demo.__doc__, formatter_class=HelpFormatter)
    demo.add_arguments(demo_parser)
    command(demo_parser, demo.run, demo.check)
    for name in ("atom_mxfp4.evals.cli", "atom_mxfp4.model_patches.sglang.cli",
                 "atom_mxfp4.model_patches.sglang.config_cli"):
        module, why = _optional(name)
        if module is not None:
            added = module.add_parser(sub)
            if hasattr(module, "rewrite_argv"):
                parser.argv_rewriters[added.prog.split()[-1]] = module.rewrite_argv
        else:
            parser.epilog = (parser.epilog or "") + f"\n(unavailable: {why})"
    return parser


def main(argv: list[str] | None = None) -> int:
    return run(build_parser(), argv)


if __name__ == "__main__":
    sys.exit(main())
