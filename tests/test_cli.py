"""The ``atom-mxfp4`` command line at parser level: every flag of every sub-command refuses a bad value with exit 2
and a message naming that flag; flag combinations are refused the same way; what the library refuses during a run
is one line and exit 1; ``serve --dry-run`` prints and never execs, wherever it stands. Nothing here runs the demo,
a study or a server."""

from __future__ import annotations

import argparse
import importlib.util
import os
import shlex

import pytest
import torch

from atom_mxfp4 import backends, cli, demo
from atom_mxfp4.backends import BACKENDS, BackendUnavailable
from atom_mxfp4.errors import InvalidArgument
from atom_mxfp4.layer import LayerConfig

HAS_SERVE = importlib.util.find_spec("sglang") is not None and "serve" in cli.build_parser().format_help()
needs_serve = pytest.mark.skipif(not HAS_SERVE, reason="atom-mxfp4 serve needs the sglang extra")


def _leaves(parser: argparse.ArgumentParser, path=()):
    """(command words, leaf parser) of every sub-command."""
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subs:
        yield path, parser
        return
    for name, child in subs[0].choices.items():
        yield from _leaves(child, path + (name,))


def _refused(argv, capsys) -> str:
    """Parse (never run) ``argv``; it must exit 2. Returns stderr's last line."""
    with pytest.raises(SystemExit) as exit_info:
        cli.parse(cli.build_parser(), argv)
    assert exit_info.value.code == 2, argv
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return err.strip().splitlines()[-1]


@pytest.fixture
def files(tmp_path):
    a_file = tmp_path / "a.json"
    a_file.write_text("{}")
    return {"FILE": str(a_file), "DIR": str(tmp_path), "MISSING": str(tmp_path / "missing.json")}


# (command words, flag, bad value): every option that takes a value, in every sub-command
BAD_VALUES = [
    (("demo",), "--contexts", "2300,-1"), (("demo",), "--contexts", ""), (("demo",), "--contexts", "100,,20"),
    (("demo",), "--decode-steps", "0"), (("demo",), "--chunk", "-3"), (("demo",), "--chunk", "1e3"),
    (("demo",), "--topk", "0"), (("demo",), "--scale-modes", "mse,round"), (("demo",), "--device", "tpu"),
    (("demo",), "--backend", "cuda"), (("demo",), "--seed", "-1"),
    (("eval", "accuracy"), "--families", "gaussian,uniform"), (("eval", "accuracy"), "--tokens", "0"),
    (("eval", "accuracy"), "--long-tokens", "16384,x"), (("eval", "accuracy"), "--queries", "-2"),
    (("eval", "accuracy"), "--needle-depths", "0.5,1.5"), (("eval", "accuracy"), "--needle-strength", "inf"),
    (("eval", "accuracy"), "--topk", "x"), (("eval", "accuracy"), "--scale-modes", ""),
    (("eval", "accuracy"), "--caches", "fp16"),
    (("eval", "accuracy"), "--index-k-dtypes", "fp4"), (("eval", "accuracy"), "--seeds", "0,-1"),
    (("eval", "accuracy"), "--device", "cuda:x"), (("eval", "accuracy"), "--backend", "TORCH"),
    (("eval", "accuracy"), "--out-dir", "FILE"), (("eval", "accuracy"), "--from-results", "MISSING"),
    (("eval", "gsm8k"), "--url", "localhost:30000"), (("eval", "gsm8k"), "--baseline-url", "http://h:99999"),
    (("eval", "gsm8k"), "--model", ""), (("eval", "gsm8k"), "--baseline-model", " "),
    (("eval", "gsm8k"), "--api", "rest"), (("eval", "gsm8k"), "--data-dir", "DIR"),
    (("eval", "gsm8k"), "--limit", "0"), (("eval", "gsm8k"), "--num-concurrent", "-8"),
    (("eval", "gsm8k"), "--max-gen-toks", "0"), (("eval", "gsm8k"), "--num-fewshot", "-1"),
    (("eval", "gsm8k"), "--tokenizer-backend", "hf"), (("eval", "gsm8k"), "--timeout", "0"),
    (("eval", "gsm8k"), "--output", "DIR"), (("eval", "gsm8k"), "--compare", "MISSING"),
]


