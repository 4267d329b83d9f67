"""`atom-mxfp4 eval {gsm8k, accuracy}`.

`add_parser(subparsers)` adds the `eval` command to the top-level CLI (atom_mxfp4/cli.py); every leaf
parser sets `handler(args) -> int` (the exit code; also as `func`). `python -m atom_mxfp4.evals.cli eval ...` runs it alone.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from atom_mxfp4.cli import command, run


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected an integer >= 1, got {value}")
    return value


def _cmd_gsm8k(args: argparse.Namespace) -> int:
    from .gsm8k import compare_files, format_table, run_ab

    if args.compare:
        if args.url or args.baseline_url:
            raise SystemExit("eval gsm8k: --compare reads two saved runs; it takes no --url / --baseline-url")
        summary = compare_files(*args.compare)
    elif not args.url:
        raise SystemExit("eval gsm8k: --url is required (or --compare CANDIDATE.json BASELINE.json)")
    else:
        summary = run_ab(
            args.url, args.baseline_url, model=args.model, baseline_model=args.baseline_model, api=args.api,
            data_dir=args.data_dir, limit=args.limit, num_concurrent=args.num_concurrent,
            max_gen_toks=args.max_gen_toks, num_fewshot=args.num_fewshot,
            tokenizer_backend=args.tokenizer_backend, timeout=args.timeout,
        )
    print(format_table(summary))
    text = json.dumps(summary, indent=1)
    if args.output:
        Path(args.output).parent.mkdir(parents=True, exist_ok=True)
        Path(args.output).write_text(text + "\n")
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
                       formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    g.add_argument("--url", default=None,
                   help="candidate server root (http://host:port) or its /v1/completions endpoint")
    g.add_argument("--baseline-url", default=None,
                   help="baseline server: same questions, paired comparison (McNemar) against the candidate")
    g.add_argument("--model", default=None, help="model name sent to the candidate (default: GET /v1/models)")
    g.add_argument("--baseline-model", default=None, help="model name sent to the baseline (default: /v1/models)")
    g.add_argument("--api", choices=("completions", "chat"), default="completions",
                   help="lm-eval local-completions or local-chat-completions (chat template, multi-turn few-shot)")
    g.add_argument("--data-dir", default=None,
                   help="folder with GSM8K test.jsonl/train.jsonl (offline); default: lm-eval's gsm8k task")
    g.add_argument("--limit", type=_positive_int, default=None, help="first N test questions (default: all 1319)")
    g.add_argument("--num-concurrent", type=_positive_int, default=8, help="concurrent requests per server")
    g.add_argument("--max-gen-toks", type=_positive_int, default=512, help="max generated tokens per answer")
    g.add_argument("--num-fewshot", type=int, default=5, help="few-shot examples per prompt")
    g.add_argument("--tokenizer-backend", default="none",
                   help="lm-eval tokenizer backend (none: send text; generation needs no tokenizer)")
    g.add_argument("--timeout", type=_positive_int, default=600, help="seconds per request")
    g.add_argument("--output", default=None, help="write the JSON summary here (default: print it)")
    g.add_argument("--compare", nargs=2, metavar=("CANDIDATE_JSON", "BASELINE_JSON"), default=None,
                   help="run nothing: pair two single-server runs saved with --output (same --limit / data)")
    command(g, _cmd_gsm8k)

    a = sub.add_parser("accuracy", help="layer (MXFP4 caches, sparse) vs full-precision oracle on synthetic data",
                       formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    from .accuracy import add_arguments  # light: no torch work at import

    add_arguments(a)
    command(a, _cmd_accuracy)
    return ev


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="atom-mxfp4")
    add_parser(parser.add_subparsers(dest="command", required=True))
    return run(parser, argv)


if __name__ == "__main__":
    sys.exit(main())
