# CMake toolchain for the AArch64 runtime, built on an x86-64 Debian machine
# with Debian's cross compiler (g++-aarch64-linux-gnu) and run there under
# qemu-user (qemu-aarch64). scripts/build-cross.sh uses it:
#   cmake -S . -B DIR -DCMAKE_TOOLCHAIN_FILE=cmake/aarch64-linux-gnu.cmake -DFCB_RUNTIME_ONLY=ON
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)
# The cross toolchain's own sysroot (libc, libstdc++ for aarch64).
set(CMAKE_FIND_ROOT_PATH /usr/aarch64-linux-gnu)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)   # build tools (flatc) are the build machine's
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)
# ctest (and gtest_discover_tests) run the test programs through qemu-user.
# FCB_QEMU_CPU picks the emulated CPU model (default: max, which has every
# feature, so every AArch64 target runs).
if(NOT DEFINED FCB_QEMU_CPU)
  set(FCB_QEMU_CPU max)
endif()
set(CMAKE_CROSSCOMPILING_EMULATOR qemu-aarch64 -L /usr/aarch64-linux-gnu -cpu ${FCB_QEMU_CPU})