@pytest.mark.parametrize("words,flag,value", BAD_VALUES, ids=[f"{' '.join(w)} {f} {v!r}" for w, f, v in BAD_VALUES])
def test_bad_value_exits_2_naming_the_flag(words, flag, value, files, capsys):
    value = files.get(value, value)
    argv = [*words, flag, value] + ([value] if flag == "--compare" else [])
    line = _refused(argv, capsys)
    assert line.startswith(f"atom-mxfp4 {' '.join(words)}: error: argument {flag}: "), line


def test_every_valued_flag_is_in_the_bad_value_table():
    covered = {(w, f) for w, f, _ in BAD_VALUES}
    for words, leaf in _leaves(cli.build_parser()):
        for action in leaf._actions:
            if action.option_strings and action.nargs != 0 and words != ("serve",):
                assert (words, action.option_strings[-1]) in covered, (words, action.option_strings)


def test_demo_chunk_minus_3(capsys):
    assert _refused(["demo", "--chunk", "-3"], capsys) == \
        "atom-mxfp4 demo: error: argument --chunk: must be a positive int, got -3"


def test_device_cuda_without_cuda(monkeypatch, capsys):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    for words in (["demo"], ["eval", "accuracy"]):
        line = _refused(words + ["--device", "cuda"], capsys)
        assert "argument --device: must be cpu here (torch.cuda.is_available() is False" in line, line


def test_backend_that_cannot_run_on_the_device(monkeypatch, capsys):
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)  # conftest turns the interpreter on for the CPU suite
    for words in (["demo"], ["eval", "accuracy"]):
        line = _refused(words + ["--backend", "triton", "--device", "cpu"], capsys)
        assert "error: --backend triton with --device cpu: backend='triton' cannot run here" in line, line


def test_backend_choices_come_from_the_registry():
    seen = 0
    for _, leaf in _leaves(cli.build_parser()):
        for action in leaf._actions:
            if "--backend" in action.option_strings:
                assert action.choices is BACKENDS
                seen += 1
    assert seen == 2  # demo, eval accuracy


@pytest.mark.parametrize("argv,needle", [
    (["eval", "accuracy", "--tokens", "1024", "--queries", "1024"], "--queries must be fewer than 1024"),
    (["eval", "accuracy", "--families", "long", "--long-tokens", "64,4096", "--queries", "64"],
     "--queries must be fewer than 64"),
    (["eval", "accuracy", "--from-results", "FILE", "--topk", "4"], "with --from-results must be only --out-dir"),
    (["eval", "gsm8k", "--limit", "3"], "--url must be given (or --compare"),
    (["eval", "gsm8k", "--compare", "FILE", "FILE", "--url", "http://h:1"], "with --compare must be only --output"),
    (["eval", "gsm8k", "--url", "http://h:1", "--baseline-model", "m"], "--baseline-model must be given only with"),
])
def test_bad_flag_combination_exits_2_naming_the_flags(argv, needle, files, capsys):
    argv = [files.get(a, a) for a in argv]
    line = _refused(argv, capsys)
    assert line.startswith(f"atom-mxfp4 {argv[0]} {argv[1]}: error: ") and needle in line, line


def test_help_says_the_default_of_every_flag():
    for words, leaf in _leaves(cli.build_parser()):
        for action in leaf._actions:
            if action.option_strings and action.dest != "help":
                assert "default" in action.help or "required" in action.help, (words, action.option_strings)


