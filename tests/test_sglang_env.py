"""tests/sglang_env as a server process sees it: the ``datasets`` stand-in of sitecustomize.py.

SGLang's benchmark client (``python -m sglang.benchmark.serving``) imports the Hugging Face ``datasets`` package at
module level; the lent GPU's image does not have it (the first serving benchmark there stopped on
``No module named 'datasets'`` in every client run). Where no other finder has it, the server environment gives an
inert module whose ``load_dataset`` refuses; where it is installed, the real package is what imports.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from sglang_env import server_env  # noqa: E402


def _run(code: str) -> subprocess.CompletedProcess:
    env = server_env("cpu")
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)


def test_datasets_stand_in_where_the_package_is_missing():
    # the installed packages out of reach (as on an image without datasets); sitecustomize ran at start-up
    done = _run("import sys\n"
                "sys.path[:] = [p for p in sys.path if 'site-packages' not in p and 'dist-packages' not in p]\n"
                "import datasets\n"
                "assert datasets.__stand_in__ is True\n"
                "try:\n"
                "    datasets.load_dataset('MMMU/MMMU')\n"
                "except ModuleNotFoundError as error:\n"
                "    print('refused:', error)\n")
    assert done.returncode == 0, done.stderr[-2000:]
    assert "refused: the Hugging Face 'datasets' package is not installed here" in done.stdout


@pytest.mark.skipif(importlib.util.find_spec("datasets") is None, reason="the datasets package is not installed")
def test_the_real_datasets_package_wins_where_installed():
    done = _run("import datasets; print(getattr(datasets, '__stand_in__', False), hasattr(datasets, 'Dataset'))")
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["False", "True"]
