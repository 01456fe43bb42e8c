// Formatting shared by the commands' human-readable output.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "common/text.h"
#include "trace_format/events.h"

namespace gpurr::report {

using text::humanBytes;
using text::withCommas;

// Demangled C++ name, or the name itself when it is not mangled. Cached.
const std::string& demangle(const std::string& mangled);

// `i`, or the nearest position before it where a UTF-8 character starts: a
// name cut there stays valid UTF-8.
size_t characterStart(std::string_view s, size_t i);

// "(512,1,1)".
std::string dim(const trace::Dim3& d);

// "alloc#3+0x40" or "0x7f00..." for a range outside known allocations.
std::string where(const trace::DeviceRange& r);

// Digest as 16 hex digits.
std::string hex16(uint64_t digest);

// Version numbers as the libraries encode them: CUDA 13000 -> "13.0";
// cuDNN and cuBLAS 91300 -> "9.13.0" (0 -> "not loaded").
std::string cudaVersion(uint32_t v);
std::string libraryVersion(uint32_t v);

// One line per event, as `gpurr dump` prints it (no trailing newline).
std::string describe(const trace::Event& event);

// An annotation in a few words: "algo cudnn engine=12", "rng philox seed=..".
std::string describe(const trace::Annotation& annotation);

}  // namespace gpurr::report
