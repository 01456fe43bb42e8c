// The background trace writer: order, waiting for digests off the program's
// threads, periodic flushing (a crash keeps what was flushed), and failures
// that cost a warning, not the program.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <thread>

#include "recorder/trace_sink.h"

using namespace gpurr;
using namespace gpurr::recorder;
using namespace std::chrono_literals;

namespace {

// Digests that take `delay` to arrive, or never do.
class SlowHashes : public PendingHashes {
 public:
  SlowHashes(uint64_t digest, std::chrono::milliseconds delay, bool fail = false)
      : digest_(digest), delay_(delay), fail_(fail) {}
  bool wait(std::vector<kernels::HashResult>& out, std::string& error) override {
    std::this_thread::sleep_for(delay_);
    if (fail_) {
      error = "device lost";
      return false;
    }
    out = {{digest_, {}}};
    return true;
  }

 private:
  uint64_t digest_;
  std::chrono::milliseconds delay_;
  bool fail_;
};

std::filesystem::path freshTrace(const char* name) {
  auto dir = std::filesystem::temp_directory_path() / (std::string("gpurr-sink-") + name + "-" + std::to_string(getpid()));
  std::filesystem::remove_all(dir);
  return dir;
}

SinkEntry memsetEntry(uint64_t address, std::unique_ptr<PendingHashes> pending) {
  SinkEntry e;
  trace::Memset m;
  m.dst = {address, 16, 1, 0};
  e.event.payload = m;
  e.after.pending = std::move(pending);
  e.after.ranges = {m.dst};
  return e;
}

}  // namespace

TEST_CASE("the program never waits for digests, events keep their order", "[recorder][sink]") {
  const auto dir = freshTrace("order");
  std::vector<std::string> warnings;
  {
    TraceSink sink(std::make_unique<trace::TraceWriter>(dir, trace::Header{}),
                   [&](const std::string& w) { warnings.push_back(w); });
    const auto start = std::chrono::steady_clock::now();
    for (uint64_t i = 0; i < 5; ++i) sink.push(memsetEntry(0x1000 + i, std::make_unique<SlowHashes>(100 + i, 200ms)));
    CHECK(std::chrono::steady_clock::now() - start < 200ms);  // push() did not wait
    CHECK(sink.pushed() == 5);
    sink.close();
  }
  trace::TraceReader reader(dir);
  const auto events = reader.readAll();
  REQUIRE(events.size() == 5);
  for (uint64_t i = 0; i < 5; ++i) {
    CHECK(events[i].seq == i);
    const auto& m = std::get<trace::Memset>(events[i].payload);
    CHECK(m.dst.address == 0x1000 + i);
    CHECK(m.digest == 100 + i);
  }
  CHECK(warnings.empty());
  std::filesystem::remove_all(dir);
}

TEST_CASE("blocks are flushed periodically, so an unclosed trace is readable", "[recorder][sink]") {
  const auto dir = freshTrace("flush");
  TraceSink sink(std::make_unique<trace::TraceWriter>(dir, trace::Header{}), [](const std::string&) {}, SinkOptions{.flushIntervalMs = 50});
  for (uint64_t i = 0; i < 20; ++i) sink.push(memsetEntry(0x2000 + i, nullptr));
  sink.drain();
  std::this_thread::sleep_for(300ms);  // a few flush intervals, then "crash"
  trace::TraceReader reader(dir);
  CHECK(reader.damage().unclosed);
  CHECK(reader.readAll().size() == 20);
  sink.close();
  std::filesystem::remove_all(dir);
}

TEST_CASE("digests that cannot be read cost one warning and leave the events", "[recorder][sink]") {
  const auto dir = freshTrace("fail");
  std::vector<std::string> warnings;
  {
    TraceSink sink(std::make_unique<trace::TraceWriter>(dir, trace::Header{}),
                   [&](const std::string& w) { warnings.push_back(w); }, SinkOptions{.thread = false});
    sink.push(memsetEntry(0x3000, std::make_unique<SlowHashes>(1, 0ms, true)));
    sink.push(memsetEntry(0x3001, std::make_unique<SlowHashes>(2, 0ms, true)));
    sink.push(memsetEntry(0x3002, std::make_unique<SlowHashes>(3, 0ms)));
    sink.close();
    sink.push(memsetEntry(0x3003, nullptr));  // after close: dropped
  }
  REQUIRE(warnings.size() == 1);
  CHECK(warnings[0].find("device lost") != std::string::npos);
  trace::TraceReader reader(dir);
  const auto events = reader.readAll();
  REQUIRE(events.size() == 3);
  CHECK(std::get<trace::Memset>(events[0].payload).digest == 0);
  CHECK(std::get<trace::Memset>(events[2].payload).digest == 3);
  std::filesystem::remove_all(dir);
}

TEST_CASE("chunk digests are kept for ranges of 2 to 256 chunks", "[recorder][sink]") {
  std::vector<trace::DeviceRange> ranges(3);
  std::vector<kernels::HashResult> results = {{1, {7}}, {2, {7, 8}}, {3, std::vector<uint64_t>(257, 9)}};
  const auto digests = toRangeDigests(ranges, results);
  CHECK(digests[0].chunkDigests.empty());
  CHECK(digests[1].chunkDigests == std::vector<uint64_t>{7, 8});
  CHECK(digests[2].chunkDigests.empty());
  CHECK(digests[2].digest == 3);
  CHECK(toRangeDigests(ranges, {})[1].digest == 0);  // no results: ranges without digests
}
