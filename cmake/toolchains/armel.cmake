# 32-bit ARM boards without an FPU the hard-float ABI can use, from ARMv5TE
# up (i.MX28's ARM926EJ-S, Raspberry Pi 1/Zero's ARM1176): Debian's armel
# port (soft-float ABI). qemu-user emulates the i.MX28's core, so a binary
# that needs more than ARMv5TE fails its tests.
# cmake -DCMAKE_TOOLCHAIN_FILE=cmake/toolchains/armel.cmake -DSPINTUNE_SYSROOT=DIR
set(SPINTUNE_CROSS_TRIPLET arm-linux-gnueabi)
set(SPINTUNE_CROSS_PROCESSOR armv5tel)
set(SPINTUNE_CROSS_QEMU qemu-arm-static -cpu arm926)
# As on armhf: GCC's note that parameter passing changed in GCC 7.1.
set(CMAKE_CXX_FLAGS_INIT -Wno-psabi)
# ARMv5 has no 64-bit atomic instructions: GCC calls libatomic for them.
set(CMAKE_C_STANDARD_LIBRARIES_INIT -latomic)
set(CMAKE_CXX_STANDARD_LIBRARIES_INIT -latomic)
include(${CMAKE_CURRENT_LIST_DIR}/debian-cross.cmake)
