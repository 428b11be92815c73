# 64-bit ARM boards (ARMv8-A and later): Debian's arm64 port.
# cmake -DCMAKE_TOOLCHAIN_FILE=cmake/toolchains/arm64.cmake -DSPINTUNE_SYSROOT=DIR
set(SPINTUNE_CROSS_TRIPLET aarch64-linux-gnu)
set(SPINTUNE_CROSS_PROCESSOR aarch64)
set(SPINTUNE_CROSS_QEMU qemu-aarch64-static)
include(${CMAKE_CURRENT_LIST_DIR}/debian-cross.cmake)
