// PyTorch's caching allocator's blocks, as the framework layer reports them
// (framework_context.h, blockEvent): a launch's range that starts in a block
// ends with it.
#include <iterator>
#include <map>
#include <mutex>
#include <shared_mutex>
#include <vector>

#include "recorder/framework_context.h"
#include "recorder/write_history.h"

namespace gpurr::recorder::framework {
namespace {

// Never destroyed: PyTorch's caching allocator, which is not destroyed
// either, calls the block tracker until the process ends, after this
// library's statics would have been.
struct Blocks {
  std::shared_mutex mu;
  std::map<uint64_t, uint64_t> byBase;  // base -> size
  // Nodes of blocks freed, kept for the next blocks handed out: the
  // allocator frees and hands out a block for nearly every op.
  std::vector<std::map<uint64_t, uint64_t>::node_type> spare;
};
Blocks& tracked = *new Blocks;
std::shared_mutex& blocksMu = tracked.mu;
std::map<uint64_t, uint64_t>& blocks = tracked.byBase;
auto& spareBlocks = tracked.spare;

}  // namespace

void blockEvent(uint64_t address, uint64_t size, bool allocated) {
  std::unique_lock lock(blocksMu);
  constexpr size_t kSpare = 64;
  if (!allocated) {
    if (auto it = blocks.find(address); it != blocks.end()) {
      writeHistory().forget(address, address + it->second);
      if (spareBlocks.size() < kSpare) {
        spareBlocks.push_back(blocks.extract(it));
      } else {
        blocks.erase(it);
      }
    }
    return;
  }
  if (size == 0) return;
  writeHistory().forget(address, address + size);  // the previous owner's bytes
  // A block handed out again over stale ones (a free the layer missed).
  auto it = blocks.lower_bound(address);
  if (it != blocks.begin() && std::prev(it)->first + std::prev(it)->second > address) --it;
  while (it != blocks.end() && it->first < address + size) it = blocks.erase(it);
  if (spareBlocks.empty()) {
    blocks.emplace_hint(it, address, size);
    return;
  }
  auto node = std::move(spareBlocks.back());
  spareBlocks.pop_back();
  node.key() = address;
  node.mapped() = size;
  blocks.insert(it, std::move(node));
}

std::optional<std::pair<uint64_t, uint64_t>> blockAt(uint64_t address) { return BlockReader().at(address); }

std::optional<std::pair<uint64_t, uint64_t>> BlockReader::at(uint64_t address) {
  if (!lock_.owns_lock()) lock_ = std::shared_lock(blocksMu);
  auto it = blocks.upper_bound(address);
  if (it == blocks.begin()) return std::nullopt;
  --it;
  if (address - it->first >= it->second) return std::nullopt;
  return *it;
}

void forgetBlocksForTesting() {
  std::unique_lock lock(blocksMu);
  blocks.clear();
}

}  // namespace gpurr::recorder::framework
