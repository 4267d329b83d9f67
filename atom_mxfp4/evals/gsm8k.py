"""GSM8K (5-shot, strict-match and flexible-extract) through lm-eval against OpenAI-compatible servers.

One run = lm-eval's `local-completions` (or `local-chat-completions`) model pointed at a server such as
`python -m sglang.launch_server ... --kv-cache-dtype mxfp4`. With a baseline URL the same questions (the
first `limit` test questions, the same few-shot examples: lm-eval seeds the sampler per task) go to both
servers and the per-question outcomes are compared with `evals.stats.compare` (McNemar's paired test).

Offline data: `data_dir` holding GSM8K's `test.jsonl` / `train.jsonl` (fields `question`, `answer`) becomes
an lm-eval task config over local json files, identical to lm-eval's own `gsm8k` task otherwise.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import sys
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from atom_mxfp4.errors import expect, fail

from .stats import PairedComparison, compare, proportion

FILTERS = ("strict-match", "flexible-extract")
LOCAL_TASK = "gsm8k_local"

# lm-eval's gsm8k task (lm_eval/tasks/gsm8k/gsm8k.yaml, metadata version 3.0), dataset swapped for local json.
_GSM8K_TASK = {
    "output_type": "generate_until",
    "training_split": "train",
    "fewshot_split": "train",
    "test_split": "test",
    "doc_to_text": "Question: {{question}}\nAnswer:",
    "doc_to_target": "{{answer}}",
    "metric_list": [{
        "metric": "exact_match", "aggregation": "mean", "higher_is_better": True,
        "ignore_case": True, "ignore_punctuation": False,
        "regexes_to_ignore": [",", "\\$", "(?s).*#### ", "\\.$"],
    }],
    "generation_kwargs": {"until": ["Question:", "</s>", "<|im_end|>"], "do_sample": False, "temperature": 0.0},
    "repeats": 1,
    "num_fewshot": 5,
    "filter_list": [
        {"name": "strict-match", "filter": [
            {"function": "regex", "regex_pattern": "#### (\\-?[0-9\\.\\,]+)"}, {"function": "take_first"}]},
        {"name": "flexible-extract", "filter": [
            {"function": "regex", "group_select": -1, "regex_pattern": "(-?[$0-9.,]{2,})|(-?[0-9]+)"},
            {"function": "take_first"}]},
    ],
    "metadata": {"version": 3.0},
}


def local_task_config(data_dir: str | Path) -> dict:
    """lm-eval task config (a dict) for GSM8K read from `data_dir/{train,test}.jsonl`; no network."""
    root = Path(data_dir).expanduser().resolve()
    files = {split: root / f"{split}.jsonl" for split in ("train", "test")}
    missing = [str(p) for p in files.values() if not p.is_file()]
    expect(not missing, "data_dir", "a folder holding train.jsonl and test.jsonl", f"{root} (missing {missing})")
    return {
        "task": LOCAL_TASK,
        "dataset_path": "json",
        "dataset_kwargs": {"data_files": {k: str(v) for k, v in files.items()}},
        **_GSM8K_TASK,
    }


@dataclass
class RunResult:
    """One server's run: `outcomes[filter][doc_id]` is 1 when that question was answered right."""

    url: str
    model: str
    outcomes: dict[str, dict[int, int]]
    seconds: float
    lm_eval_scores: dict[str, float] = field(default_factory=dict)
    responses: dict[int, str] = field(default_factory=dict)  # doc id -> the server's generated text

    def vector(self, filter_name: str, doc_ids: list[int]) -> list[int]:
        return [self.outcomes[filter_name][d] for d in doc_ids]


def endpoint(url: str, api: str) -> str:
    """The full completions endpoint for a server root or an endpoint URL."""
    url = url.rstrip("/")
    suffix = "/chat/completions" if api == "chat" else "/completions"
    if url.endswith("/completions"):
        return url
    if url.endswith("/v1"):
        return url + suffix
    return url + "/v1" + suffix


def expect_reachable(url: str, name: str, timeout: float = 5.0) -> None:
    """Refuse (``InvalidArgument`` naming ``name``) a server whose host:port takes no TCP connection in ``timeout``
    seconds: checked before lm-eval starts, which would retry each request and end in a traceback per worker."""
    parts = urlsplit(url)
    host, port = parts.hostname, parts.port or (443 if parts.scheme == "https" else 80)
    try:
        socket.create_connection((host, port), timeout=timeout).close()
    except OSError as error:
        if isinstance(error, TimeoutError):
            why = f"no answer in {timeout:g} s"
        else:
            why = error.strerror or str(error) or type(error).__name__
            why = why[:1].lower() + why[1:]
        where = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
        fail(name, "a server accepting connections", f"{url} ({where}: {why})")


