// FrameBuffer (frame_buffer.h): the pool of touched frame buffers, bounded
// so that what it keeps is a few scanners' worth.
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

}  // namespace gpurr::trace
