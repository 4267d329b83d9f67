"""The ``atom-mxfp4`` command: ``demo``, ``eval ...`` (evals), ``serve ...`` (SGLang with the plugin)."""

from __future__ import annotations

import argparse
import importlib
import sys


def _optional(module: str):
    """Sub-commands whose modules need optional extras register only when importable; say why otherwise."""
    try:
        return importlib.import_module(module), None
    except ImportError as error:
        return None, f"{module}: {error}"


def build_parser() -> argparse.ArgumentParser:
    from . import demo

    parser = argparse.ArgumentParser(prog="atom-mxfp4", description="MXFP4 KV cache + block-sparse attention")
    sub = parser.add_subparsers(dest="command", required=True)
    demo_parser = sub.add_parser("demo", help="run the layer on synthetic MiniMax-M3 requests vs the oracle",
                                 description=demo.__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    demo.add_arguments(demo_parser)
    demo_parser.set_defaults(handler=demo.run)
    for name in ("atom_mxfp4.evals.cli", "atom_mxfp4.model_patches.sglang.cli"):
        module, why = _optional(name)
        if module is not None:
            module.add_parser(sub)
        else:
            parser.epilog = (parser.epilog or "") + f"\n(unavailable: {why})"
    return parser


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    return int(args.handler(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
