#!/usr/bin/env bash
# make test's proof that scripts/gpu-check.sh can build on a bare GPU machine: the CUDA targets
# are configured and built by scripts/gpu-build.sh inside a chroot that has a Debian base system,
# g++, CMake and ninja but none of the Debian -dev packages the project uses (and no pkg-config),
# with only the bundle of scripts/gpu-bundle.sh and the CUDA toolkit (bind-mounted) visible.
# The source tree is mounted read-only. The chroot (mmdebstrap, ~70 s, ~460 MB) and the build
# folder are cached under the build dir; reruns only rebuild what changed.
#
#   tests/bundle/bundle_build_check.sh [TARGET...]      (default: BUNDLE_CHECK_TARGETS below)
# Env: NANOVLLM_SOURCE_DIR, NANOVLLM_BUILD_DIR (set by ctest), BUNDLE_CHECK_JOBS (default nproc).
# Exit 77 (skip) without root or without nvcc; 1 on any failure.
set -euo pipefail
SRC="${NANOVLLM_SOURCE_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}"
WORK="${NANOVLLM_BUILD_DIR:-$SRC/build}/bundle-check"
JOBS="${BUNDLE_CHECK_JOBS:-$(nproc)}"
# The CUDA library, the CLI (every bundled library, CLI11 included), the GPU tests (GTest) and
# one unit-test binary (GTest + gmock, as gpu-check runs them) and the CUDA microbenchmarks.
BUNDLE_CHECK_TARGETS=(nv_kernels_cuda nanovllm gpu_tests test_engine bench_gpu_decode_attention bench_gpu_gemm)
(($#)) && BUNDLE_CHECK_TARGETS=("$@")

skip() { echo "SKIP: $*"; exit 77; }
fail() { echo "FAIL: $*" >&2; exit 1; }
[ "$(id -u)" -eq 0 ] || skip "needs root (chroot + mount namespace)"
NVCC="$(command -v nvcc || true)"; [ -n "$NVCC" ] || NVCC=/usr/local/cuda/bin/nvcc
[ -x "$NVCC" ] || skip "no nvcc (CUDA toolkit) on this machine"
CUDA_HOME="$(realpath "$(dirname "$(realpath "$NVCC")")/..")"
command -v unshare >/dev/null && command -v chroot >/dev/null || fail "unshare/chroot missing (util-linux, coreutils)"
command -v mmdebstrap >/dev/null || fail "mmdebstrap missing: run scripts/deps.sh"
unshare --mount --propagation private true 2>/dev/null ||
  skip "this machine refuses mount namespaces (unshare --mount), which the chroot needs"
mkdir -p "$WORK"
t0=$(date +%s)

# 1. The bundle, fetched the way a GPU session fetches it (always fresh: ~5 s).
bash "$SRC/scripts/gpu-bundle.sh" --out "$WORK/bundle" --no-models >"$WORK/bundle.log" 2>&1 ||
  { cat "$WORK/bundle.log"; fail "scripts/gpu-bundle.sh failed"; }
echo "bundle: $(du -sb "$WORK/bundle/debs" | cut -f1) bytes of .deb ($(ls "$WORK/bundle/debs" | wc -l) packages)"

# 2. The bare root file system (cached; rebuilt when the recipe changes).
MIRROR="$(sed -n 's/^URIs: *\(http[^ ]*\/debian\)$/\1/p' /etc/apt/sources.list.d/*.sources 2>/dev/null | head -1)"
MIRROR="${MIRROR:-http://deb.debian.org/debian}"
RECIPE=(mmdebstrap --variant=minbase --mode=root --include=g++,cmake,ninja-build
        --aptopt='Acquire::Languages "none"' --dpkgopt='path-exclude=/usr/share/doc/*'
        --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/locale/*'
        bookworm)
R="$WORK/rootfs"
if [ "$(cat "$R/.recipe" 2>/dev/null)" != "${RECIPE[*]} $MIRROR" ]; then
  rm -rf "$R" "$R.tmp"
  echo "rootfs: ${RECIPE[*]} $MIRROR"
  "${RECIPE[@]}" "$R.tmp" "$MIRROR" >"$WORK/rootfs.log" 2>&1 || { tail -30 "$WORK/rootfs.log"; fail "mmdebstrap failed"; }
  echo "${RECIPE[*]} $MIRROR" >"$R.tmp/.recipe"
  mv "$R.tmp" "$R"
fi
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

# 3. Configure + build inside it (private mount namespace: the mounts vanish with it).
mkdir -p "$WORK/build"
rc=0
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
    bash /src/scripts/gpu-build.sh --bundle /bundle --build /build --arch 90 --jobs "$JOBS" "$@"
' _ "$R" "$SRC" "$WORK" "$CUDA_HOME" "$JOBS" "${BUNDLE_CHECK_TARGETS[@]}" >"$WORK/build.log" 2>&1 || rc=$?
grep -E "^gpu-build|^-- (pcre2|utf8proc|xxhash|cli11|openblas|Found GTest)" "$WORK/build.log" || true
((rc == 0)) || { tail -40 "$WORK/build.log"; fail "configure/build in the chroot failed (rc $rc, log: $WORK/build.log)"; }

# 4. What was built links no bundled library dynamically (static .a only).
for t in "${BUNDLE_CHECK_TARGETS[@]}"; do
  f="$(find "$WORK/build" -maxdepth 3 -type f -name "$t" -perm -u+x | head -1)"
  [ -n "$f" ] || continue
  if readelf -d "$f" | grep -E "NEEDED.*(pcre2|utf8proc|xxhash|openblas|gtest|gmock)"; then
    fail "$t links a bundled library dynamically"
  fi
done
echo "PASS: ${BUNDLE_CHECK_TARGETS[*]} configured and built in a chroot without the -dev packages ($(($(date +%s) - t0)) s)"
