#!/usr/bin/env bash
# CMAKE_CXX_COMPILER_LAUNCHER and CMAKE_CXX_LINKER_LAUNCHER of `scripts/gpu-build.sh --syntax-only`
# (make test's GCC 14 chroot check, tests/bundle/bundle_build_check.sh). A compile command (-c)
# runs with -fsyntax-only (the whole front end: preprocessing, parsing, template instantiation
# and their diagnostics; the compiler still writes the -MD depfile) and leaves an empty object
# file where ninja expects one. A link command (a target's objects wait for the targets it
# depends on, e.g. test_tp on the nanovllm CLI) only leaves an empty output: there is no code to
# link. Nothing built this way runs.
set -euo pipefail
out=""
compile=0
args=("$@")
for ((i = 0; i < ${#args[@]}; i++)); do
  case "${args[i]}" in
    -o) out="${args[i + 1]:-}" ;;
    -c) compile=1 ;;
  esac
done
if ((compile)); then
  "$@" -fsyntax-only
fi
if [ -n "$out" ]; then : >"$out"; fi
