# The user's interface. Every target sets up what it needs first (idempotent, cached).
#   make run    set up and build what the main job needs (the CLI, the engine, the default models: no test
#               binaries, test clients or llama.cpp reference tools), serve the bundled default models
#               (gantry serve) and send it a few requests
#   make demo   the same set-up and build, then the command-line tour (detect, plan, run) on the bundled models
#   make test   set up, build, run every test
#   make build  set up and build build/bin/gantry
#   make bench  set up, build, run the benchmarks (prints BENCH lines)
#   make setup  install/fetch/build dependencies only (everything make test needs)
#   make dist   set up, build, pack dist/gantry-<version>-linux-x86_64.tar.zst (self-contained; docs/dist.md)
#   make dist-check  also the -check overlay (test binaries, models, ONNX node suite) that gpu-check.sh uses
#   make image  the OCI image of `gantry serve` from that bundle on a debootstrap'ed Debian base (scripts/image.sh)
SHELL := /bin/bash
JOBS ?= $(shell nproc)
PRESET ?= default
BUILD_DIR := $(if $(filter default,$(PRESET)),build,build-$(PRESET))

.PHONY: setup setup-main setup-bench build build-main test run demo bench asan tsan fuzz fuzz-smoke clean format dist dist-check image

setup:
	@bash scripts/setup.sh all

# What make run and make demo need, and no more (scripts/setup.sh main; the target gantry and the engine).
setup-main:
	@bash scripts/setup.sh main

# What make bench adds: llama.cpp's reference tools (llama-bench, llama-server, ggml-rpc-server).
setup-bench:
	@bash scripts/setup.sh bench

build: setup
	@if [ ! -f $(BUILD_DIR)/build.ninja ]; then cmake --preset $(PRESET) >/dev/null || exit 1; fi
	@cmake --build --preset $(PRESET) -j $(JOBS)

build-main: setup-main
	@if [ ! -f $(BUILD_DIR)/build.ninja ]; then cmake --preset $(PRESET) >/dev/null || exit 1; fi
	@cmake --build --preset $(PRESET) -j $(JOBS) --target gantry

test: build
	@ctest --preset $(PRESET) -j $(JOBS)

run: build-main
	@bash scripts/run-main.sh

demo: build-main
	@bash scripts/demo.sh

bench: setup-bench build
	@bash bench/run.sh

# Sanitizer build and its tests (ASan + UBSan).
asan:
	@$(MAKE) --no-print-directory test PRESET=asan

# ThreadSanitizer on the threaded parts: the runtime's manager and batcher, the text engine, the HTTP and
# gRPC servers, and the server attack replays (tests/scripts/serve_attack.sh) against a TSan gantry.
TSAN_TESTS := LockOrder|ModelManager|ModelQueue|TenantQueue|BatchRule|RequestFaults|Watchdog|LoopMonitor|BatchEngine|DynamicBatcher|HttpServer|GrpcServer|script\.serve_attack|script\.serve_tenants
tsan: setup
	@if [ ! -f build-tsan/build.ninja ]; then cmake --preset tsan >/dev/null || exit 1; fi
	@cmake --build --preset tsan -j $(JOBS) --target gantry runtime_test llama_test server_test
	@ctest --preset tsan -j $(JOBS) -R '$(TSAN_TESTS)'

# libFuzzer targets; run each with e.g. build-fuzz/bin/manifest_fuzz -max_total_time=60
fuzz: setup
	@cmake --preset fuzz >/dev/null && cmake --build --preset fuzz -j $(JOBS)

# Every fuzz target for 60 s (FUZZ_SECONDS=N to change) from its seeds; one line per target: execs, crashes.
fuzz-smoke: fuzz
	@scripts/fuzz-smoke.sh $(or $(FUZZ_SECONDS),60)

# The self-contained bundle (scripts/dist.sh; the CUDA variant is scripts/dist-cuda.sh, run on a GPU machine).
dist: build
	@bash scripts/dist.sh --build $(BUILD_DIR)

dist-check: build
	@bash scripts/dist.sh --build $(BUILD_DIR) --check

# dist/gantry-<version>-oci/ (an OCI image layout) and dist/gantry-<version>-oci.tar (podman load -i ...).
image: build
	@bundle=$$(bash scripts/dist.sh --build $(BUILD_DIR)) && bash scripts/image.sh --bundle "$$bundle"

format:
	@git ls-files '*.cpp' '*.h' | xargs clang-format -i

clean:
	rm -rf build build-asan build-tsan build-fuzz dist
