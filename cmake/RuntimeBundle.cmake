# A build folder that runs on another machine once copied there: the GPU
# machine has the CUDA toolkit, cuDNN and glibc, but not the other shared
# libraries gpurr links (Cap'n Proto, kj, zstd, xxhash, fmt).
#
# - Binaries find libraries in lib/ relative to where they are ($ORIGIN/../lib
#   for bin/, $ORIGIN/../../../lib for tests/gpu/programs/), libraries next to
#   themselves ($ORIGIN), before the system's.
# - Shared libraries (the recorder) are built into ${PROJECT_BINARY_DIR}/lib,
#   where `gpurr record` looks for libgpurr_recorder.so.
# - The `gpurr_runtime` target (part of `all`) copies into that lib/ folder
#   every shared library the binaries in bin/ and lib/ need that is neither
#   CUDA's nor the C/C++ runtime's, found the way ldd finds them.
#
# Included from the top-level CMakeLists.txt before any target is made.

set(CMAKE_BUILD_RPATH "\$ORIGIN/../lib;\$ORIGIN")
set(CMAKE_INSTALL_RPATH "\$ORIGIN/../lib;\$ORIGIN")
if(NOT CMAKE_LIBRARY_OUTPUT_DIRECTORY)
  set(CMAKE_LIBRARY_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR}/lib)
endif()
# DT_RPATH rather than DT_RUNPATH: a RUNPATH only serves the object's own
# dependencies, so libcapnp would not find libkj in lib/; an RPATH serves the
# whole chain, including libraries the CUDA driver dlopens for us.
add_link_options("$<$<OR:$<STREQUAL:$<TARGET_PROPERTY:TYPE>,EXECUTABLE>,$<STREQUAL:$<TARGET_PROPERTY:TYPE>,SHARED_LIBRARY>,$<STREQUAL:$<TARGET_PROPERTY:TYPE>,MODULE_LIBRARY>>:LINKER:--disable-new-dtags>")

# Every target made in `dir` and below.
function(_gpurr_targets_under dir out)
  get_property(targets DIRECTORY ${dir} PROPERTY BUILDSYSTEM_TARGETS)
  get_property(subdirs DIRECTORY ${dir} PROPERTY SUBDIRECTORIES)
  foreach(sub IN LISTS subdirs)
    _gpurr_targets_under(${sub} more)
    list(APPEND targets ${more})
  endforeach()
  set(${out} ${targets} PARENT_SCOPE)
endfunction()

# Runs once the whole project is configured, when every target exists.
function(_gpurr_add_runtime_bundle)
  _gpurr_targets_under(${PROJECT_SOURCE_DIR} all_targets)
  set(files)
  set(deps)
  foreach(t IN LISTS all_targets)
    get_target_property(type ${t} TYPE)
    get_target_property(out_dir ${t} RUNTIME_OUTPUT_DIRECTORY)
    # Test programs and benchmarks live deeper than bin/: point their RPATH at
    # lib/ from where they are, so that they too run from a copied build
    # folder or a GPU bundle (scripts/gpu_bundle.sh keeps the layout).
    if(type STREQUAL "EXECUTABLE")
      if(NOT out_dir)
        get_target_property(out_dir ${t} BINARY_DIR)
      endif()
      file(RELATIVE_PATH to_lib ${out_dir} ${PROJECT_BINARY_DIR}/lib)
      set_target_properties(${t} PROPERTIES BUILD_RPATH "\$ORIGIN/${to_lib};\$ORIGIN")
    endif()
    if((type STREQUAL "EXECUTABLE" AND out_dir STREQUAL "${PROJECT_BINARY_DIR}/bin")
       OR type STREQUAL "SHARED_LIBRARY" OR type STREQUAL "MODULE_LIBRARY")
      list(APPEND files "$<TARGET_FILE:${t}>")
      list(APPEND deps ${t})
    endif()
  endforeach()
  if(NOT deps)
    return()
  endif()
  string(REPLACE ";" "|" files_arg "${files}")
  add_custom_target(gpurr_runtime ALL
    COMMAND ${CMAKE_COMMAND} "-DFILES=${files_arg}" -DDESTINATION=${PROJECT_BINARY_DIR}/lib
            -P ${PROJECT_SOURCE_DIR}/cmake/copy_runtime_libs.cmake
    DEPENDS ${deps}
    COMMENT "Copying the shared libraries gpurr needs beyond CUDA and glibc into lib/"
    VERBATIM)
endfunction()
cmake_language(DEFER DIRECTORY ${PROJECT_SOURCE_DIR} CALL _gpurr_add_runtime_bundle)

# `cmake --install BUILD --prefix P`: P/bin/gpurr, P/lib/ (the recorder and
# the libraries lib/ carries), P/share/gpurr/; binaries find lib/ through
# their $ORIGIN-relative RPATH, so P can be moved anywhere. gpurr's own
# libraries are installed by their targets (stripped with --strip); with
# GPURR_STATIC_DEPS lib/ carries nothing else.
install(DIRECTORY ${PROJECT_BINARY_DIR}/lib/ DESTINATION lib
        FILES_MATCHING PATTERN "lib*.so*" PATTERN "libgpurr_*" EXCLUDE)
