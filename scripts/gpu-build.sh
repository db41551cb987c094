#!/usr/bin/env bash
# Configures and builds nanovllm on a machine that has a compiler, nvcc, CMake and ninja but none
# of the Debian -dev packages: the bundle of scripts/gpu-bundle.sh is unpacked into a prefix
# under the build folder and CMake looks only there for the libraries (static .a; the dangling
# .so links of the -dev packages are removed, so nothing needs a shared library at run time).
# Used by scripts/gpu-check.sh on the GPU machine and by the bundle check of `make test`
# (tests/bundle/bundle_build_check.sh, in chroots without the -dev packages: Debian bookworm
# with GCC 12 / CMake 3.25 and trixie with GCC 14 / CMake 3.31).
#
#   scripts/gpu-build.sh [--bundle DIR] [--build DIR] [--arch 90] [--jobs N]
#                        [--configure-only] [--keep-going] [--host-opt O0] [--syntax-only]
#                        [TARGET...]
# Defaults: --bundle <repo>/.gpu-bundle, --build <repo>/build-gpu, --arch 90, --jobs nproc,
# every target of the minimal CUDA build (-DNANOVLLM_MINIMAL=ON: no server, no CPU benches).
# --host-opt O0: C/C++ compiled at -O0 instead of -O3 (half the compile time; binaries that are
# never run). --syntax-only: make test's toolchain check (tests/bundle/bundle_build_check.sh):
# every C++ file through the compiler's front end only (scripts/syntax-only-cxx.sh; a quarter of
# an -O3 compile) and every CUDA file compiled by nvcc as always; the object files only, and the
# links they wait for are skipped (empty outputs).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUNDLE="$ROOT/.gpu-bundle"
BUILD="$ROOT/build-gpu"
ARCH=90
JOBS="$(nproc)"
CONFIGURE_ONLY=0
KEEP_GOING=()
HOST_OPT=""
SYNTAX_ONLY=0
TARGETS=()
while (($#)); do
  case "$1" in
    --bundle) BUNDLE="$2"; shift 2 ;;
    --build) BUILD="$2"; shift 2 ;;
    --arch) ARCH="$2"; shift 2 ;;
    --jobs) JOBS="$2"; shift 2 ;;
    --configure-only) CONFIGURE_ONLY=1; shift ;;
    --keep-going) KEEP_GOING=(-- -k 0); shift ;;  # build what builds when a target fails
    --host-opt) HOST_OPT="$2"; shift 2
                [[ "$HOST_OPT" =~ ^O[0-3s]$ ]] || { echo "gpu-build: --host-opt takes O0..O3 or Os" >&2; exit 2; } ;;
    --syntax-only) SYNTAX_ONLY=1; shift ;;
    -h|--help) sed -n '2,19p' "$0"; exit 0 ;;
    -*) echo "gpu-build: unknown option '$1'" >&2; exit 2 ;;
    *) TARGETS+=("$1"); shift ;;
  esac
done

# Tools: PATH first; the GPU image's CMake and ninja may sit beside its python3 (pip packages),
# nvcc under /usr/local/cuda.
find_tool() {  # find_tool NAME: prints the path or nothing
  local t
  t="$(command -v "$1" 2>/dev/null)" && { echo "$t"; return; }
  for d in "$(dirname "$(command -v python3 2>/dev/null || echo /nonexistent)")" /usr/local/cuda/bin; do
    [ -x "$d/$1" ] && { echo "$d/$1"; return; }
  done
  return 0
}
CMAKE="$(find_tool cmake)"; NINJA="$(find_tool ninja)"; NVCC="$(find_tool nvcc)"
for t in CMAKE NINJA NVCC; do
  [ -n "${!t}" ] || { echo "gpu-build: ${t,,} not found (PATH, beside python3, /usr/local/cuda/bin)" >&2; exit 1; }
done
echo "gpu-build: cmake $("$CMAKE" --version | head -1 | awk '{print $3}'), ninja $("$NINJA" --version)," \
     "nvcc $("$NVCC" --version | sed -n 's/.*release \([0-9.]*\).*/\1/p'), c++ $(c++ -dumpfullversion 2>/dev/null || echo '?')"

