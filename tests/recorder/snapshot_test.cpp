// The snapshot memory bound and the choice of blob encoding.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <random>
#include <thread>
#include <unistd.h>

#include "recorder/snapshot.h"

using namespace gpurr;
using namespace gpurr::recorder;

TEST_CASE("the snapshot budget waits only for queued bytes", "[recorder][snapshot]") {
  SnapshotBudget budget(1000);
  SnapshotBudget::Lease a = budget.acquire(600);
  // Nothing queued: a launch's own ranges never wait for each other, even
  // past the limit (nothing else could free them).
  SnapshotBudget::Lease b = budget.acquire(600);
  CHECK(budget.inUse() == 1200);
  CHECK(budget.waits() == 0);
  a.markQueued();
  b.markQueued();
  std::atomic<bool> got{false};
  std::thread t([&] {
    SnapshotBudget::Lease c = budget.acquire(300);
    got = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  CHECK_FALSE(got.load());  // 1200 queued + 300 > 1000
  a.release();  // 600 queued + 300 fits
  t.join();
  b.release();
  CHECK(got.load());
  CHECK(budget.waits() == 1);
  CHECK(budget.inUse() == 0);
  CHECK(budget.peak() == 1200);
}

TEST_CASE("the snapshot budget waits a bounded time, then passes its limit", "[recorder][snapshot]") {
  // The queued copy may only complete once the program goes on.
  SnapshotBudget budget(1000, std::chrono::milliseconds(50));
  SnapshotBudget::Lease a = budget.acquire(900);
  a.markQueued();
  const auto start = std::chrono::steady_clock::now();
  SnapshotBudget::Lease b = budget.acquire(300);
  CHECK(std::chrono::steady_clock::now() - start >= std::chrono::milliseconds(50));
  CHECK(budget.waits() == 1);
  CHECK(budget.overruns() == 1);
  CHECK(budget.inUse() == 1200);
}

TEST_CASE("byte planes are chosen for float data, raw for bytes without structure", "[recorder][snapshot]") {
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> floats(256 * 1024);
  for (float& f : floats) f = normal(rng);
  std::vector<uint8_t> fbytes(floats.size() * 4);
  std::memcpy(fbytes.data(), floats.data(), fbytes.size());
  CHECK(chooseSnapshotEncoding(fbytes) == trace::BlobEncoding::kBytePlanes4);

  std::vector<uint8_t> noise(1 << 20);
  for (auto& b : noise) b = static_cast<uint8_t>(rng());
  CHECK(chooseSnapshotEncoding(noise) == trace::BlobEncoding::kRaw);
  std::vector<uint8_t> text(100000);
  for (size_t i = 0; i < text.size(); ++i) text[i] = "the quick brown fox "[i % 20];
  CHECK(chooseSnapshotEncoding(text) == trace::BlobEncoding::kRaw);
  std::vector<uint8_t> odd(1001, 7);
  CHECK(chooseSnapshotEncoding(odd) == trace::BlobEncoding::kRaw);

  // Stored either way, it reads back byte-exact.
  const auto dir = std::filesystem::temp_directory_path() / ("gpurr-snapshot-" + std::to_string(getpid()));
  std::filesystem::remove_all(dir);
  {
    trace::TraceWriter w(dir, trace::Header{});
    const trace::BlobRef f = storeSnapshot(w, fbytes);
    const trace::BlobRef n = storeSnapshot(w, noise);
    CHECK(f.encoding == trace::BlobEncoding::kBytePlanes4);
    CHECK(n.encoding == trace::BlobEncoding::kRaw);
    w.close();
    trace::TraceReader r(dir);
    CHECK(r.readBlob(f) == fbytes);
    CHECK(r.readBlob(n) == noise);
  }
  std::filesystem::remove_all(dir);
}
