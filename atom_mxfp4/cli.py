"""The ``atom-mxfp4`` command: ``demo``, ``eval ...`` (evals), ``serve ...`` (SGLang with the plugin), ``config ...``
(a checkpoint's MXFP4 KV-cache flag).

Every leaf command is registered with ``command(parser, handler, check)``. What happens to bad input:

- a flag's value: its ``type=`` (``atom_mxfp4.argtypes``) refuses it, argparse names the flag, exit 2;
- a bad combination of flags: ``check(args)`` raises ``InvalidArgument`` (or ``BackendUnavailable``) naming the
  flags, reported through ``parser.error``, exit 2;
- the library refusing something during the run (``InvalidArgument`` from ``atom_mxfp4.errors``,
  ``BackendUnavailable``): one line ``atom-mxfp4 <cmd>: error: <message>``, exit 1;
- anything else is a bug and keeps its traceback.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from typing import Callable

import torch

from .backends import BackendUnavailable, resolve_backend
from .errors import InvalidArgument, expect

USER_ERRORS = (InvalidArgument, BackendUnavailable)


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Descriptions keep their line breaks; every flag's help states its default and unit itself."""


def command(parser: argparse.ArgumentParser, handler: Callable[[argparse.Namespace], int],
            check: Callable[[argparse.Namespace], None] | None = None) -> None:
    """Make ``parser`` a leaf command: ``handler(args) -> exit code`` runs it, ``check(args)`` (optional) refuses a
    bad combination of flags by raising ``InvalidArgument`` whose message names them."""
    parser.set_defaults(handler=handler, func=handler, check=check, command_parser=parser)


def resolved_device(args: argparse.Namespace) -> torch.device:
    """``--device``, or cuda when available, else cpu."""
    return torch.device(args.device or ("cuda" if torch.cuda.is_available() else "cpu"))


def check_backend(args: argparse.Namespace) -> None:
    """An explicit ``--backend`` must run on ``--device`` (it never falls back, so say so before the run)."""
    if args.backend is None:
        return
    device = resolved_device(args)
    try:
        resolve_backend(args.backend, device)
    except BackendUnavailable as error:
        raise BackendUnavailable(f"--backend {args.backend} with --device {device}: {error}") from None


def changed_options(parser: argparse.ArgumentParser, args: argparse.Namespace) -> list[tuple[argparse.Action, object]]:
    """The options of ``parser`` whose value in ``args`` differs from their default (a text default through its
    ``type=``, as argparse converts it)."""
    changed = []
    for action in parser._actions:
        if not action.option_strings or action.dest == "help":
            continue
        default = action.default
        if isinstance(default, str) and action.type is not None:
            default = action.type(default)
        value = getattr(args, action.dest, default)
        if value != default:
            changed.append((action, value))
    return changed


def refuse_others(args: argparse.Namespace, flag: str, allowed: tuple[str, ...]) -> None:
    """``flag`` runs nothing but ``allowed`` (option strings): refuse every other option given with it."""
    others = [a.option_strings[0] for a, _ in changed_options(args.command_parser, args)
              if a.option_strings[0] not in (flag, *allowed)]
    expect(not others, f"the options given with {flag}", f"only {' or '.join(allowed)} (it runs nothing else)",
           " ".join(others))


def _optional(module: str):
    """Sub-commands whose modules need optional extras register only when importable; say why otherwise."""
    try:
        return importlib.import_module(module), None
    except ImportError as error:
        return None, f"{module}: {error}"


def build_parser() -> argparse.ArgumentParser:
    from . import demo

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


def parse(parser: argparse.ArgumentParser, argv: list[str] | None = None) -> argparse.Namespace:
    """Parse ``argv`` and run the command's ``check``; a bad value or combination exits 2 naming the flag."""
    argv = list(sys.argv[1:] if argv is None else argv)
    rewrite = getattr(parser, "argv_rewriters", {}).get(argv[0] if argv else None)
    if rewrite is not None:
        argv = argv[:1] + rewrite(argv[1:])
    args = parser.parse_args(argv)
    if args.check is not None:
        try:
            args.check(args)
        except USER_ERRORS as error:
            args.command_parser.error(str(error))
    return args


def run(parser: argparse.ArgumentParser, argv: list[str] | None = None) -> int:
    """Parse, check and run; what the library refuses during the run is one line on stderr and exit 1."""
    args = parse(parser, argv)
    try:
        return int(args.handler(args) or 0)
    except USER_ERRORS as error:
        print(f"{args.command_parser.prog}: error: {error}", file=sys.stderr)
        return 1


def main(argv: list[str] | None = None) -> int:
    return run(build_parser(), argv)


if __name__ == "__main__":
    sys.exit(main())
