#!/usr/bin/env bash
# make test's proof that scripts/gpu-check.sh can build on a bare GPU machine: the CUDA targets
# are configured and built by scripts/gpu-build.sh inside a chroot that has a Debian base system,
# g++, CMake and ninja but none of the Debian -dev packages the project uses (and no pkg-config),
# with only the bundle of scripts/gpu-bundle.sh and the CUDA toolkit (bind-mounted) visible.
# The source tree is mounted read-only. Two toolchains are proven, one chroot each (--suite):
#   bookworm  Debian 12: GCC 12, CMake 3.25 (the CPU machine's own toolchain): the configure and
#             the host-only test binaries (the host build compiles everything with GCC 12 already)
#   trixie    Debian 13: GCC 14, CMake 3.31 (nearer the GPU machine's PyTorch image, which has a
#             newer GCC and a pip CMake), the whole minimal build gpu-check makes: a missing
#             standard include, a deprecated CMake use in the project (an error in CMake 4) or an
#             nvcc host-compiler refusal shows up here.
# Nothing built here runs, so make test's time goes to what can differ between toolchains:
# bookworm compiles its targets at -O0 (gpu-build.sh --host-opt O0) and links them (the bundled
# libraries must link statically); trixie takes every C++ file through GCC 14's front end only
# (gpu-build.sh --syntax-only: about a quarter of an -O3 compile) and compiles every CUDA file
# with nvcc and GCC 14 as its host compiler, and links nothing.
# The bundle is the same in both: the CPU machine's (bookworm) .debs, as the GPU machine gets it.
# Each suite's chroot (mmdebstrap, 1-1.5 min, 410-460 MB) and build folder are cached under
# <build>/bundle-check/<suite>/; reruns only rebuild what changed (~10 s when nothing did).
# ctest runs gpu_bundle_build_trixie (and gpu_bundle_build, bookworm, when NANOVLLM_BUNDLE_SUITES
# names it; tests/CMakeLists.txt).
#
#   tests/bundle/bundle_build_check.sh [--suite bookworm|trixie] [TARGET...]
#                                      (default targets: BUNDLE_CHECK_TARGETS below)
# Env: NANOVLLM_SOURCE_DIR, NANOVLLM_BUILD_DIR (set by ctest), BUNDLE_CHECK_JOBS (default nproc),
# BUNDLE_CHECK_SUITE (default bookworm; --suite wins).
# Exit 77 (skip) without root, nvcc or mount namespaces, or when the Debian mirror is unreachable
# and the suite's chroot is not cached yet; 1 on any failure.
set -euo pipefail
SRC="${NANOVLLM_SOURCE_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}"
SUITE="${BUNDLE_CHECK_SUITE:-bookworm}"
[ "${1:-}" = --suite ] && { SUITE="${2:?--suite needs a Debian suite}"; shift 2; }
BASE="${NANOVLLM_BUILD_DIR:-$SRC/build}/bundle-check"
WORK="$BASE/$SUITE"
JOBS="${BUNDLE_CHECK_JOBS:-$(nproc)}"
# bookworm: the CUDA library, the CLI (every bundled library, CLI11 included), the GPU tests
# (GTest), one unit-test binary (GTest + gmock, as gpu-check runs them) and the CUDA
# microbenchmarks. trixie: everything gpu-check builds (no target: the whole minimal build), since
# a newer compiler can break any translation unit, and a unit test that does not build is one
# gpu-check does not run.
MODE=(--host-opt O0)
case "$SUITE" in
  # bookworm: the whole configure (CMake 3.25, the oldest we support, with the bundle) and the
  # host-only test binaries (GTest, PCRE2, utf8proc, nlohmann-json from the bundle, GCC 12);
  # the CUDA targets are compiled once, in trixie (make test's time: ~2 CPU-min instead of ~10).
  bookworm) BUNDLE_CHECK_TARGETS=(test_util test_tokenizer test_chat test_structured) ;;
  *) BUNDLE_CHECK_TARGETS=(); MODE=(--syntax-only) ;;