def test_accuracy_command_line_parses_back_to_the_same_arguments():
    from atom_mxfp4.evals import accuracy

    def parse(argv):
        parser = argparse.ArgumentParser()
        accuracy.add_arguments(parser)
        return parser.parse_args(argv)

    args = parse(["--families", "needles,long", "--long-tokens", "2048,4096", "--needle-depths", "0.2,0.7",
                  "--caches", "", "--scale-modes", "MSE", "--no-emulate", "--seeds", "0,1"])
    line = accuracy._command_line(args)
    assert "--long-tokens 2048,4096" in line and "--scale-modes mse" in line and "--topk" not in line
    assert vars(parse(shlex.split(line)[3:])) == vars(args)


# --- errors during a run: one line, exit 1; bugs keep their traceback ---

def _run_demo_with(monkeypatch, body):
    monkeypatch.setattr(demo, "run", lambda args: body())
    return cli.main(["demo", "--device", "cpu"])


def test_library_value_error_is_one_line_exit_1(monkeypatch, capsys):
    assert _run_demo_with(monkeypatch, lambda: LayerConfig(head_dim=64)) == 1
    assert capsys.readouterr().err == ("atom-mxfp4 demo: error: head_dim must be 128 (the only head_dim of the MXFP4 "
                                       "kernels), got 64\n")


def test_backend_unavailable_is_one_line_exit_1(monkeypatch, capsys):
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    assert _run_demo_with(monkeypatch, lambda: backends.resolve_backend("triton", "cpu")) == 1
    err = capsys.readouterr().err
    assert err.startswith("atom-mxfp4 demo: error: backend='triton' cannot run here") and err.count("\n") == 1


def test_a_bug_keeps_its_traceback(monkeypatch):
    def bug():
        raise ValueError("not from atom_mxfp4.errors")

    with pytest.raises(ValueError, match="not from atom_mxfp4.errors") as info:
        _run_demo_with(monkeypatch, bug)
    assert not isinstance(info.value, (InvalidArgument, BackendUnavailable))


def test_a_library_refusal_in_a_real_command(files, capsys):
    assert cli.main(["eval", "gsm8k", "--compare", files["FILE"], files["FILE"]]) == 1
    err = capsys.readouterr().err
    assert err == f"atom-mxfp4 eval gsm8k: error: {files['FILE']} must be a summary holding a 'candidate' run, " \
                  "got keys []\n"


# --- serve ---

@pytest.fixture
def no_exec(monkeypatch):
    calls = []

    def execv(path, argv):
        calls.append(argv)
        raise AssertionError(f"os.execv called: {argv}")

    monkeypatch.setattr(os, "execv", execv)
    return calls


SERVE_TAIL = ["serve", "M", "--tp", "4", "--kv-cache-dtype", "mxfp4"]
SERVE_DRY_RUNS = [
    ["--dry-run", "M", "--tp", "4"],
    ["M", "--dry-run", "--tp", "4"],
    ["M", "--tp", "4", "--dry-run"],
    ["--dry-run", "--", "M", "--tp", "4"],
    ["--", "M", "--tp", "4", "--dry-run"],
    ["--dry-run", "--dry-run", "M", "--tp", "4"],
]


@needs_serve
@pytest.mark.parametrize("argv", SERVE_DRY_RUNS, ids=[" ".join(a) for a in SERVE_DRY_RUNS])
def test_serve_dry_run_anywhere_prints_and_never_execs(argv, no_exec, capsys):
    assert cli.main(["serve", *argv]) == 0
    assert shlex.split(capsys.readouterr().out)[-len(SERVE_TAIL):] == SERVE_TAIL
    assert not no_exec


@needs_serve
@pytest.mark.parametrize("argv", [["--dry-run", "--model-path", "M", "--tp", "4"],
                                  ["--model-path", "M", "--dry-run", "--tp", "4"],
                                  ["--dry-run", "--", "--model-path", "M", "--tp", "4"]])
