// Snapshot memory bound and storage (see snapshot.h).
#include "recorder/snapshot.h"

#include <zstd.h>

#include <algorithm>
#include <vector>

namespace gpurr::recorder {

SnapshotBudget::Lease& SnapshotBudget::Lease::operator=(Lease&& o) noexcept {
  if (this != &o) {
    release();
    budget_ = o.budget_, bytes_ = o.bytes_, queued_ = o.queued_;
    o.budget_ = nullptr;
  }
  return *this;
}

void SnapshotBudget::Lease::markQueued() {
  if (budget_ == nullptr || queued_) return;
  std::lock_guard lock(budget_->mu_);
  budget_->held_ -= bytes_;
  budget_->queued_ += bytes_;
  queued_ = true;
}

void SnapshotBudget::Lease::release() {
  if (budget_ == nullptr) return;
  {
    std::lock_guard lock(budget_->mu_);
    (queued_ ? budget_->queued_ : budget_->held_) -= bytes_;
  }
  budget_->freed_.notify_all();
  budget_ = nullptr;
}

SnapshotBudget::Lease SnapshotBudget::acquire(uint64_t bytes) {
  std::unique_lock lock(mu_);
  auto fits = [&] { return queued_ == 0 || held_ + queued_ + bytes <= limit_; };
  if (!fits()) {
    ++waits_;
    if (!freed_.wait_for(lock, waitLimit_, fits)) ++overruns_;
  }
  held_ += bytes;
  peak_ = std::max(peak_, held_ + queued_);
  Lease l;
  l.budget_ = this;
  l.bytes_ = bytes;
  return l;
}

uint64_t SnapshotBudget::inUse() const {
  std::lock_guard lock(mu_);
  return held_ + queued_;
}

uint64_t SnapshotBudget::peak() const {
  std::lock_guard lock(mu_);
  return peak_;
}

uint64_t SnapshotBudget::waits() const {
  std::lock_guard lock(mu_);
  return waits_;
}

uint64_t SnapshotBudget::overruns() const {
  std::lock_guard lock(mu_);
  return overruns_;
}

namespace {

size_t compressedSize(ZSTD_CCtx* cctx, std::span<const uint8_t> bytes, std::vector<uint8_t>& scratch) {
  scratch.resize(ZSTD_compressBound(bytes.size()));
  const size_t n = ZSTD_compressCCtx(cctx, scratch.data(), scratch.size(), bytes.data(), bytes.size(), 1);
  return ZSTD_isError(n) ? bytes.size() : n;
}

}  // namespace

trace::BlobEncoding chooseSnapshotEncoding(std::span<const uint8_t> bytes) {
  if (bytes.size() < 64 || bytes.size() % 2 != 0) return trace::BlobEncoding::kRaw;
  // Four pieces of 16 KiB spread over the buffer, aligned to elements.
  constexpr size_t kPiece = 16 * 1024;
  std::vector<uint8_t> sample;
  if (bytes.size() <= 4 * kPiece) {
    sample.assign(bytes.begin(), bytes.end());
  } else {
    for (int i = 0; i < 4; ++i) {
      size_t at = (bytes.size() - kPiece) / 3 * i;
      at -= at % 4;
      sample.insert(sample.end(), bytes.begin() + at, bytes.begin() + at + kPiece);
    }
  }
  ZSTD_CCtx* cctx = ZSTD_createCCtx();
  if (cctx == nullptr) return trace::BlobEncoding::kRaw;
  std::vector<uint8_t> scratch;
  const size_t raw = compressedSize(cctx, sample, scratch);
  trace::BlobEncoding best = trace::BlobEncoding::kRaw;
  // Byte planes must save 3% to be worth the transform of every byte.
  size_t bestSize = raw - raw / 32;
  const trace::BlobEncoding candidates[] = {trace::BlobEncoding::kBytePlanes4, trace::BlobEncoding::kBytePlanes2};
  for (trace::BlobEncoding e : candidates) {
    const size_t element = e == trace::BlobEncoding::kBytePlanes4 ? 4 : 2;
    if (bytes.size() % element != 0 || sample.size() % element != 0) continue;
    // In a large blob each plane fills zstd blocks of its own (with their
    // own literal statistics); compress the sample's planes apart to match.
    const std::vector<uint8_t> planes = trace::encodeBlob(sample, e);
    const size_t planeBytes = planes.size() / element;
    size_t n = 0;
    for (size_t p = 0; p < element; ++p)
      n += compressedSize(cctx, std::span<const uint8_t>(planes).subspan(p * planeBytes, planeBytes), scratch);
    if (n < bestSize) best = e, bestSize = n;
  }
  ZSTD_freeCCtx(cctx);
  return best;
}

trace::BlobRef storeSnapshot(trace::TraceWriter& writer, std::span<const uint8_t> bytes) {
  return writer.putBlob(bytes, chooseSnapshotEncoding(bytes));
}

}  // namespace gpurr::recorder