esac
(($#)) && BUNDLE_CHECK_TARGETS=("$@")
WHAT="${BUNDLE_CHECK_TARGETS[*]:-the whole minimal build}"

skip() { echo "SKIP [$SUITE]: $*"; exit 77; }
fail() { echo "FAIL [$SUITE]: $*" >&2; exit 1; }
[[ "$SUITE" =~ ^[a-z]+$ ]] || fail "bad suite name '$SUITE'"
[ "$(id -u)" -eq 0 ] || skip "needs root (chroot + mount namespace)"
NVCC="$(command -v nvcc || true)"; [ -n "$NVCC" ] || NVCC=/usr/local/cuda/bin/nvcc
[ -x "$NVCC" ] || skip "no nvcc (CUDA toolkit) on this machine"
# The toolkit's root as nvcc reports it ($NVCC may be a wrapper script elsewhere).
CUDA_HOME="$("$NVCC" --dryrun -x cu -c /dev/null -o /dev/null 2>&1 | sed -n 's/^#\$ TOP=//p' | head -1)" || true
[ -n "$CUDA_HOME" ] && [ -x "$CUDA_HOME/bin/nvcc" ] || skip "$NVCC does not work (no CUDA toolkit root from nvcc --dryrun)"
CUDA_HOME="$(realpath "$CUDA_HOME")"
NVCC="$CUDA_HOME/bin/nvcc"
command -v unshare >/dev/null && command -v chroot >/dev/null || fail "unshare/chroot missing (util-linux, coreutils)"
command -v mmdebstrap >/dev/null || fail "mmdebstrap missing: run scripts/deps.sh"
unshare --mount --propagation private true 2>/dev/null ||
  skip "this machine refuses mount namespaces (unshare --mount), which the chroot needs"
# The cache of the one-suite layout (<build>/bundle-check/{rootfs,build}) is bookworm's.
if [ "$SUITE" = bookworm ] && [ -d "$BASE/rootfs" ] && [ ! -e "$WORK" ]; then
  mkdir -p "$WORK"
  mv "$BASE/rootfs" "$WORK/rootfs"
  [ -d "$BASE/build" ] && mv "$BASE/build" "$WORK/build"
  rm -rf "$BASE/bundle" "$BASE/rootfs.tmp" "$BASE"/*.log
fi
mkdir -p "$WORK"
t0=$(date +%s)

# The Debian mirror the chroot comes from (the one this machine's apt uses), and whether it answers
# (apt's own downloader, so apt's proxy settings apply).
MIRROR="$(sed -n 's/^URIs: *\(http[^ ]*\/debian\)$/\1/p' /etc/apt/sources.list.d/*.sources 2>/dev/null | head -1)"
MIRROR="${MIRROR:-http://deb.debian.org/debian}"
ONLINE=1
rm -f "$WORK/InRelease"
if ! timeout 60 /usr/lib/apt/apt-helper -o Acquire::http::Timeout=15 -o Acquire::Retries=1 \
       download-file "$MIRROR/dists/$SUITE/InRelease" "$WORK/InRelease" >"$WORK/probe.log" 2>&1; then
  ONLINE=0
  WHY="$( (grep -m1 -E '^  ' "$WORK/probe.log" || tail -1 "$WORK/probe.log") | sed 's/^ *//')"
fi
rm -f "$WORK/InRelease"

# 1. The bundle, fetched the way a GPU session fetches it (always fresh: ~5 s); offline, the
#    bundle of the last run.
if ((ONLINE)); then
  bash "$SRC/scripts/gpu-bundle.sh" --out "$WORK/bundle" --no-models >"$WORK/bundle.log" 2>&1 ||
    { cat "$WORK/bundle.log"; fail "scripts/gpu-bundle.sh failed"; }
else
  compgen -G "$WORK/bundle/debs/*.deb" >/dev/null ||
    skip "the Debian mirror $MIRROR is unreachable ($WHY) and no bundle is cached"
  echo "bundle: the mirror $MIRROR is unreachable ($WHY): the bundle of the last run"
fi
echo "bundle: $(du -sb "$WORK/bundle/debs" | cut -f1) bytes of .deb ($(ls "$WORK/bundle/debs" | wc -l) packages," \
     "$(sed -n 's/.* on \(.*\)$/\1/p' "$WORK/bundle/MANIFEST.txt" | head -1))"

# 2. The bare root file system (cached; rebuilt when the recipe changes).
RECIPE=(mmdebstrap --variant=minbase --mode=root --include=g++,cmake,ninja-build
        --aptopt='Acquire::Languages "none"' --dpkgopt='path-exclude=/usr/share/doc/*'
        --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/locale/*'
        "$SUITE")
R="$WORK/rootfs"
if [ "$(cat "$R/.recipe" 2>/dev/null)" != "${RECIPE[*]} $MIRROR" ]; then
  ((ONLINE)) || skip "the Debian mirror $MIRROR is unreachable ($WHY) and the $SUITE chroot is not cached"
  rm -rf "$R" "$R.tmp"
  echo "rootfs: ${RECIPE[*]} $MIRROR"
  t1=$(date +%s)
  "${RECIPE[@]}" "$R.tmp" "$MIRROR" >"$WORK/rootfs.log" 2>&1 || { tail -30 "$WORK/rootfs.log"; fail "mmdebstrap failed"; }
  echo "${RECIPE[*]} $MIRROR" >"$R.tmp/.recipe"
  mv "$R.tmp" "$R"
  echo "rootfs: made in $(($(date +%s) - t1)) s"
fi
# (the codename, or sid in "forky/sid")
grep -qwF "$SUITE" "$R/etc/os-release" || fail "$R is not Debian $SUITE"
# The chroot must really lack what the bundle provides, or this test proves nothing.
for d in "$WORK"/bundle/debs/*.deb; do
  p="$(dpkg-deb -f "$d" Package)"
  if chroot "$R" dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    fail "the chroot has $p installed"
  fi
done
for f in usr/include/pcre2.h usr/include/utf8proc.h usr/include/xxhash.h usr/include/nlohmann \
         usr/include/CLI usr/include/gtest usr/include/x86_64-linux-gnu/cblas.h usr/bin/pkg-config; do
  [ ! -e "$R/$f" ] || fail "the chroot has /$f"
done
echo "rootfs: $R ($(du -sh "$R" | cut -f1)), no -dev packages of the project, no pkg-config"
TOOLCHAIN="Debian $(cat "$R/etc/debian_version") ($SUITE), g++ $(chroot "$R" g++ -dumpfullversion),"
TOOLCHAIN+=" cmake $(chroot "$R" cmake --version | sed -n '1s/.* //p'), ninja $(chroot "$R" ninja --version),"
TOOLCHAIN+=" nvcc $("$NVCC" --version | sed -n 's/.*release \([0-9.]*\).*/\1/p')"
echo "toolchain [$SUITE]: $TOOLCHAIN"

# 3. Configure + build inside it (private mount namespace: the mounts vanish with it).
mkdir -p "$WORK/build"
rc=0
t1=$(date +%s)
unshare --mount --propagation private bash -euc '
  R="$1"; SRC="$2"; WORK="$3"; CUDA_HOME="$4"; JOBS="$5"; shift 5
  mkdir -p "$R/src" "$R/bundle" "$R/build" "$R$CUDA_HOME" "$R/proc" "$R/dev" "$R/tmp"
  mount --bind "$SRC" "$R/src" && mount -o remount,bind,ro "$R/src"
  mount --bind "$WORK/bundle" "$R/bundle" && mount -o remount,bind,ro "$R/bundle"
  mount --bind "$CUDA_HOME" "$R$CUDA_HOME" && mount -o remount,bind,ro "$R$CUDA_HOME"
  mount --bind "$WORK/build" "$R/build"
  mount --rbind /dev "$R/dev"
  mount -t proc proc "$R/proc"
  mount -t tmpfs tmpfs "$R/tmp"
  exec chroot "$R" /usr/bin/env -i PATH="$CUDA_HOME/bin:/usr/local/bin:/usr/bin:/bin" HOME=/tmp \
    bash /src/scripts/gpu-build.sh --bundle /bundle --build /build --arch 90 --jobs "$JOBS" \
      "$@"
' _ "$R" "$SRC" "$WORK" "$CUDA_HOME" "$JOBS" "${MODE[@]}" ${BUNDLE_CHECK_TARGETS[@]+"${BUNDLE_CHECK_TARGETS[@]}"} >"$WORK/build.log" 2>&1 || rc=$?
grep -E "^gpu-build|^-- (The (C|CXX|CUDA) compiler identification|pcre2|utf8proc|xxhash|cli11|openblas|Found GTest)" "$WORK/build.log" || true
((rc == 0)) || { tail -40 "$WORK/build.log"; fail "configure/build in the chroot failed (rc $rc, log: $WORK/build.log)"; }
# A deprecated CMake use in the project's own files is a warning here and an error in a later
# CMake (the GPU machine's pip CMake may be 4.x); the bundled packages' config files are not ours.
if grep -A3 -E "^CMake (Deprecation Warning|Warning \(dev\)) at /src/" "$WORK/build.log"; then
  fail "CMake deprecation/dev warnings in the project's CMake files (log: $WORK/build.log)"
fi
echo "build: $(($(date +%s) - t1)) s, $(grep -cE '^\[[1-9][0-9]*/[0-9]+\]' "$WORK/build.log") build steps"

# 4. What was built links no bundled library dynamically (static .a only).
if [ "${MODE[0]}" = --syntax-only ]; then
  BINS=()
  n_obj="$(find "$WORK/build" -path "$WORK/build/bundle-prefix" -prune -o -name '*.o' -print | wc -l)"
  n_cu="$(find "$WORK/build" -path "$WORK/build/bundle-prefix" -prune -o -name '*.cu.o' -size +0 -print | wc -l)"
  ((n_obj > 100 && n_cu > 5)) || fail "the syntax-only build left $n_obj object files ($n_cu compiled CUDA ones)"
  WHAT="$WHAT, $n_obj files through GCC's front end or nvcc ($n_cu CUDA), nothing linked"
elif ((${#BUNDLE_CHECK_TARGETS[@]})); then
  BINS=()
  for t in "${BUNDLE_CHECK_TARGETS[@]}"; do
    f="$(find "$WORK/build" -maxdepth 3 -type f -name "$t" -perm -u+x | head -1)"
    [ -n "$f" ] && BINS+=("$f")
  done
else
  mapfile -t BINS < <(find "$WORK/build" -maxdepth 3 -path "$WORK/build/bundle-prefix" -prune -o \
                        -path '*/CMakeFiles' -prune -o -type f -perm -u+x -print)
  ((${#BINS[@]} > 10)) || fail "the whole build made only ${#BINS[@]} executables"
fi
for f in ${BINS[@]+"${BINS[@]}"}; do
  if readelf -d "$f" | grep -E "NEEDED.*(pcre2|utf8proc|xxhash|openblas|gtest|gmock)"; then
    fail "${f#"$WORK/build/"} links a bundled library dynamically"
  fi
done
echo "PASS [$SUITE]: $WHAT (${#BINS[@]} executables) configured and built in a chroot without the -dev packages" \
     "($TOOLCHAIN; $(($(date +%s) - t0)) s)"
