# Cross builds for Debian's ports with Debian's own cross compilers
# (crossbuild-essential-<arch>) against a sysroot of Debian's packages of
# that architecture (tools/cross_build.sh extracts it with mmdebstrap).
# Included by arm64.cmake and armhf.cmake, which set:
#   SPINTUNE_CROSS_TRIPLET   GNU triplet, also the multiarch directory name
#   SPINTUNE_CROSS_PROCESSOR CMAKE_SYSTEM_PROCESSOR
#   SPINTUNE_CROSS_QEMU      qemu-user binary that runs the target's programs
# The caller gives -DSPINTUNE_SYSROOT=DIR (or the environment variable).
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR ${SPINTUNE_CROSS_PROCESSOR})
set(CMAKE_LIBRARY_ARCHITECTURE ${SPINTUNE_CROSS_TRIPLET})
set(CMAKE_C_COMPILER ${SPINTUNE_CROSS_TRIPLET}-gcc)
set(CMAKE_CXX_COMPILER ${SPINTUNE_CROSS_TRIPLET}-g++)

if(NOT SPINTUNE_SYSROOT AND DEFINED ENV{SPINTUNE_SYSROOT})
  set(SPINTUNE_SYSROOT $ENV{SPINTUNE_SYSROOT})
endif()
if(NOT SPINTUNE_SYSROOT OR NOT EXISTS ${SPINTUNE_SYSROOT}/usr/lib/${SPINTUNE_CROSS_TRIPLET})
  message(FATAL_ERROR "SPINTUNE_SYSROOT must name a sysroot of Debian's "
          "${SPINTUNE_CROSS_TRIPLET} packages (tools/cross_build.sh makes one)")
endif()
# try_compile() projects read this file again: hand the sysroot on.
list(APPEND CMAKE_TRY_COMPILE_PLATFORM_VARIABLES SPINTUNE_SYSROOT)
set(CMAKE_SYSROOT ${SPINTUNE_SYSROOT})

# Libraries, headers and CMake packages from the sysroot only; programs
# (protoc, grpc_cpp_plugin) from the host.
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)
set(ENV{PKG_CONFIG_SYSROOT_DIR} ${SPINTUNE_SYSROOT})
set(ENV{PKG_CONFIG_LIBDIR}
    "${SPINTUNE_SYSROOT}/usr/lib/${SPINTUNE_CROSS_TRIPLET}/pkgconfig:${SPINTUNE_SYSROOT}/usr/share/pkgconfig")

# CTest and gtest_discover_tests run the target's programs under qemu-user;
# -L makes the target's dynamic loader and libraries come from the sysroot.
set(CMAKE_CROSSCOMPILING_EMULATOR ${SPINTUNE_CROSS_QEMU} -L ${SPINTUNE_SYSROOT})
