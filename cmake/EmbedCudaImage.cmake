# gpurr_embed_cuda_image(OUT_SOURCE FUNCTION CU_FILE [HEADER header] [DEPENDS files...])
#
# Compiles CU_FILE to a fatbin for CMAKE_CUDA_ARCHITECTURES and generates
# OUT_SOURCE, a C++ file defining `std::span<const unsigned char> FUNCTION()`
# over the fatbin's bytes, so that the image can be loaded with
# cuModuleLoadData in any context without a file on disk. A FUNCTION inside a
# namespace needs the HEADER that declares it.
function(gpurr_embed_cuda_image out_source function cu_file)
  cmake_parse_arguments(ARG "" "HEADER" "DEPENDS" ${ARGN})
  # "90-real" -> SASS only, "90-virtual" -> PTX only, "90" -> both.
  set(gencode)
  foreach(arch IN LISTS CMAKE_CUDA_ARCHITECTURES)
    string(REGEX MATCH "^[0-9]+[a-z]?" num "${arch}")
    if(arch MATCHES "-real$")
      list(APPEND gencode -gencode arch=compute_${num},code=sm_${num})
    elseif(arch MATCHES "-virtual$")
      list(APPEND gencode -gencode arch=compute_${num},code=compute_${num})
    else()
      list(APPEND gencode -gencode arch=compute_${num},code=[sm_${num},compute_${num}])
    endif()
  endforeach()
  get_filename_component(cu_path ${cu_file} ABSOLUTE)
  get_filename_component(stem ${cu_file} NAME_WE)
  set(fatbin ${CMAKE_CURRENT_BINARY_DIR}/${stem}.fatbin)
  set(source ${CMAKE_CURRENT_BINARY_DIR}/${stem}_image.cpp)
  add_custom_command(
    OUTPUT ${fatbin}
    COMMAND ${CMAKE_CUDA_COMPILER} -fatbin -O3 -std=c++20 ${gencode} -I${PROJECT_SOURCE_DIR}
            -o ${fatbin} ${cu_path}
    DEPENDS ${cu_path} ${ARG_DEPENDS}
    COMMENT "Compiling ${stem} to a fatbin"
    VERBATIM)
  add_custom_command(
    OUTPUT ${source}
    COMMAND ${CMAKE_COMMAND} -DINPUT=${fatbin} -DOUTPUT=${source} -DFUNCTION=${function}
            -DHEADER=${ARG_HEADER} -P ${PROJECT_SOURCE_DIR}/cmake/embed_binary.cmake
    DEPENDS ${fatbin} ${PROJECT_SOURCE_DIR}/cmake/embed_binary.cmake
    COMMENT "Embedding the ${stem} fatbin"
    VERBATIM)
  set(${out_source} ${source} PARENT_SCOPE)
endfunction()
