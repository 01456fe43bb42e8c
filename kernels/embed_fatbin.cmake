# Turns a binary file into a C++ source that defines
# gpurr::kernels::hashKernelFatbin(). Run as: cmake -DINPUT=... -DOUTPUT=... -P
file(READ "${INPUT}" hex HEX)
string(LENGTH "${hex}" hexLength)
math(EXPR byteCount "${hexLength} / 2")
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
string(REGEX REPLACE "(0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,)" "\\1\n" bytes "${bytes}")
file(WRITE "${OUTPUT}.tmp"
"// Generated from ${INPUT} by kernels/embed_fatbin.cmake; do not edit.\n"
"#include \"kernels/device_hasher.h\"\n"
"namespace gpurr::kernels {\n"
"namespace {\n"
"// 8-byte alignment: cuModuleLoadData reads the fatbin header in place.\n"
"alignas(8) const unsigned char kFatbin[${byteCount}] = {\n${bytes}};\n"
"}  // namespace\n"
"std::span<const unsigned char> hashKernelFatbin() { return {kFatbin, sizeof(kFatbin)}; }\n"
"}  // namespace gpurr::kernels\n")
file(RENAME "${OUTPUT}.tmp" "${OUTPUT}")
