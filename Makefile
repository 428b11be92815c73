# spintune: the two set-up commands of the README.
#   make demo   install missing Debian packages, build (optimised), run the demo
#   make test   the same set-up, then every test
BUILD ?= build
JOBS ?= $(shell nproc)
BUILD_TYPE ?= Release

DEB_PACKAGES := cmake ninja-build g++ pkg-config \
  libgrpc++-dev libprotobuf-dev protobuf-compiler protobuf-compiler-grpc \
  libeigen3-dev libsqlite3-dev libgtest-dev libgmock-dev libbenchmark-dev \
  libcli11-dev nlohmann-json3-dev libspdlog-dev liburing-dev clang libclang-rt-14-dev \
  openssl libssl-dev libmicrohttpd-dev curl chromium \
  linux-headers-amd64 qemu-system-x86 busybox-static kmod cpio jq \
  libbpf-dev bpftool libtraceevent-dev libtracefs-dev

.PHONY: all deps configure build demo demo-live test bench uring-ref vboard clean

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

test: build
	@ctest --test-dir $(BUILD) --output-on-failure -j $(JOBS)

uring-ref: build
	@tools/uring_ref_demo.sh $(BUILD)

# spintune.ko on Debian's 6.1 kernel under QEMU: the loop on a virtual board.
vboard: build
	@tools/vboard.sh $(BUILD)

bench: build
	@$(BUILD)/bench/optimizer_bench

clean:
	rm -rf $(BUILD) $(BUILD).configure.log
