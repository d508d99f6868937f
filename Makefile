# The README's two commands: `make demo` and `make test`. Each installs what is missing (Debian 12, as root),
# configures (Release), builds in parallel and runs.
BUILD ?= build
JOBS ?= $(shell nproc)
PACKAGES := cmake ninja-build g++ pkg-config libabsl-dev libprotobuf-dev protobuf-compiler libgtest-dev \
            libgmock-dev libsystemc-dev libbenchmark-dev python3

.PHONY: all deps configure build test demo bench clean asan

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

# The test suite under AddressSanitizer and UndefinedBehaviorSanitizer.
asan: deps
	cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DSPATIAL_SANITIZE=ON
	cmake --build build-asan -j $(JOBS)
	cd build-asan && ctest --output-on-failure -j $(JOBS)

clean:
	rm -rf $(BUILD) build-asan
