#!/usr/bin/env bash
# Builds the triton 3.9.0 package the `call.sh triton39a|triton39b` calls carry, in two parts that each fit a call's
# carry (64 MiB with the working tree): .whl/t39a/part_aa and .whl/t39b/part_ab (ignored paths). From the repo root
# (it downloads the cp312 wheel; ~1 min on 2 cores).
# What the GPU does not need is left out: the AMD backend's libraries (its Python files stay: the backend discovery
# imports them), the CUPTI libraries and proton (profiling), libtriton.so's debug info (strip: 500 -> 192 MB). The
# legacy ptxas (CUDA 12.9, arch < 90 only) becomes a link to ptxas-blackwell (CUDA 13.4): 3.9 compiles sm_90 with the
# latter. Checked on the CPU on 2026-12-04 with the cp311 build: hopper_sass.py under the stripped package gives the
# full one's counts (the cp312 build cannot be imported by this machine's python 3.11; it ran on the H200, call 8).
set -euo pipefail
# The device runs python 3.12: its wheel (cp312-abi3), not .triton39's (this machine's cp311: libtriton.so built for
# 3.11 segfaulted at import on the H200, 2026-12-05 call 6).
WORK=$(mktemp -d); mkdir -p "$WORK/site" "$WORK/wheel"
python3 -m pip download -q triton==3.9.0 --python-version 3.12 --only-binary=:all: --no-deps \
  --platform manylinux_2_27_x86_64 -d "$WORK/wheel"
python3 -c "import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extractall(sys.argv[2])" \
  "$WORK"/wheel/*.whl "$WORK/wheel/x"
cp -r "$WORK/wheel/x/triton" "$WORK/site/" && rm -rf "$WORK/wheel"
chmod +x "$WORK"/site/triton/backends/nvidia/bin/*
T=$WORK/site/triton
rm -rf "$T/backends/amd/lib" && mkdir "$T/backends/amd/lib"
rm -rf "$T/backends/nvidia/lib/cupti" "$T/backends/nvidia/lib/cupti-blackwell" "$T/_C/libproton.so"
find "$T" -name __pycache__ -prune -exec rm -rf {} +
strip --strip-unneeded "$T/_C/libtriton.so"
rm "$T/backends/nvidia/bin/ptxas" && ln -s ptxas-blackwell "$T/backends/nvidia/bin/ptxas"
(cd "$WORK/site" && tar cf - triton | xz -6 -T2 > "$WORK/t39.tar.xz")
md5sum "$WORK/t39.tar.xz"
mkdir -p .whl/t39a .whl/t39b
split -n 2 -d "$WORK/t39.tar.xz" "$WORK/part_"
mv "$WORK/part_00" .whl/t39a/part_aa && mv "$WORK/part_01" .whl/t39b/part_ab
ls -la .whl/t39a .whl/t39b
rm -rf "$WORK"
