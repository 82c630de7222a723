# Dependencies of a cross-built runtime (see cmake/aarch64-linux-gnu.cmake).
#
# Everything the runtime needs besides the C++ library is header-only: Highway
# (kernels), FlatBuffers (the verifier and accessors of the metadata), xxHash
# (XXH_INLINE_ALL), nlohmann/json and CLI11. Debian installs the same headers
# for every architecture under /usr/include, but that folder also holds the
# build machine's C library headers, which the cross compiler must not see; so
# the build tree gets a folder with links to just those libraries' headers.
# GoogleTest is compiled from the sources Debian ships in /usr/src/googletest.
# flatc is the build machine's (flatbuffers-compiler), run at build time.
set(FCB_CROSS_HEADERS ${CMAKE_BINARY_DIR}/cross-headers)
file(MAKE_DIRECTORY ${FCB_CROSS_HEADERS})
foreach(h hwy flatbuffers nlohmann CLI xxhash.h)
  if(NOT EXISTS /usr/include/${h})
    message(FATAL_ERROR "cross build: /usr/include/${h} is missing (scripts/setup.sh installs the -dev packages)")
  endif()
  file(CREATE_LINK /usr/include/${h} ${FCB_CROSS_HEADERS}/${h} SYMBOLIC)
endforeach()

add_library(fcb_hwy_headers INTERFACE)
target_include_directories(fcb_hwy_headers SYSTEM INTERFACE ${FCB_CROSS_HEADERS})
add_library(flatbuffers::flatbuffers INTERFACE IMPORTED)
target_include_directories(flatbuffers::flatbuffers SYSTEM INTERFACE ${FCB_CROSS_HEADERS})
find_program(FCB_FLATC flatc REQUIRED)
add_executable(flatbuffers::flatc IMPORTED)
set_target_properties(flatbuffers::flatc PROPERTIES IMPORTED_LOCATION ${FCB_FLATC})
add_library(fcb_xxhash INTERFACE)
target_include_directories(fcb_xxhash SYSTEM INTERFACE ${FCB_CROSS_HEADERS})
target_compile_definitions(fcb_xxhash INTERFACE XXH_INLINE_ALL)
add_library(nlohmann_json::nlohmann_json INTERFACE IMPORTED)
target_include_directories(nlohmann_json::nlohmann_json SYSTEM INTERFACE ${FCB_CROSS_HEADERS})
add_library(CLI11::CLI11 INTERFACE IMPORTED)
target_include_directories(CLI11::CLI11 SYSTEM INTERFACE ${FCB_CROSS_HEADERS})

if(FCB_BUILD_TESTS)
  if(NOT EXISTS /usr/src/googletest/CMakeLists.txt)
    message(FATAL_ERROR "cross build: /usr/src/googletest is missing (apt install libgtest-dev)")
  endif()
  set(INSTALL_GTEST OFF CACHE BOOL "" FORCE)
  set(BUILD_GMOCK ON CACHE BOOL "" FORCE)
  add_subdirectory(/usr/src/googletest ${CMAKE_BINARY_DIR}/googletest EXCLUDE_FROM_ALL)
  # (its CMakeLists.txt defines the GTest::gtest, GTest::gtest_main targets)
endif()
