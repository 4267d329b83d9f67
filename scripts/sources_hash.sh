#!/bin/bash
# The first 12 hex digits of the sha256 over the package's Python sources (atom_mxfp4/: atom_mxfp4/kernels/, atom_mxfp4/model_patches/,
# atom_mxfp4/evals/; sorted paths, contents concatenated), run from the repository root. The device scripts print it beside the
# commit: the device's copy of the working tree may carry stale git metadata, the sources are what ran; run it here
# on a checkout to match a log to a commit.
cd "$(dirname "$0")/.." && find atom_mxfp4 -name '*.py' -type f | LC_ALL=C sort \
  | xargs cat | sha256sum | cut -c1-12
