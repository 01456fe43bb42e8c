// The version of PyTorch loaded in the recorded process, for the trace
// header: read from the torch package's version.py next to the loaded
// libc10.so (PyTorch exports no C function that returns it).
#pragma once

#include <optional>
#include <string>

namespace gpurr::recorder {

// The `__version__ = '2.5.1+cu124'` value of a torch/version.py text.
std::optional<std::string> torchVersionFromVersionPy(const std::string& text);

// The loaded PyTorch's version; nullopt when libc10.so is not loaded or its
// package has no readable version.py.
std::optional<std::string> loadedTorchVersion();

}  // namespace gpurr::recorder
