"""`atom-mxfp4 eval {gsm8k, accuracy}`.

`add_parser(subparsers)` adds the `eval` command to the top-level CLI (atom_mxfp4/cli.py); every leaf
parser is registered with `atom_mxfp4.commands.command` (`handler(args) -> int`, also as `func`; `check(args)` for
flag combinations). `python -m atom_mxfp4.evals.cli eval ...` runs it alone.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from atom_mxfp4 import argtypes
from atom_mxfp4.commands import HelpFormatter, command, refuse_others, run
from atom_mxfp4.errors import expect, must_be


TOKENIZER_BACKENDS = ("none", "huggingface", "tiktoken", "remote")  # lm-eval's local-completions tokenizer_backend


def _gsm8k_data_dir(text: str) -> Path:
    """A folder holding GSM8K's test.jsonl and train.jsonl."""
    path = argtypes.existing_dir(text)
    missing = [name for name in ("test.jsonl", "train.jsonl") if not (path / name).is_file()]
    if missing:
        raise argparse.ArgumentTypeError(must_be("a folder holding test.jsonl and train.jsonl",
                                                 f"{text} (missing {', '.join(missing)})"))
    return path


def _check_gsm8k(args: argparse.Namespace) -> None:
    if args.compare:
        refuse_others(args, "--compare", ("--output",))
        return
    expect(args.url is not None, "--url", "given (or --compare CANDIDATE_JSON BASELINE_JSON)", "neither")
    expect(args.baseline_model is None or args.baseline_url is not None, "--baseline-model",
           "given only with --baseline-url", repr(args.baseline_model))


def _cmd_gsm8k(args: argparse.Namespace) -> int:
    from .gsm8k import compare_files, expect_reachable, format_table, run_ab

    if args.compare:
        summary = compare_files(*args.compare)
    else:
        for flag, url in (("--url", args.url), ("--baseline-url", args.baseline_url)):
            if url is not None:
                expect_reachable(url, flag)
        summary = run_ab(
            args.url, args.baseline_url, model=args.model, baseline_model=args.baseline_model, api=args.api,
            data_dir=args.data_dir, limit=args.limit, num_concurrent=args.num_concurrent,
            max_gen_toks=args.max_gen_toks, num_fewshot=args.num_fewshot,
            tokenizer_backend=args.tokenizer_backend, timeout=args.timeout,
        )
    print(format_table(summary))
    text = json.dumps(summary, indent=1)
    if args.output:
        args.output.parent.mkdir(parents=True, exist_ok=True)
        args.output.write_text(text + "\n")
        print(f"wrote {args.output}")
    else:
        print(text)
    return 0


def _cmd_accuracy(args: argparse.Namespace) -> int:
    from .accuracy import run_study

    run_study(args)
    return 0


def add_parser(subparsers) -> argparse.ArgumentParser:
    """Add `eval` (with `gsm8k` and `accuracy`) to an argparse sub-parser collection."""
    ev = subparsers.add_parser("eval", help="GSM8K A/B through lm-eval, and the MXFP4 accuracy study")
    sub = ev.add_subparsers(dest="eval_command", required=True)

    g = sub.add_parser("gsm8k", help="5-shot GSM8K via lm-eval against an OpenAI-compatible server (optional A/B)",
                       formatter_class=HelpFormatter)
    g.add_argument("--url", type=argtypes.http_url, default=None,
                   help="candidate server root (http://host:port) or its /v1/completions endpoint "
                   "(required unless --compare)")
    g.add_argument("--baseline-url", type=argtypes.http_url, default=None,
                   help="baseline server: same questions, paired comparison (McNemar) against the candidate "
                   "(default: none, a single-server run)")
    g.add_argument("--model", type=argtypes.non_empty, default=None,
                   help="model name sent to the candidate (default: the first id of GET /v1/models)")
    g.add_argument("--baseline-model", type=argtypes.non_empty, default=None,
                   help="model name sent to the baseline; needs --baseline-url "
                   "(default: the first id of its GET /v1/models)")
    g.add_argument("--api", choices=("completions", "chat"), default="completions",
                   help="lm-eval local-completions or local-chat-completions (chat template, multi-turn few-shot) "
                   "(default: %(default)s)")
    g.add_argument("--data-dir", type=_gsm8k_data_dir, default=None,
                   help="folder with GSM8K test.jsonl/train.jsonl, read offline (default: lm-eval's gsm8k task)")
    g.add_argument("--limit", metavar="N", type=argtypes.positive_int, default=None,
                   help="first N test questions (default: all 1319)")
    g.add_argument("--num-concurrent", metavar="N", type=argtypes.positive_int, default=8,
                   help="concurrent requests per server (default: %(default)s)")
    g.add_argument("--max-gen-toks", metavar="TOKENS", type=argtypes.positive_int, default=512,
                   help="max generated tokens per answer (default: %(default)s)")
    g.add_argument("--num-fewshot", metavar="N", type=argtypes.non_negative_int, default=5,
                   help="few-shot examples per prompt (default: %(default)s)")
    g.add_argument("--tokenizer-backend", choices=TOKENIZER_BACKENDS, default="none",
                   help="lm-eval tokenizer backend; none sends text, generation needs no tokenizer "
                   "(default: %(default)s)")
    g.add_argument("--timeout", metavar="SECONDS", type=argtypes.positive_int, default=600,
                   help="seconds per request (default: %(default)s)")
    g.add_argument("--output", metavar="JSON", type=argtypes.output_file, default=None,
                   help="write the JSON summary to this file (default: print it)")
    g.add_argument("--compare", nargs=2, metavar=("CANDIDATE_JSON", "BASELINE_JSON"), type=argtypes.existing_file,
                   default=None, help="run nothing: pair two single-server runs saved with --output (same --limit / "
                   "data); takes no other flag but --output (default: run the servers)")
    command(g, _cmd_gsm8k, _check_gsm8k)

    a = sub.add_parser("accuracy", help="layer (MXFP4 caches, sparse) vs full-precision oracle on synthetic data",
                       formatter_class=HelpFormatter)
    from .accuracy import add_arguments, check  # light: no torch work at import

    add_arguments(a)
    command(a, _cmd_accuracy, check)
    return ev


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="atom-mxfp4")
    add_parser(parser.add_subparsers(dest="command", required=True))
    return run(parser, argv)


if __name__ == "__main__":
    sys.exit(main())
