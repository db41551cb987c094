# Top-level entry points. `make run` and `make test` each install deps, configure and build first.
BUILD ?= build
JOBS ?= $(shell nproc)
CMAKE_FLAGS ?=
GEN := $(shell command -v ninja >/dev/null 2>&1 && echo "-G Ninja")

.PHONY: all deps configure build run test unit asan clean fuzz fuzz-smoke python

all: build

deps:
	@bash scripts/deps.sh

$(BUILD)/CMakeCache.txt:
	cmake -S . -B $(BUILD) $(GEN) -DCMAKE_BUILD_TYPE=Release $(CMAKE_FLAGS)

configure: deps $(BUILD)/CMakeCache.txt

build: configure
	cmake --build $(BUILD) -j $(JOBS)

# The main job: nano-vLLM's bench workload on a small random Qwen3 model (see README), with its
# scheduler trace and the trace's HTML page in $(BUILD)/.
run: build
	$(BUILD)/nanovllm bench --random-model small --num-seqs 32 --min-input-len 64 --max-input-len 256 \
	  --min-output-len 32 --max-output-len 128 \
	  --cache-dir $(BUILD)/models --trace $(BUILD)/trace.json
	$(BUILD)/nanovllm trace-view $(BUILD)/trace.json -o $(BUILD)/trace.html
	@echo "trace: $(BUILD)/trace.html (open in a browser), $(BUILD)/trace.json (https://ui.perfetto.dev or chrome://tracing)"

# make test: the release build's tests, then the unit tests and the fuzz targets' smoke run
# (fuzz_smoke_*) under ASan + UBSan. The clang libFuzzer build (make fuzz, make fuzz-smoke) is not
# part of it: that is a second instrumented build of every library, with clang.
test: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS) --timeout 1500
	$(MAKE) asan

# Unit tests under AddressSanitizer + UBSan (CPU only; the std::thread pool, so both pools are tested).
# The conformance table runs under ASan natively and with the scalar cap; its AVX2 and AVX-VNNI
# runs (~100 s each under ASan) are left to the release build, and the kernels' own tests run with
# every cap here too (unit_kernels_cpu_*).
asan: deps
	cmake -S . -B $(BUILD)-asan $(GEN) -DCMAKE_BUILD_TYPE=Debug -DNANOVLLM_SANITIZE=ON -DNANOVLLM_CUDA=OFF -DNANOVLLM_OPENMP=OFF
	cmake --build $(BUILD)-asan -j $(JOBS) --target unit_tests fuzz_smoke
	cd $(BUILD)-asan && ASAN_OPTIONS=detect_leaks=1 ctest --output-on-failure -j $(JOBS) -L 'unit|fuzz' \
	  -E '^unit_backend_conformance_(avx2|avxvnni)$$' --timeout 1500

unit: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS) -L unit

# libFuzzer targets (clang): tests/fuzz/<name>_fuzz.cc -> $(BUILD)-fuzz/fuzz_<name>, linked with the
# libraries named on its line in CMakeLists.txt (NANOVLLM_FUZZ_LIBS_<name>; a new fuzzer adds that
# one line, see tests/fuzz/README.md). Run one at a time, e.g.
#   TOKENIZER_FUZZ_DIR=../shared/data/tokenizers/qwen3 build-fuzz/fuzz_tokenizer -max_total_time=300
#   build-fuzz/fuzz_http_request -max_total_time=300 -jobs=1 tests/fuzz/corpus/http_request
# FUZZ_OPT: the fuzz build's optimization (libFuzzer's usual -O1; instrumented, llm_engine.cc
# compiles in 26 s at -O0, 39 s at -O1, 42 s at -O3 on a Zen 1 core).
FUZZ_OPT ?= -O1
fuzz: deps
	CC=clang CXX=clang++ cmake -S . -B $(BUILD)-fuzz $(GEN) -DNANOVLLM_FUZZ=ON -DNANOVLLM_CUDA=OFF \
	  "-DCMAKE_CXX_FLAGS_RELEASE=$(FUZZ_OPT) -DNDEBUG" "-DCMAKE_C_FLAGS_RELEASE=$(FUZZ_OPT) -DNDEBUG"
	cmake --build $(BUILD)-fuzz -j $(JOBS) --target fuzzers

# The libFuzzer targets' smoke run with clang: builds the fuzzers and runs each for FUZZ_SECONDS
# (scripts/fuzz-smoke.sh). make test runs the same targets in its ASan tree instead (fuzz_smoke_*).
FUZZ_SECONDS ?= 5
fuzz-smoke:
	@if command -v clang++ >/dev/null 2>&1; then \
	  $(MAKE) fuzz && FUZZ_SECONDS=$(FUZZ_SECONDS) bash scripts/fuzz-smoke.sh $(BUILD)-fuzz; \
	else \
	  echo "fuzz-smoke: skipped: no clang++ (make deps installs clang and libclang-rt-dev on Debian)"; \
	fi

clean:
	rm -rf $(BUILD) $(BUILD)-asan $(BUILD)-fuzz build-pip

# The Python package in-tree: build/python/nanovllm (use with PYTHONPATH=build/python).
python: configure
	cmake --build $(BUILD) -j $(JOBS) --target nanovllm_python
	@echo "Python package: PYTHONPATH=$(BUILD)/python /usr/bin/python3 -c 'import nanovllm'"
