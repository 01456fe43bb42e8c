# Turns a binary file into a C++ source defining
# `std::span<const unsigned char> FUNCTION()` over its bytes.
# Run as: cmake -DINPUT=... -DOUTPUT=... -DFUNCTION=... -P embed_image.cmake
file(READ "${INPUT}" hex HEX)
string(LENGTH "${hex}" hexLength)
math(EXPR byteCount "${hexLength} / 2")
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
string(REGEX REPLACE "(0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,)" "\\1\n" bytes "${bytes}")
file(WRITE "${OUTPUT}.tmp"
"// Generated from ${INPUT} by replayer/embed_image.cmake; do not edit.\n"
"#include <span>\n"
"namespace {\n"
"// 8-byte alignment: cuModuleLoadData reads the fatbin header in place.\n"
"alignas(8) const unsigned char kImage[${byteCount}] = {\n${bytes}};\n"
"}  // namespace\n"
"std::span<const unsigned char> ${FUNCTION}() { return {kImage, sizeof(kImage)}; }\n")
file(RENAME "${OUTPUT}.tmp" "${OUTPUT}")
