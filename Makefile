# spintune: the two set-up commands of the README.
#   make demo   install missing Debian packages, build (optimised), run the demo
#   make test   the same set-up, then every test
BUILD ?= build
JOBS ?= $(shell nproc)
BUILD_TYPE ?= Release

DEB_PACKAGES := cmake ninja-build g++ pkg-config \
  libgrpc++-dev libprotobuf-dev protobuf-compiler protobuf-compiler-grpc \
  libeigen3-dev libsqlite3-dev libpq-dev postgresql libgtest-dev libgmock-dev libbenchmark-dev \
  libcli11-dev nlohmann-json3-dev libspdlog-dev liburing-dev clang libclang-rt-14-dev \
  openssl libssl-dev libmicrohttpd-dev curl chromium python3 \
  linux-headers-amd64 qemu-system-x86 busybox-static kmod cpio jq flex bison \
  libbpf-dev bpftool libtraceevent-dev libtracefs-dev \
  dpkg-dev man-db crossbuild-essential-arm64 crossbuild-essential-armhf qemu-user-static mmdebstrap
# Where `make install` puts things (DESTDIR is honoured); the boards `make cross` builds for.
PREFIX ?= /usr/local
CROSS_ARCHES ?= arm64 armhf armel

.PHONY: all deps configure build demo demo-live test bench uring-ref vboard install package cross clean

all: build

deps:
	@tools/install-deps.sh $(DEB_PACKAGES)

configure: deps
	@cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) > $(BUILD).configure.log 2>&1 \
	  || { cat $(BUILD).configure.log; exit 1; }

build: configure
	@cmake --build $(BUILD) -j $(JOBS)

demo: build
	@tools/demo.sh $(BUILD)

demo-live: build
	@tools/demo_live.sh $(BUILD)

# The cross-built agents' tests (Cross.*) run under qemu-user with the rest.
test: build cross
	@ctest --test-dir $(BUILD) --output-on-failure -j $(JOBS)

install: build
	@cmake --install $(BUILD) --prefix $(PREFIX)

# Debian packages: spintune-tuner, -agent, -cli, -dev in $(BUILD)/packages.
package: build
	@cd $(BUILD) && cpack

# spintune-agent and its tests for arm64 and armhf boards, in $(BUILD)/cross/ARCH.
cross: build
	@tools/cross_build.sh --jobs $(JOBS) $(BUILD) $(CROSS_ARCHES)

uring-ref: build
	@tools/uring_ref_demo.sh $(BUILD)

# spintune.ko on Debian's 6.1 kernel under QEMU: the loop on a virtual board.
vboard: build
	@tools/vboard.sh $(BUILD)

bench: build
	@$(BUILD)/bench/optimizer_bench

clean:
	rm -rf $(BUILD) $(BUILD).configure.log
