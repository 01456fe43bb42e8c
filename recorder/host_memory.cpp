// The readable host memory of the process, read from /proc/self/maps (host_memory.h).
#include "recorder/host_memory.h"

#include <fstream>
#include <sstream>
#include <string>

namespace gpurr::recorder {

std::vector<trace::HostRegion> readableHostRegions(std::istream& maps) {
  std::vector<trace::HostRegion> regions;
  std::string line;
  while (std::getline(maps, line)) {
    std::istringstream in(line);
    uint64_t start = 0, end = 0;
    char dash = 0;
    std::string perms;
    if (!(in >> std::hex >> start >> dash >> end >> perms) || dash != '-' || start >= end || perms.empty() ||
        perms[0] != 'r') {
      continue;
    }
    if (!regions.empty() && regions.back().end == start) {
      regions.back().end = end;
    } else {
      regions.push_back({start, end});
    }
  }
  return regions;
}

std::vector<trace::HostRegion> readableHostRegions() {
  std::ifstream maps("/proc/self/maps");
  if (!maps) return {};
  return readableHostRegions(maps);
}

}  // namespace gpurr::recorder
