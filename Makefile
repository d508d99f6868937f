# The README's two commands: `make demo` and `make test`. Each installs what is missing (Debian 12, as root),
# configures (Release), builds in parallel and runs.
BUILD ?= build
JOBS ?= $(shell nproc)
PACKAGES := cmake ninja-build g++ pkg-config libabsl-dev libprotobuf-dev protobuf-compiler libgtest-dev \
            libgmock-dev libsystemc-dev libbenchmark-dev libopenblas-dev python3

.PHONY: all deps configure build test demo bench fidelity clean asan test-asan fuzz

all: build

# Install only the packages that are missing, so a machine that has them all needs no network.
deps:
	@missing=""; for p in $(PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  echo "installing:$$missing"; \
	  if [ "$$(id -u)" != 0 ]; then echo "error: missing packages:$$missing (run as root or install them)"; exit 2; fi; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; \
	fi

$(BUILD)/build.ninja: | deps
	cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Release

configure: deps $(BUILD)/build.ninja

build: configure
	cmake --build $(BUILD) -j $(JOBS)

test: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS) --timeout 600

demo: build
	SC_COPYRIGHT_MESSAGE=DISABLE $(BUILD)/tools/spatial demo

bench: configure
	cmake --build $(BUILD) -j $(JOBS) --target bench_all
	@for b in $(BUILD)/bench/*_bench; do echo "== $$b"; $$b; done

# The simulator against tt-metal's published GEMM tables; writes the rows of bench/fidelity/RESULTS.md.
fidelity: configure
	cmake --build $(BUILD) -j $(JOBS) --target gemm_fidelity llm_decode_fidelity sdpa_fidelity
	$(BUILD)/bench/gemm_fidelity --markdown=bench/fidelity/results_table.md
	SC_COPYRIGHT_MESSAGE=DISABLE $(BUILD)/bench/sdpa_fidelity --markdown=bench/fidelity/sdpa_table.md
	SC_COPYRIGHT_MESSAGE=DISABLE $(BUILD)/bench/llm_decode_fidelity --markdown=bench/fidelity/llm_decode_table.md

# The whole test suite under AddressSanitizer, UndefinedBehaviorSanitizer and LeakSanitizer (-O1: the suite runs
# in about 8 minutes on 2 cores); any report fails its test (UBSan does not recover, ASan and LSan abort). CI
# (.ci/run) runs it after `make test`. ASAN_TESTS narrows it to a ctest regex, ASAN_EXCLUDE leaves some out.
ASAN_TESTS ?=
ASAN_EXCLUDE ?=
SANITIZER_ENV := ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
test-asan: deps
	cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=Debug "-DCMAKE_CXX_FLAGS_DEBUG=-O1 -g" -DSPATIAL_SANITIZE=ON
	cmake --build build-asan -j $(JOBS)
	cd build-asan && $(SANITIZER_ENV) ctest --output-on-failure -j $(JOBS) --timeout 1800 \
	  $(if $(ASAN_TESTS),-R '$(ASAN_TESTS)') $(if $(ASAN_EXCLUDE),-E '$(ASAN_EXCLUDE)')
asan: test-asan

# libFuzzer on every entry point (tests/fuzz), each for FUZZ_SECONDS (default 60), with every library
# instrumented for coverage, ASan and UBSan (clang 14, installed when missing). Crashes: build-fuzz/crashes/.
FUZZ_SECONDS ?= 60
FUZZ_TARGETS ?= parse_certify_vm lower target npy cli
fuzz: deps
	@dpkg -s clang-14 >/dev/null 2>&1 || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq clang-14; }
	CXX=clang++-14 cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSPATIAL_FUZZ=ON
	cmake --build build-fuzz -j $(JOBS) --target parse_certify_vm_fuzzer lower_fuzzer target_fuzzer npy_fuzzer cli_fuzzer
	FUZZ_SECONDS=$(FUZZ_SECONDS) FUZZ_TARGETS="$(FUZZ_TARGETS)" tools/dev/fuzz.sh build-fuzz

clean:
	rm -rf $(BUILD) build-asan build-fuzz
