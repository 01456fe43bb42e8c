// Whether this machine has a CUDA driver, asked as the CUDA runtime asks
// (libcuda.so.1 through the loader), without initialising it: `record`,
// `bisect` and `replay` say so up front instead of leaving the user with an
// empty result. `info`, `dump` and `diff` never need it.
#pragma once

#include <optional>
#include <string>

namespace gpurr::cli {

// nullopt when libcuda.so.1 loads; otherwise one line saying that there is
// no CUDA driver and why ("no CUDA driver on this machine (libcuda.so.1: ...)").
std::optional<std::string> missingCudaDriver();

}  // namespace gpurr::cli