def served_model(url: str, timeout: float = 10.0) -> str:
    """The first model id of GET {root}/v1/models (SGLang and vLLM serve it); "default" when unavailable."""
    root = url.rstrip("/").split("/v1")[0]
    try:
        with urllib.request.urlopen(root + "/v1/models", timeout=timeout) as resp:
            data = json.load(resp)
        return data["data"][0]["id"]
    except Exception as err:  # a server without /v1/models still serves completions
        print(f"[gsm8k] could not read {root}/v1/models ({err}); using model name 'default'", file=sys.stderr)
        return "default"


def make_task_manager(data_dir: str | None):
    """lm-eval's TaskManager; with local data it skips indexing lm-eval's ~10k built-in task files (~15 s)."""
    from lm_eval.tasks import TaskManager

    return TaskManager(include_defaults=data_dir is None)


def run_gsm8k(url: str, *, model: str | None = None, api: str = "completions", data_dir: str | None = None,
              limit: int | None = None, num_concurrent: int = 8, max_gen_toks: int = 512,
              num_fewshot: int = 5, tokenizer_backend: str = "none", timeout: int = 600,
              label: str = "", task_manager=None) -> RunResult:
    """Run lm-eval GSM8K against one server and return per-question outcomes for both filters."""
    expect(api in ("completions", "chat"), "api", "'completions' or 'chat'", repr(api))
    expect(limit is None or limit >= 1, "limit", ">= 1 or None", limit)
    if data_dir:  # fully offline: no Hub look-ups by datasets / huggingface_hub (read when they are imported)
        os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from lm_eval import simple_evaluate  # heavy import: only when running

    logging.getLogger("lm_eval").setLevel(logging.WARNING)
    model = model or served_model(url)
    model_args = {
        "model": model,
        "base_url": endpoint(url, api),
        "num_concurrent": num_concurrent,
        "max_gen_toks": max_gen_toks,
        "tokenizer_backend": tokenizer_backend,
        "tokenized_requests": False,
        "timeout": timeout,
        "max_retries": 3,
    }
    task = local_task_config(data_dir) if data_dir else "gsm8k"
    task_name = LOCAL_TASK if data_dir else "gsm8k"
    print(f"[gsm8k{label}] {endpoint(url, api)} model={model} limit={limit} concurrent={num_concurrent} "
          f"fewshot={num_fewshot} data={'local ' + str(data_dir) if data_dir else 'lm-eval gsm8k'}",
          file=sys.stderr, flush=True)
    start = time.time()
    results = simple_evaluate(
        model="local-chat-completions" if api == "chat" else "local-completions",
        model_args=model_args,
        tasks=[task],
        num_fewshot=num_fewshot,
        limit=limit,
        log_samples=True,
        apply_chat_template=api == "chat",
        fewshot_as_multiturn=api == "chat",
        task_manager=task_manager or make_task_manager(data_dir),
        bootstrap_iters=0,
        verbosity="WARNING",
    )
    seconds = time.time() - start
    outcomes: dict[str, dict[int, int]] = {f: {} for f in FILTERS}
    responses: dict[int, str] = {}
    for sample in results["samples"][task_name]:
        name = sample["filter"]
        if name in outcomes:
            outcomes[name][int(sample["doc_id"])] = int(round(float(sample["exact_match"])))
        responses[int(sample["doc_id"])] = str(sample["resps"][0][0])
    scores = {f: float(results["results"][task_name][f"exact_match,{f}"]) for f in FILTERS}
    for f in FILTERS:
        if not outcomes[f]:
            raise RuntimeError(f"lm-eval returned no samples for filter {f!r} of task {task_name}")
    print(f"[gsm8k{label}] done in {seconds:.1f}s: " + ", ".join(f"{f} {scores[f]:.4f}" for f in FILTERS),
          file=sys.stderr, flush=True)
    return RunResult(url=url, model=model, outcomes=outcomes, seconds=seconds, lm_eval_scores=scores,
                     responses=responses)


