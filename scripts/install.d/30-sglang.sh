#!/usr/bin/env bash
# SGLang 0.5.23 for the plugin's CPU tests: SGLang itself WITHOUT its dependency set (which pins torch 2.14.1 and
# CUDA wheels), plus only the pure-Python / CPU wheels its core imports need (server args, plugins, memory pools,
# the MiniMax-M3 model module, the attention registry) and its HTTP server (tests/test_sglang_serve.py runs a real
# `sglang serve` on the CPU: uvicorn, fastapi, uvloop, setproctitle, python-multipart, xgrammar, soundfile, ...).
# torch stays the installed 2.13.0. Idempotent and quick: pip skips what is already installed at these versions. torchvision is NOT installed (PyPI's wheels need a CUDA
# torch); tests use tests/sglang_env/torchvision_stand_in.py instead. triton, numpy, packaging, filelock, jinja2,
# tqdm come from the project's other install steps. The list was found by importing SGLang's core modules in a
# fresh venv (torch 2.13.0 only) until nothing was missing.
set -euo pipefail
PY=${PYTHON:-python}
"$PY" -m pip install --quiet --no-deps \
  sglang==0.5.23 \
  transformers==5.19.0 tokenizers==0.23.2 safetensors huggingface-hub \
  sentencepiece==0.2.1 compressed-tensors==0.18.0 apache-tvm-ffi==0.1.11 openai==2.8.0 \
  psutil pybase64 starlette anyio sniffio msgspec pyzmq loguru gguf einops partial_json_parser \
  httpx httpcore httpx2 httpcore2 truststore h11 certifi idna distro pillow pyyaml regex \
  orjson requests urllib3 pydantic pydantic-core typing-inspection annotated-types dill \
  aiohttp aiohappyeyeballs aiosignal frozenlist multidict yarl propcache attrs ipython traitlets \
  uvicorn==0.55.0 fastapi==0.165.0 annotated-doc==0.0.7 uvloop==0.23.0 setproctitle==1.3.8 python-multipart==0.0.34 \
  opentelemetry-api==1.45.2 xgrammar==0.2.9 soundfile==0.14.0 cffi==2.0.0 pycparser==3.0 \
  jsonschema==4.26.0 jsonschema-specifications==2025.9.1 referencing==0.37.0 rpds-py==2026.9.1
"$PY" -c "import torch; v = torch.__version__; assert v.startswith('2.13.'), f'torch changed to {v}'"
