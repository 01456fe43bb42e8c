// FrameBuffer: memory for a block's decompressed frames, taken from a
// process-wide pool of buffers earlier blocks already touched. A block's
// frames are a megabyte by default; a fresh buffer costs a page fault per
// page (and std::vector's zeroing of every byte), and every scanner of
// every trace of a job's diff would start afresh. RecentBlocks: a trace's
// last blocks' frames, kept for a later scan of the same trace.
#pragma once

#include <capnp/common.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>

namespace gpurr::trace {

class FrameBuffer {
 public:
  FrameBuffer() = default;
  FrameBuffer(FrameBuffer&& other) noexcept { swap(other); }
  FrameBuffer& operator=(FrameBuffer&& other) noexcept {
    swap(other);
    return *this;
  }
  ~FrameBuffer();  // back to the pool

  // At least `words` words; what they hold is undefined.
  void reserve(size_t words);
  capnp::word* data() const { return data_.get(); }
  size_t size() const { return size_; }
  void swap(FrameBuffer& other) noexcept {
    data_.swap(other.data_);
    std::swap(size_, other.size_);
  }

 private:
  std::unique_ptr<capnp::word[]> data_;
  size_t size_ = 0;
};

// The decompressed frames of one trace's blocks of the highest indices read
// so far, up to a budget of bytes (0, the default: none kept), for a later
// scan of the same trace not to decompress them again: the diff reads a
// trace whole, then again from its first divergence on. Thread-safe.
class RecentBlocks {
 public:
  // Blocks beyond the new budget are given back.
  void setBudget(uint64_t bytes);
  // Block `index`'s frames, or null.
  std::shared_ptr<const FrameBuffer> find(size_t index) const;
  // Block `index`'s frames, `bytes` of them, complete: taken (`frames` left
  // empty) when the budget has room, after giving back blocks of lower
  // indices, or left as they are.
  void offer(size_t index, uint64_t bytes, FrameBuffer& frames);

 private:
  mutable std::mutex mu_;
  uint64_t budget_ = 0, bytes_ = 0;
  std::map<size_t, std::pair<std::shared_ptr<const FrameBuffer>, uint64_t>> blocks_;  // frames, bytes
};

}  // namespace gpurr::trace
