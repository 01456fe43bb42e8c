# cmake -DFILES="a|b|..." -DDESTINATION=dir -P copy_runtime_libs.cmake
#
# Copies the shared libraries that the binaries FILES load (directly or
# through other libraries) into DESTINATION, under the names the loader asks
# for (libzstd.so.1, not libzstd.so.1.5.4), except the CUDA toolkit's, the
# driver's and the C/C++ runtime's, which the target machine has.
string(REPLACE "|" ";" FILES "${FILES}")
set(executables)
set(libraries)
foreach(f IN LISTS FILES)
  if(f MATCHES "\\.so(\\.|$)")
    list(APPEND libraries ${f})
  else()
    list(APPEND executables ${f})
  endif()
endforeach()

set(system_libraries
  "^ld-linux" "^libc\\.so" "^libm\\.so" "^libmvec\\.so" "^libpthread\\.so" "^libdl\\.so"
  "^librt\\.so" "^libresolv\\.so" "^libutil\\.so" "^libstdc\\+\\+\\.so" "^libgcc_s\\.so"
  "^libatomic\\.so" "^linux-vdso")
set(cuda_libraries
  "^libcuda\\.so" "^libcudart\\.so" "^libcupti\\.so" "^libcublas(Lt)?\\.so" "^libcudnn"
  "^libcurand\\.so" "^libcufft" "^libcusparse" "^libcusolver" "^libnvrtc" "^libnvJitLink"
  "^libnvidia-" "^libnccl" "^libnvperf" "^libnvToolsExt" "^libcheckpoint"
  # PyTorch's, for the libraries loaded into a process that has imported torch
  "^libc10" "^libtorch")

file(GET_RUNTIME_DEPENDENCIES
  EXECUTABLES ${executables}
  LIBRARIES ${libraries}
  RESOLVED_DEPENDENCIES_VAR resolved
  UNRESOLVED_DEPENDENCIES_VAR unresolved
  CONFLICTING_DEPENDENCIES_PREFIX conflicting
  PRE_EXCLUDE_REGEXES ${system_libraries} ${cuda_libraries}
  POST_EXCLUDE_FILES_STRICT ${FILES})

if(unresolved)
  message(FATAL_ERROR "cannot find shared libraries ${unresolved} needed by ${FILES}")
endif()
file(MAKE_DIRECTORY ${DESTINATION})
foreach(lib IN LISTS resolved)
  get_filename_component(name ${lib} NAME)
  get_filename_component(dir ${lib} DIRECTORY)
  if(dir STREQUAL DESTINATION)
    continue()  # already bundled; the binaries found it there
  endif()
  # The real file, under the name the loader looks for.
  get_filename_component(real ${lib} REALPATH)
  file(COPY_FILE ${real} ${DESTINATION}/${name} ONLY_IF_DIFFERENT)
endforeach()
