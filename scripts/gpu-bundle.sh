#!/usr/bin/env bash
# Fetches, on the CPU (Debian) machine, what a bare GPU machine needs to build nanovllm beyond
# nvcc / CMake / ninja / Python: the Debian -dev packages as .deb files (headers and static .a
# libraries only; scripts/gpu-build.sh unpacks them into a prefix there), plus the small real
# model stories260K for the transformers comparison. The folder is git-ignored; a device call
# takes it along with `carry: [".gpu-bundle"]` (see scripts/gpu-check.sh).
#
#   scripts/gpu-bundle.sh [--out DIR] [--no-models]     (default DIR: <repo>/.gpu-bundle)
#
# Layout: DIR/debs/*.deb, DIR/models/stories260K*/ (when ../shared/data is present),
# DIR/MANIFEST.txt (packages, sizes, the glibc / libstdc++ floor of the static libraries).
# Needs network access to the Debian mirror; uses a private apt package list (the system's
# apt state is not touched), so it works whatever `apt-get update` last did.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
OUT="$ROOT/.gpu-bundle"
MODELS=1
while (($#)); do
  case "$1" in
    --out) OUT="$2"; shift 2 ;;
    --no-models) MODELS=0; shift ;;
    -h|--help) sed -n '2,14p' "$0"; exit 0 ;;
    *) echo "gpu-bundle: unknown argument '$1' (expected --out DIR or --no-models)" >&2; exit 2 ;;
  esac
done

# The build's needs (see cmake/find_c_libs.cmake and scripts/deps.sh), minus what the minimal
# GPU build leaves out: cpp-httplib (server) and oneDNN (optional, shared library only).
# libopenblas-pthread-dev carries the static libopenblas.a and cblas.h.
PKGS=(nlohmann-json3-dev libpcre2-dev libxxhash-dev libutf8proc-dev libcli11-dev
      libgtest-dev libgmock-dev libopenblas-pthread-dev)

mkdir -p "$OUT/debs"
OUT="$(cd "$OUT" && pwd)"
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT
mkdir -p "$TMP/lists/partial" "$TMP/cache/archives/partial"
APT=(apt-get -q -o "Dir::State::Lists=$TMP/lists" -o "Dir::Cache=$TMP/cache"
     -o "APT::Sandbox::User=root" -o "Acquire::Languages=none")
echo "gpu-bundle: apt-get update (private list in $TMP)"
"${APT[@]}" update >"$TMP/update.log" 2>&1 || { cat "$TMP/update.log" >&2; exit 1; }
rm -f "$OUT"/debs/*.deb
(cd "$OUT/debs" && "${APT[@]}" download "${PKGS[@]}" >"$TMP/download.log" 2>&1) ||
  { cat "$TMP/download.log" >&2; echo "gpu-bundle: apt-get download failed" >&2; exit 1; }

if ((MODELS)); then
  # stories260K (Llama, f32), its bf16 copy and its Qwen2 twin (attention bias): ~2.7 MB.
  SRC="${NANOVLLM_SHARED_DATA:-$ROOT/../shared/data}/models"
  rm -rf "$OUT/models"
  for m in stories260K-hf stories260K-hf-bf16 stories260K-qwen2-hf; do
    if [ -f "$SRC/$m/config.json" ]; then
      mkdir -p "$OUT/models"
      cp -rL "$SRC/$m" "$OUT/models/$m"
    else
      echo "gpu-bundle: $SRC/$m not found: gpu-check skips what needs it" >&2
    fi
  done
  [ -d "$OUT/models" ] && chmod -R u+w "$OUT/models"
fi

{
  echo "# nanovllm GPU bundle, made $(date -u +%FT%TZ) on $(. /etc/os-release; echo "$PRETTY_NAME")"
  echo "# packages (name version bytes)"
  for f in "$OUT"/debs/*.deb; do
    printf '%s %s %s\n' "$(dpkg-deb -f "$f" Package)" "$(dpkg-deb -f "$f" Version)" "$(stat -c %s "$f")"
  done
  [ -d "$OUT/models" ] && echo "# models: $(ls "$OUT/models")"
  echo "# ABI floor of the static libraries (symbols resolved against this machine's libraries):"
  mkdir -p "$TMP/x"
  for f in "$OUT"/debs/*.deb; do dpkg-deb -x "$f" "$TMP/x"; done
  python3 "$ROOT/scripts/gpu_bundle_abi.py" "$TMP/x" || echo "(ABI report failed)"
  echo "# total bytes: $(du -sb "$OUT" --exclude=MANIFEST.txt | cut -f1)"
} >"$OUT/MANIFEST.txt"
cat "$OUT/MANIFEST.txt"
echo "gpu-bundle: $OUT ($(du -sh "$OUT" | cut -f1))"