def test_serve_options_first(argv, no_exec, capsys):
    assert cli.main(["serve", *argv]) == 0
    assert shlex.split(capsys.readouterr().out)[-7:] == ["serve", "--model-path", "M", "--tp", "4",
                                                         "--kv-cache-dtype", "mxfp4"]


@needs_serve
def test_serve_help_examples_parse(no_exec, capsys):
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["serve", "--help"])
    assert exit_info.value.code == 0
    examples = [line.strip() for line in capsys.readouterr().out.splitlines()
                if line.strip().startswith("atom-mxfp4 serve ")]
    assert len(examples) >= 2
    for example in examples:
        words = shlex.split(example)[1:]
        argv = words if "--dry-run" in words else [words[0], "--dry-run", *words[1:]]
        assert cli.main(argv) == 0, example
        printed = shlex.split(capsys.readouterr().out)
        passed = [w for w in words[1:] if w not in ("--dry-run", "--")]
        if "--index-k-dtype" in passed:  # the wrapper's flag: an environment variable in front, not an argument
            at = passed.index("--index-k-dtype")
            assert printed[0] == f"ATOM_MXFP4_INDEX_K_DTYPE={passed[at + 1]}", example
            del passed[at:at + 2]
        assert printed[printed.index("serve") + 1:] == passed + ["--kv-cache-dtype", "mxfp4"], example
    assert not no_exec


@needs_serve
@pytest.mark.parametrize("argv", [["--index-k-dtype", "fp8", "M", "--dry-run"],
                                  ["--index-k-dtype=fp8", "--dry-run", "M"]])
def test_serve_index_k_dtype_sets_the_environment(argv, no_exec, capsys, monkeypatch):
    # set (not deleted): monkeypatch then restores the variable's absence after serve wrote into os.environ
    monkeypatch.setenv("ATOM_MXFP4_INDEX_K_DTYPE", "mxfp4")
    assert cli.main(["serve", *argv]) == 0
    printed = shlex.split(capsys.readouterr().out)
    assert printed[0] == "ATOM_MXFP4_INDEX_K_DTYPE=fp8" and printed[-4:] == ["serve", "M", "--kv-cache-dtype", "mxfp4"]
    assert "--index-k-dtype" not in " ".join(printed)
    with pytest.raises(AssertionError, match="os.execv called"):
        cli.main(["serve", "--index-k-dtype", "fp8", "M"])
    assert os.environ["ATOM_MXFP4_INDEX_K_DTYPE"] == "fp8"  # what sglang serve inherits
    line = _refused(["serve", "--index-k-dtype", "fp4", "M"], capsys)
    assert "argument --index-k-dtype: invalid choice: 'fp4' (choose from 'mxfp4', 'fp8')" in line, line


@needs_serve
def test_serve_without_dry_run_execs_sglang(no_exec):
    with pytest.raises(AssertionError, match="os.execv called"):
        cli.main(["serve", "M", "--tp", "4"])
    assert no_exec[0][-len(SERVE_TAIL):] == SERVE_TAIL


@needs_serve
@pytest.mark.parametrize("argv,needle", [
    (["--dry-run"], "the SGLang arguments must be given"),
    ([], "the SGLang arguments must be given"),
    (["M", "--kv-cache-dtype", "fp8_e4m3"], "--kv-cache-dtype must be mxfp4 (or left out), got fp8_e4m3"),
    (["M", "--kv-cache-dtype=bf16", "--dry-run"], "--kv-cache-dtype must be mxfp4 (or left out), got bf16"),
    (["M", "--kv-cache-dtype"], "--kv-cache-dtype must be mxfp4 (or left out), got nothing"),
])
def test_serve_refusals_exit_2(argv, needle, no_exec, capsys):
    line = _refused(["serve", *argv], capsys)
    assert line.startswith("atom-mxfp4 serve: error: ") and needle in line, line
    assert not no_exec
