// The recorded process's readable host memory, from /proc/self/maps: the
// trace keeps it (the index's hostRegions) so that the diff can tell host
// addresses left in kernel parameters (a heap or stack pointer in a struct
// passed by value) from values that mean something.
#pragma once
#include <istream>
#include <vector>

#include "trace_format/events.h"

namespace gpurr::recorder {

// The readable mappings of a maps listing (proc(5): "start-end perms ..."),
// adjacent ones merged, sorted. Mappings without read permission (the CUDA
// driver's reservations of device address space among them) are left out;
// malformed lines are skipped.
std::vector<trace::HostRegion> readableHostRegions(std::istream& maps);

// The same for this process; empty when /proc/self/maps cannot be read.
std::vector<trace::HostRegion> readableHostRegions();

}  // namespace gpurr::recorder
