"""What every ``atom-mxfp4`` sub-command uses: registering a leaf command, the shared flags, parsing and running.

Sub-command modules (``demo``, ``evals.cli``, ``model_patches.sglang.cli``, ...) import this module; ``atom_mxfp4.cli``
(the entry point) imports them, so the import graph stays one-way. What happens to bad input:

- a flag's value: its ``type=`` (``atom_mxfp4.argtypes``) refuses it, argparse names the flag, exit 2;
- a bad combination of flags: ``check(args)`` raises ``InvalidArgument`` (or ``BackendUnavailable``) naming the
  flags, reported through ``parser.error``, exit 2;
- the library refusing something during the run (``InvalidArgument`` from ``atom_mxfp4.errors``,
  ``BackendUnavailable``): one line ``atom-mxfp4 <cmd>: error: <message>``, exit 1;
- anything else is a bug and keeps its traceback.
"""

from __future__ import annotations

import argparse
import sys
from typing import Callable

import torch

from .backends import BACKENDS, BackendUnavailable, resolve_backend
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


def add_backend_option(parser: argparse.ArgumentParser) -> None:
    """``--backend``: its choices are the registered backends (``atom_mxfp4.backends.BACKENDS``)."""
    parser.add_argument("--backend", default=None, choices=BACKENDS,
                        help="force a kernel backend; it must run on --device (default: the best for the device)")


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