def summarize(run: RunResult, baseline: RunResult | None = None) -> dict:
    """JSON-ready summary: per filter the score(s) with stderr, and with a baseline the paired comparison."""
    def meta(r: RunResult) -> dict:  # lm_eval_scores: lm-eval's own aggregate, a cross-check of `mean`
        return {"url": r.url, "model": r.model, "seconds": round(r.seconds, 2), "lm_eval_scores": r.lm_eval_scores,
                "responses": {str(k): v for k, v in sorted(r.responses.items())}}

    out: dict = {"candidate": meta(run)}
    if baseline is not None:
        out["baseline"] = meta(baseline)
    out["filters"] = {}
    for f in FILTERS:
        ids = sorted(run.outcomes[f])
        if baseline is None:
            p = proportion(run.vector(f, ids))
            out["filters"][f] = {"candidate": p.__dict__, "doc_ids": ids, "candidate_outcomes": run.vector(f, ids)}
            continue
        base_ids = sorted(baseline.outcomes[f])
        expect(ids == base_ids, f"the candidate's and the baseline's questions ({f})", "the same (same --limit "
               "and data)", f"{len(ids)} vs {len(base_ids)} doc ids")
        cmp: PairedComparison = compare(run.vector(f, ids), baseline.vector(f, ids))
        out["filters"][f] = {
            "candidate": cmp.a.__dict__, "baseline": cmp.b.__dict__,
            "diff": cmp.diff, "diff_stderr": cmp.diff_stderr, "mcnemar": cmp.mcnemar.__dict__,
            "doc_ids": ids, "candidate_outcomes": run.vector(f, ids), "baseline_outcomes": baseline.vector(f, ids),
        }
    return out


def format_table(summary: dict) -> str:
    """Markdown table of a summary from `summarize`."""
    has_base = "baseline" in summary
    lines = [f"candidate: {summary['candidate']['url']} ({summary['candidate']['model']})"]
    if has_base:
        lines.append(f"baseline:  {summary['baseline']['url']} ({summary['baseline']['model']})")
        lines += ["", "| filter | n | candidate | baseline | diff (cand - base) | McNemar b / c | p exact | p chi2 |",
                  "|---|---|---|---|---|---|---|---|"]
    else:
        lines += ["", "| filter | n | accuracy |", "|---|---|---|"]
    for f, row in summary["filters"].items():
        c = row["candidate"]
        cell = f"{c['mean']:.4f} ± {c['stderr']:.4f}"
        if not has_base:
            lines.append(f"| {f} | {c['n']} | {cell} |")
            continue
        b, m = row["baseline"], row["mcnemar"]
        lines.append(f"| {f} | {c['n']} | {cell} | {b['mean']:.4f} ± {b['stderr']:.4f} | "
                     f"{row['diff']:+.4f} ± {row['diff_stderr']:.4f} | {m['b']} / {m['c']} | "
                     f"{m['p_exact']:.4g} | {m['p_chi2']:.4g} |")
    if has_base:
        lines.append("")
        lines.append("b = questions only the candidate got right, c = only the baseline; "
                     "p exact = two-sided binomial test of b vs c.")
    return "\n".join(lines)


def load_run(path: str | Path, side: str = "candidate") -> RunResult:
    """A run back from a summary JSON written by `eval gsm8k --output` (its `side`: candidate or baseline)."""
    try:
        summary = json.loads(Path(path).read_text())
        expect(isinstance(summary, dict) and side in summary, str(path), f"a summary holding a {side!r} run",
               f"keys {sorted(summary) if isinstance(summary, dict) else type(summary).__name__}")
        outcomes = {}
        for f in FILTERS:
            row = summary["filters"][f]
            outcomes[f] = dict(zip(row["doc_ids"], row[f"{side}_outcomes"]))
        info = summary[side]
        return RunResult(url=info["url"], model=info["model"], outcomes=outcomes, seconds=info.get("seconds", 0.0),
                         lm_eval_scores=info.get("lm_eval_scores", {}))
    except (json.JSONDecodeError, UnicodeDecodeError, KeyError, TypeError, AttributeError) as error:
        fail(str(path), "a summary JSON written by `eval gsm8k --output`", f"{type(error).__name__}: {error}")


def compare_files(candidate: str | Path, baseline: str | Path) -> dict:
    """Paired summary of two single-server runs saved with --output (e.g. one server at a time on one node)."""
    return summarize(load_run(candidate), load_run(baseline))


def run_ab(url: str, baseline_url: str | None = None, **kwargs) -> dict:
    """Run the candidate (and the baseline, one after the other) and return the summary dict."""
    model = kwargs.pop("model", None)
    baseline_model = kwargs.pop("baseline_model", None)
    manager = make_task_manager(kwargs.get("data_dir"))
    run = run_gsm8k(url, model=model, label=" candidate" if baseline_url else "", task_manager=manager, **kwargs)
    base = None
    if baseline_url:
        base = run_gsm8k(baseline_url, model=baseline_model, label=" baseline", task_manager=manager, **kwargs)
    return summarize(run, base)
