# 32-bit ARM boards with ARMv7-A and a VFPv3-D16 FPU (hard-float ABI):
# Debian's armhf port; its compiler's defaults are the port's baseline.
# cmake -DCMAKE_TOOLCHAIN_FILE=cmake/toolchains/armhf.cmake -DSPINTUNE_SYSROOT=DIR
set(SPINTUNE_CROSS_TRIPLET arm-linux-gnueabihf)
set(SPINTUNE_CROSS_PROCESSOR armv7l)
set(SPINTUNE_CROSS_QEMU qemu-arm-static)
# GCC notes on every std::vector<double> iterator that its parameter passing
# changed in GCC 7.1; everything here is built by GCC 12.
set(CMAKE_CXX_FLAGS_INIT -Wno-psabi)
include(${CMAKE_CURRENT_LIST_DIR}/debian-cross.cmake)
