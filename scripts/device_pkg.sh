# Sourced by the device scripts (scripts/h200.sh, docs/bench/*/next_call.sh): atom_mxfp4 importable without pip.
#   . scripts/device_pkg.sh; atom_pkg DIR [KERNELS]; PYTHONPATH=DIR python3 -P ...
# atom_pkg DIR builds DIR/atom_mxfp4 from the repo root (the working directory): a copy of atom_mxfp4/ with
# kernels/, model_patches/ and evals/ linked in, as the installed package maps them. With KERNELS (a folder of
# kernels/hopper/ files, e.g. another commit's pa_decode.py for a same-call A/B), kernels/ is copied and those files
# replace its hopper/ ones. Run python with -P (PYTHONSAFEPATH=1): the repo root, whose atom_mxfp4/ lacks kernels/,
# must not shadow DIR.
atom_pkg() {
  local dir=$1 kernels=${2:-} root=$PWD sub
  rm -rf "$dir" && mkdir -p "$dir/atom_mxfp4" && cp -r "$root/atom_mxfp4/." "$dir/atom_mxfp4/" || return 1
  for sub in kernels model_patches evals; do
    if [ "$sub" = kernels ] && [ -n "$kernels" ]; then
      cp -r "$root/kernels" "$dir/atom_mxfp4/kernels" || return 1
      cp "$kernels"/*.py "$dir/atom_mxfp4/kernels/hopper/" || return 1
    elif [ -d "$root/$sub" ]; then
      ln -sfn "$root/$sub" "$dir/atom_mxfp4/$sub"
    fi
  done
}
