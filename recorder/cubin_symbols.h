// Kernel names and the SM architecture of a cubin, read from its ELF headers.
// The recorder uses them to tell which loaded module a launched function
// belongs to when the driver gives no module handle. Validates every offset:
// images come from arbitrary programs.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace gpurr::recorder {

struct CubinInfo {
  bool isElf = false;
  uint32_t arch = 0;                    // e.g. 90; 0 = unknown
  std::vector<std::string> functions;   // names of FUNC symbols (mangled)
};

CubinInfo readCubin(std::span<const uint8_t> image);

}  // namespace gpurr::recorder
