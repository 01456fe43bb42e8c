// FrameBuffer: memory for a block's decompressed frames, taken from a
// process-wide pool of buffers earlier blocks already touched. A block's
// frames are a megabyte by default; a fresh buffer costs a page fault per
// page (and std::vector's zeroing of every byte), and every scanner of
// every trace of a job's diff would start afresh.
#pragma once

#include <capnp/common.h>

#include <cstddef>
#include <memory>

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

}  // namespace gpurr::trace
