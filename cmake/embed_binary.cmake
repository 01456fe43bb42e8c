# Turns a binary file into a C++ source defining
# `std::span<const unsigned char> FUNCTION()` over its bytes (see
# EmbedCudaImage.cmake). Run as:
#   cmake -DINPUT=... -DOUTPUT=... -DFUNCTION=... [-DHEADER=...] -P embed_binary.cmake
file(READ "${INPUT}" hex HEX)
string(LENGTH "${hex}" hexLength)
math(EXPR byteCount "${hexLength} / 2")
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
string(REGEX REPLACE "(0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,)" "\\1\n" bytes "${bytes}")
set(include "")
if(HEADER)
  set(include "#include \"${HEADER}\"\n")
endif()
file(WRITE "${OUTPUT}.tmp"
"// Generated from ${INPUT} by cmake/embed_binary.cmake; do not edit.\n"
"#include <span>\n"
"${include}"
"namespace {\n"
"// 8-byte alignment: cuModuleLoadData reads the fatbin header in place.\n"
"alignas(8) const unsigned char kImage[${byteCount}] = {\n${bytes}};\n"
"}  // namespace\n"
"std::span<const unsigned char> ${FUNCTION}() { return {kImage, sizeof(kImage)}; }\n")
file(RENAME "${OUTPUT}.tmp" "${OUTPUT}")