shopt -s nullglob
DEBS=("$BUNDLE"/debs/*.deb)
((${#DEBS[@]})) || { echo "gpu-build: no .deb in $BUNDLE/debs: run scripts/gpu-bundle.sh on the CPU machine and carry .gpu-bundle" >&2; exit 1; }

# Unpack once per bundle content (the stamp lists names and sizes).
PREFIX="$BUILD/bundle-prefix"
STAMP="$(for f in "${DEBS[@]}"; do echo "$(basename "$f") $(stat -c %s "$f")"; done)"
if [ "$(cat "$PREFIX/.stamp" 2>/dev/null)" != "$STAMP" ]; then
  rm -rf "$PREFIX"; mkdir -p "$PREFIX"
  if command -v dpkg-deb >/dev/null 2>&1; then
    for f in "${DEBS[@]}"; do dpkg-deb -x "$f" "$PREFIX"; done
  else
    python3 "$ROOT/scripts/deb_extract.py" "$PREFIX" "${DEBS[@]}"
  fi
  # Only headers and static libraries: drop the -dev packages' .so links (their targets are in
  # the runtime packages, which are not bundled) so the linker takes the .a files.
  find "$PREFIX" \( -name '*.so' -o -name '*.so.*' \) \( -type l -o -type f \) -delete
  echo "$STAMP" >"$PREFIX/.stamp"
  echo "gpu-build: unpacked ${#DEBS[@]} packages into $PREFIX"
fi

P="$PREFIX/usr"
MA=x86_64-linux-gnu
ARGS=(-S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_MAKE_PROGRAM="$NINJA" -DCMAKE_BUILD_TYPE=Release
      -DNANOVLLM_MINIMAL=ON -DNANOVLLM_CUDA=ON -DNANOVLLM_GPU_TESTS=ON
      -DCMAKE_CUDA_COMPILER="$NVCC" -DCMAKE_CUDA_ARCHITECTURES="$ARCH"
      "-DCMAKE_INCLUDE_PATH=$P/include;$P/include/$MA"
      "-DCMAKE_LIBRARY_PATH=$P/lib/$MA;$P/lib/$MA/openblas-pthread"
      "-DCMAKE_PREFIX_PATH=$P"
      "-DOPENBLAS_INC=$P/include/$MA/openblas-pthread"
      "-DOPENBLAS_LIB=$P/lib/$MA/openblas-pthread/libopenblas.a"
      "-Dnlohmann_json_DIR=$P/share/cmake/nlohmann_json"
      "-DGTest_DIR=$P/lib/$MA/cmake/GTest")
[ -n "$HOST_OPT" ] && ARGS+=("-DCMAKE_CXX_FLAGS_RELEASE=-$HOST_OPT -DNDEBUG" "-DCMAKE_C_FLAGS_RELEASE=-$HOST_OPT -DNDEBUG")
if ((SYNTAX_ONLY)); then
  ARGS+=("-DCMAKE_CXX_COMPILER_LAUNCHER=$ROOT/scripts/syntax-only-cxx.sh"
         "-DCMAKE_CXX_LINKER_LAUNCHER=$ROOT/scripts/syntax-only-cxx.sh")
else  # a cached build folder may have had them
  ARGS+=("-DCMAKE_CXX_COMPILER_LAUNCHER=" "-DCMAKE_CXX_LINKER_LAUNCHER=")
fi
# Unit tests that need shared data (stories260K) find it in the bundle.
[ -d "$BUNDLE/models" ] && ARGS+=("-DNANOVLLM_SHARED_DATA=$BUNDLE")
# CMake >= 4 rejects packages that declare compatibility with CMake < 3.5.
[ "$("$CMAKE" --version | head -1 | awk '{print $3}' | cut -d. -f1)" -ge 4 ] &&
  ARGS+=(-DCMAKE_POLICY_VERSION_MINIMUM=3.5)
"$CMAKE" "${ARGS[@]}"
((CONFIGURE_ONLY)) && exit 0
if ((SYNTAX_ONLY)); then
  # Every object file of the build (C++ through the front end, CUDA compiled), nothing linked.
  mapfile -t OBJS < <("$NINJA" -C "$BUILD" -t targets all | sed -n 's/^\([^:]*\.o\): .*/\1/p')
  ((${#OBJS[@]})) || { echo "gpu-build: --syntax-only: ninja lists no object files in $BUILD" >&2; exit 1; }
  echo "gpu-build: --syntax-only: ${#OBJS[@]} object files ($(printf '%s\n' "${OBJS[@]}" | grep -c '\.cu\.o$') CUDA)"
  NINJA_K=(); ((${#KEEP_GOING[@]})) && NINJA_K=(-k 0)
  "$NINJA" -C "$BUILD" -j "$JOBS" "${NINJA_K[@]}" "${OBJS[@]}"
elif ((${#TARGETS[@]})); then
  "$CMAKE" --build "$BUILD" -j "$JOBS" --target "${TARGETS[@]}" "${KEEP_GOING[@]}"
else
  "$CMAKE" --build "$BUILD" -j "$JOBS" "${KEEP_GOING[@]}"
fi
