// FrameBuffer (frame_buffer.h): the pool of touched frame buffers, bounded
// so that what it keeps is a few scanners' worth; RecentBlocks.
#include "trace_format/frame_buffer.h"

#include <mutex>
#include <utility>
#include <vector>

namespace gpurr::trace {
namespace {

constexpr size_t kPoolBytes = size_t{128} << 20;

struct Pool {
  std::mutex mu;
  std::vector<std::pair<std::unique_ptr<capnp::word[]>, size_t>> free;
  size_t bytes = 0;
};

Pool& pool() {
  static Pool* p = new Pool;  // never destroyed: buffers may come back while statics go
  return *p;
}

}  // namespace

FrameBuffer::~FrameBuffer() {
  if (!data_) return;
  Pool& p = pool();
  std::lock_guard lock(p.mu);
  if (p.bytes + size_ * sizeof(capnp::word) > kPoolBytes) return;  // freed
  p.bytes += size_ * sizeof(capnp::word);
  p.free.emplace_back(std::move(data_), size_);
}

void FrameBuffer::reserve(size_t words) {
  if (size_ >= words) return;
  {
    Pool& p = pool();
    std::lock_guard lock(p.mu);
    for (size_t i = 0; i < p.free.size(); ++i) {
      if (p.free[i].second < words) continue;
      // The one held goes back in the found one's place.
      std::swap(data_, p.free[i].first);
      std::swap(size_, p.free[i].second);
      if (!p.free[i].first) {
        p.bytes -= size_ * sizeof(capnp::word);
        p.free[i] = std::move(p.free.back());
        p.free.pop_back();
      } else {
        p.bytes += p.free[i].second * sizeof(capnp::word);
        p.bytes -= size_ * sizeof(capnp::word);
      }
      return;
    }
  }
  data_.reset(new capnp::word[words]);  // default-initialised: not zeroed
  size_ = words;
}

void RecentBlocks::setBudget(uint64_t bytes) {
  std::lock_guard lock(mu_);
  budget_ = bytes;
  while (bytes_ > budget_) {
    bytes_ -= blocks_.begin()->second.second;
    blocks_.erase(blocks_.begin());
  }
}

std::shared_ptr<const FrameBuffer> RecentBlocks::find(size_t index) const {
  std::lock_guard lock(mu_);
  const auto it = blocks_.find(index);
  return it == blocks_.end() ? nullptr : it->second.first;
}

void RecentBlocks::offer(size_t index, uint64_t bytes, FrameBuffer& frames) {
  std::lock_guard lock(mu_);
  if (bytes > budget_ || blocks_.count(index) != 0) return;
  while (bytes_ + bytes > budget_) {
    if (blocks_.begin()->first > index) return;  // those held are later in the trace
    bytes_ -= blocks_.begin()->second.second;
    blocks_.erase(blocks_.begin());
  }
  auto kept = std::make_shared<FrameBuffer>();
  kept->swap(frames);
  blocks_.emplace(index, std::pair{std::move(kept), bytes});
  bytes_ += bytes;
}

}  // namespace gpurr::trace
