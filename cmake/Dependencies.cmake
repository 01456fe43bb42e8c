# The libraries gpurr links besides CUDA and the C/C++ runtime, as targets
# that every CMakeLists.txt uses: gpurr::capnp (with kj), gpurr::zstd,
# gpurr::xxhash and gpurr::fmt.
#
# GPURR_STATIC_DEPS=ON (the wheel) links them statically, so that the
# binaries need nothing beyond glibc, libstdc++ and libgcc; the recorder hides
# their symbols (--exclude-libs), so they never clash with copies in the
# recorded program. OFF links the shared libraries. Statically:
# - Cap'n Proto, zstd and xxhash from the archives Debian's -dev packages
#   ship. Their objects are position-independent executable code, which a
#   shared library (the recorder) can take once their symbols are hidden.
# - kj compiled here from Debian's source of the same version
#   (GPURR_KJ_SOURCE; scripts/setup.sh fetches it): Debian's libkj.a uses
#   the local-exec TLS model, which no shared library can.
# - fmt header-only: Debian ships no libfmt.a.
#
# Included from the top-level CMakeLists.txt after find_package().

option(GPURR_STATIC_DEPS "Link Cap'n Proto, kj, zstd, xxhash and fmt statically" OFF)
set(GPURR_KJ_SOURCE /opt/gpurr-deps/capnproto-c++-${CapnProto_VERSION} CACHE PATH
    "Cap'n Proto's C++ source of the installed version, for kj with GPURR_STATIC_DEPS")

function(_gpurr_static_archive target name)
  find_library(_gpurr_${name}_a NAMES lib${name}.a REQUIRED NO_CACHE)
  add_library(${target} STATIC IMPORTED GLOBAL)
  set_target_properties(${target} PROPERTIES IMPORTED_LOCATION ${_gpurr_${name}_a})
endfunction()

add_library(gpurr::capnp INTERFACE IMPORTED GLOBAL)
add_library(gpurr::zstd INTERFACE IMPORTED GLOBAL)
add_library(gpurr::xxhash INTERFACE IMPORTED GLOBAL)
add_library(gpurr::fmt INTERFACE IMPORTED GLOBAL)
# kj as a static library of position-independent code, from its source.
function(_gpurr_kj_from_source)
  set(src ${GPURR_KJ_SOURCE}/src/kj)
  if(NOT EXISTS ${src}/exception.c++)
    message(FATAL_ERROR "GPURR_STATIC_DEPS: no kj source at ${GPURR_KJ_SOURCE} (scripts/setup.sh fetches Debian's "
                        "capnproto ${CapnProto_VERSION} source there; or set GPURR_KJ_SOURCE)")
  endif()
  file(STRINGS ${GPURR_KJ_SOURCE}/CMakeLists.txt _v REGEX "^set\\(VERSION ")
  if(NOT _v STREQUAL "set(VERSION ${CapnProto_VERSION})")
    message(FATAL_ERROR "GPURR_STATIC_DEPS: ${GPURR_KJ_SOURCE} is not Cap'n Proto ${CapnProto_VERSION} (${_v})")
  endif()
  # kj's own list (src/kj/CMakeLists.txt), lite and heavy parts.
  set(files array list common debug exception io memory mutex string source-location hash table thread main
            arena units encoding refcount string-tree time filesystem filesystem-disk-unix parse/char)
  list(TRANSFORM files PREPEND ${src}/)
  list(TRANSFORM files APPEND .c++)
  add_library(gpurr_kj_static STATIC ${files})
  set_source_files_properties(${files} PROPERTIES LANGUAGE CXX)
  target_include_directories(gpurr_kj_static SYSTEM PUBLIC ${GPURR_KJ_SOURCE}/src)
  target_compile_options(gpurr_kj_static PRIVATE -w)
  set_target_properties(gpurr_kj_static PROPERTIES POSITION_INDEPENDENT_CODE ON CXX_VISIBILITY_PRESET hidden)
  target_link_libraries(gpurr_kj_static PUBLIC Threads::Threads)
endfunction()

if(GPURR_STATIC_DEPS)
  _gpurr_kj_from_source()
  _gpurr_static_archive(gpurr_capnp_static capnp)
  _gpurr_static_archive(gpurr_zstd_static zstd)
  _gpurr_static_archive(gpurr_xxhash_static xxhash)
  get_target_property(_capnp_includes CapnProto::capnp INTERFACE_INCLUDE_DIRECTORIES)
  target_include_directories(gpurr::capnp INTERFACE ${_capnp_includes})
  target_link_libraries(gpurr::capnp INTERFACE gpurr_capnp_static gpurr_kj_static Threads::Threads)
  target_link_libraries(gpurr::zstd INTERFACE gpurr_zstd_static)
  target_include_directories(gpurr::xxhash INTERFACE ${XXHASH_INCLUDE_DIRS})
  target_link_libraries(gpurr::xxhash INTERFACE gpurr_xxhash_static)
  target_link_libraries(gpurr::fmt INTERFACE fmt::fmt-header-only)
else()
  target_link_libraries(gpurr::capnp INTERFACE CapnProto::capnp)
  target_link_libraries(gpurr::zstd INTERFACE zstd::libzstd_shared)
  target_link_libraries(gpurr::xxhash INTERFACE PkgConfig::XXHASH)
  target_link_libraries(gpurr::fmt INTERFACE fmt::fmt)
endif()
