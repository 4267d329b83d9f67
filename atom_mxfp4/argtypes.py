"""argparse ``type=`` functions shared by every ``atom-mxfp4`` sub-command.

Each turns one flag's text into its value or raises ``argparse.ArgumentTypeError`` with ``must be <expected>, got
<text>``; argparse puts the flag in front and exits 2 (``atom-mxfp4 demo: error: argument --chunk: must be a
positive int, got -3``). Checks that need two flags live in each command's ``check`` (see ``atom_mxfp4.cli``).
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path
from typing import Callable, NoReturn
from urllib.parse import urlsplit

from .errors import must_be


def _shown(text: str) -> str:
    return text if text and text.strip() == text else repr(text)


def _refuse(expected: str, text: str) -> NoReturn:
    raise argparse.ArgumentTypeError(must_be(expected, _shown(text)))


def _int(text: str, expected: str) -> int:
    try:
        return int(text.strip(), 10)
    except ValueError:
        _refuse(expected, text)


def positive_int(text: str) -> int:
    value = _int(text, "a positive int")
    if value < 1:
        _refuse("a positive int", text)
    return value


def non_negative_int(text: str) -> int:
    value = _int(text, "an int >= 0")
    if value < 0:
        _refuse("an int >= 0", text)
    return value


SEED_LIMIT = 1 << 62  # torch generators take seeds below 2**64; a margin for the per-request offsets added to it


def seed(text: str) -> int:
    expected = "an int in [0, 2**62)"
    value = _int(text, expected)
    if not 0 <= value < SEED_LIMIT:
        _refuse(expected, text)
    return value


def non_negative_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        _refuse("a finite float >= 0", text)
    if not (math.isfinite(value) and value >= 0):
        _refuse("a finite float >= 0", text)
    return value


def comma_list(item: Callable[[str], object], expected: str, allow_empty: bool = False) -> Callable[[str], list]:
    """A ``type=`` for ``a,b,c``: every item through ``item`` (an ``ArgumentTypeError`` names the list and the item).

    ``allow_empty``: ``""`` means the empty list; otherwise at least one item. Empty items (``a,,b``) are refused.
    """
    what = f"a {'' if allow_empty else 'non-empty '}comma list of {expected}"

    def parse(text: str) -> list:
        if allow_empty and not text.strip():
            return []
        items = [part.strip() for part in text.split(",")]
        if not all(items):
            _refuse(what, text)
        values = []
        for part in items:
            try:
                values.append(item(part))
            except argparse.ArgumentTypeError as error:
                raise argparse.ArgumentTypeError(f"{must_be(what, _shown(text))}: item {error}") from None
        return values

    parse.__name__ = f"comma list of {expected}"
    return parse


def one_of(choices) -> Callable[[str], str]:
    """An item type for ``comma_list``: one of ``choices`` (case-insensitive), returned lower-case."""
    choices = tuple(choices)

    def parse(text: str) -> str:
        if text.lower() not in choices:
            _refuse(f"one of {list(choices)}", text)
        return text.lower()

    return parse


def fraction(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        _refuse("a fraction in [0, 1]", text)
    if not 0.0 <= value <= 1.0:
        _refuse("a fraction in [0, 1]", text)
    return value


positive_ints = comma_list(positive_int, "positive ints")
seeds = comma_list(seed, "seeds")
fractions = comma_list(fraction, "fractions in [0, 1]")


def scale_modes(text: str) -> list[str]:
    """ScaleMode names (lower-case), e.g. ``mse,ceil``."""
    from .format import ScaleMode

    return comma_list(one_of(m.value for m in ScaleMode), "ScaleMode names")(text)


def device(text: str) -> str:
    """``cpu``, ``cuda`` or ``cuda:N`` that exists here (a ROCm GPU is a ``cuda`` device in torch)."""
    import torch

    expected = "cpu, cuda or cuda:N"
    try:
        parsed = torch.device(text)
    except RuntimeError:
        _refuse(expected, text)
    if parsed.type not in ("cpu", "cuda"):
        _refuse(expected, text)
    if parsed.type == "cuda":
        if not torch.cuda.is_available():
            _refuse("cpu here (torch.cuda.is_available() is False: no CUDA/ROCm device or a CPU-only torch)", text)
        count = torch.cuda.device_count()
        if parsed.index is not None and parsed.index >= count:
            _refuse(f"cpu or cuda:N with N < {count} (the CUDA devices here)", text)
    return str(parsed)


def existing_file(text: str) -> Path:
    path = Path(text).expanduser()
    if not path.is_file():
        _refuse("an existing file", text + (" (a directory)" if path.is_dir() else " (no such file)"))
    return path


def existing_dir(text: str) -> Path:
    path = Path(text).expanduser()
    if not path.is_dir():
        _refuse("an existing directory", text + (" (a file)" if path.exists() else " (no such directory)"))
    return path


def output_file(text: str) -> Path:
    """A file to write (its folder is created): not an existing directory."""
    path = Path(text).expanduser()
    if not text or path.is_dir():
        _refuse("a file path (not a directory)", text)
    return path


def output_dir(text: str) -> Path:
    """A folder to write into (created if missing): not an existing file."""
    path = Path(text).expanduser()
    if not text or (path.exists() and not path.is_dir()):
        _refuse("a directory path (not an existing file)", text)
    return path


def http_url(text: str) -> str:
    """``http(s)://host[:port][/path]``."""
    expected = "an http(s)://host[:port] URL"
    try:
        parts = urlsplit(text)
        port_ok = parts.port is None or 0 < parts.port < 65536  # .port raises ValueError on a non-number
    except ValueError:
        _refuse(expected, text)
    if parts.scheme not in ("http", "https") or not parts.hostname or not port_ok:
        _refuse(expected, text)
    return text


def non_empty(text: str) -> str:
    if not text.strip():
        _refuse("a non-empty string", text)
    return text
