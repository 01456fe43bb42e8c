// The background trace writer: order, waiting for digests off the program's
// threads, periodic flushing (a crash keeps what was flushed), and failures
// that cost a warning, not the program.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <thread>

#include "recorder/kernel_text.h"
#include "recorder/recycling.h"
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

TEST_CASE("flush writes what was recorded at once, digests waited for, and the trace stays open", "[recorder][sink]") {
  const auto dir = freshTrace("flush-now");
  // A flush interval far beyond the test: only flush() writes the block.
  for (const bool thread : {true, false}) {
    CAPTURE(thread);
    std::filesystem::remove_all(dir);
    TraceSink sink(std::make_unique<trace::TraceWriter>(dir, trace::Header{}), [](const std::string&) {},
                   SinkOptions{.thread = thread, .flushIntervalMs = 600'000});
    for (uint64_t i = 0; i < 20; ++i) sink.push(memsetEntry(0x3000 + i, std::make_unique<SlowHashes>(7 + i, 5ms)));
    sink.flush();
    {
      trace::TraceReader reader(dir);  // as the process would leave it, killed now
      CHECK(reader.damage().unclosed);
      const auto events = reader.readAll();
      REQUIRE(events.size() == 20);
      CHECK(std::get<trace::Memset>(events[19].payload).digest == 26);
    }
    sink.push(memsetEntry(0x4000, nullptr));  // recording goes on
    sink.close();
    CHECK(trace::TraceReader(dir).readAll().size() == 21);
  }
  std::filesystem::remove_all(dir);
}

TEST_CASE("flush waits a bounded time for digests a hung GPU would never give", "[recorder][sink]") {
  const auto dir = freshTrace("flush-hung");
  std::vector<std::string> warnings;
  TraceSink sink(std::make_unique<trace::TraceWriter>(dir, trace::Header{}),
                 [&](const std::string& w) { warnings.push_back(w); }, SinkOptions{.flushWaitMs = 50});
  sink.push(memsetEntry(0x5000, std::make_unique<SlowHashes>(1, 1500ms)));
  const auto start = std::chrono::steady_clock::now();
  sink.flush();
  CHECK(std::chrono::steady_clock::now() - start < 1000ms);
  REQUIRE(warnings.size() == 1);
  CHECK_THAT(warnings[0], Catch::Contains("did not write what was recorded within 50 ms"));
  sink.close();
  CHECK(trace::TraceReader(dir).readAll().size() == 1);
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

TEST_CASE("a trace thread that falls behind: the ring stays in its bound, the program never waits, and what is "
          "dropped is counted and marked in its place", "[recorder][sink]") {
  const auto dir = freshTrace("behind");
  std::vector<std::string> warnings;
  SinkOptions options;
  options.queueBytes = uint64_t{1} << 20;
  options.slowWriterUs = 200;  // a writer a thousand times slower than the program
  constexpr uint64_t kFirst = 5000, kSecond = 10;
  std::chrono::nanoseconds slowest{0};
  SinkStats stats;
  {
    TraceSink sink(std::make_unique<trace::TraceWriter>(dir, trace::Header{}),
                   [&](const std::string& w) { warnings.push_back(w); }, options);
    auto push = [&](uint64_t i) {
      SinkEntry e = memsetEntry(0x10000 + i, nullptr);
      e.event.timeNs = i;
      const auto t0 = std::chrono::steady_clock::now();
      sink.push(std::move(e));
      slowest = std::max(slowest, std::chrono::steady_clock::now() - t0);
    };
    for (uint64_t i = 0; i < kFirst; ++i) push(i);
    sink.drain();  // the trace thread catches up
    for (uint64_t i = kFirst; i < kFirst + kSecond; ++i) push(i);
    stats = sink.stats();
    sink.close();
  }
  CHECK(slowest < 50ms);
  CHECK(stats.peakBytes <= options.queueBytes);
  CHECK(stats.dropped > 0);
  REQUIRE(warnings.size() == 1);
  CHECK(warnings[0].find("dropped") != std::string::npos);
  // Every event is either in the trace or counted by a marker that stands
  // exactly where the dropped ones were (event i was made at time i).
  const auto events = trace::TraceReader(dir).readAll();
  uint64_t next = 0, kept = 0, dropped = 0;
  for (size_t i = 0; i < events.size(); ++i) {
    CHECK(events[i].seq == i);
    if (const auto* d = std::get_if<trace::EventsDropped>(&events[i].payload)) {
      CHECK(d->firstTimeNs == next);
      CHECK(d->lastTimeNs - d->firstTimeNs + 1 == d->total());
      CHECK(d->byKind[2] == d->total());  // memsets
      dropped += d->total();
      next = d->lastTimeNs + 1;
    } else {
      CHECK(events[i].timeNs == next);
      CHECK(std::get<trace::Memset>(events[i].payload).dst.address == 0x10000 + next);
      ++kept;
      ++next;
    }
  }
  CHECK(next == kFirst + kSecond);
  CHECK(dropped == stats.dropped);
  CHECK(kept + dropped == kFirst + kSecond);
  std::filesystem::remove_all(dir);
}

TEST_CASE("a shelf takes back and hands out many things under one lock, within its bound", "[recorder][sink]") {
  Shelf<std::unique_ptr<int>, 4> shelf;
  std::unique_ptr<int> given[6];
  for (int i = 0; i < 6; ++i) given[i] = std::make_unique<int>(i);
  shelf.put(std::span(given, 6));
  // The first four kept; the caller still holds the two beyond the bound.
  for (int i = 0; i < 4; ++i) CHECK(given[i] == nullptr);
  REQUIRE(given[4] != nullptr);
  REQUIRE(given[5] != nullptr);
  CHECK(*given[4] == 4);
  CHECK(*given[5] == 5);
  // The last given back comes last of those taken at once (the first used).
  std::unique_ptr<int> taken[8];
  REQUIRE(shelf.take(taken, 3) == 3);
  CHECK(*taken[0] == 1);
  CHECK(*taken[1] == 2);
  CHECK(*taken[2] == 3);
  REQUIRE(shelf.take(taken + 3, 5) == 1);
  CHECK(*taken[3] == 0);
  CHECK(shelf.take(taken + 4, 4) == 0);
  // A full shelf takes none.
  CHECK(shelf.put(std::span(taken, 4)) == 4);
  CHECK(shelf.put(std::span(given + 4, 1)) == 0);
  REQUIRE(given[4] != nullptr);
}

namespace {
int disposed = 0;
struct CountDisposed {
  void operator()(std::unique_ptr<int>& p) const {
    ++disposed;
    p.reset();
  }
};
}  // namespace

TEST_CASE("a thread's hand fills from its shelf and empties into it half a hand at a time", "[recorder][sink]") {
  Shelf<std::unique_ptr<int>, 3> shelf;
  disposed = 0;
  {
    std::unique_ptr<int> five[5];
    for (int i = 0; i < 5; ++i) five[i] = std::make_unique<int>(i);
    CHECK(shelf.put(std::span(five, 3)) == 3);
    Hand<std::unique_ptr<int>, CountDisposed, 4, 3> hand(shelf);
    // Two at once from the shelf; the last given back first.
    std::unique_ptr<int> a, b, c, d;
    REQUIRE(hand.take(a));
    CHECK(*a == 2);
    std::unique_ptr<int> left;
    REQUIRE(shelf.take(&left, 1) == 1);  // the one the hand left there
    CHECK(*left == 0);
    REQUIRE(hand.take(b));
    CHECK(*b == 1);
    CHECK_FALSE(hand.take(c));  // neither the hand nor the shelf has any
    CHECK(hand.next() == nullptr);
    // Four fit in the hand; the fifth sends the two given back longest ago
    // to the shelf.
    for (std::unique_ptr<int>* p : {&a, &b, &five[3], &five[4]}) hand.put(*p);
    hand.put(left);
    CHECK(disposed == 0);
    REQUIRE(hand.next() != nullptr);
    CHECK(**hand.next() == 0);  // what the next take gives: the last put
    REQUIRE(shelf.take(&d, 1) == 1);
    CHECK(*d == 1);  // a (2) and b (1) went to the shelf, b last
    // When it goes, the hand gives back what it holds: three to a shelf
    // with room for two (a is still there), the rest disposed of.
  }
  CHECK(disposed == 1);
  std::unique_ptr<int> out[4];
  CHECK(shelf.take(out, 4) == 3);
}

TEST_CASE("a launch's kernel name and layout are kept once and copied into its event when written", "[recorder][sink]") {
  const std::vector<trace::ParamInfo> layout{{0, 8}, {8, 4}};
  const std::string name = "_Z6kernelPfi" + std::to_string(getpid());  // new to this process
  const size_t before = keptKernelTexts();
  const KernelText* text = keptKernelText(name, layout);
  CHECK(text->name == name);
  CHECK(text->layout == layout);
  CHECK(keptKernelText(name, layout) == text);  // the same copy for the same pair
  const KernelText* other = keptKernelText(name, {{0, 8}});
  CHECK(other != text);
  CHECK(keptKernelTexts() == before + 2);

  const auto dir = freshTrace("kernel-text");
  {
    TraceSink sink(std::make_unique<trace::TraceWriter>(dir, trace::Header{}), [](const std::string&) {});
    SinkEntry e;
    e.event.payload = trace::KernelLaunch{};
    e.kernel = text;
    sink.push(std::move(e));
    SinkEntry own;  // an event with its own name (a launch listed bare)
    trace::KernelLaunch bare;
    bare.function = "bare";
    own.event.payload = bare;
    sink.push(std::move(own));
  }
  std::vector<trace::KernelLaunch> launches;
  trace::TraceReader(dir).forEach([&](const trace::Event& ev) {
    if (const auto* k = std::get_if<trace::KernelLaunch>(&ev.payload)) launches.push_back(*k);
    return true;
  });
  REQUIRE(launches.size() == 2);
  CHECK(launches[0].function == name);
  CHECK(launches[0].paramLayout == layout);
  CHECK(launches[1].function == "bare");
  CHECK(launches[1].paramLayout.empty());
  std::filesystem::remove_all(dir);
}

TEST_CASE("a launch's entry, kept for later launches, carries none of its digests to them", "[recorder][sink]") {
  // Launches alternate with digests before and after and with none, through
  // entries the sink keeps and hands out again, where a written launch's
  // digests leave their room behind.
  const auto dir = freshTrace("kept-digests");
  constexpr uint64_t kLaunches = 300;
  {
    TraceSink sink(std::make_unique<trace::TraceWriter>(dir, trace::Header{}), [](const std::string&) {},
                   SinkOptions{.thread = false});
    for (uint64_t i = 0; i < kLaunches; ++i) {
      EntryBox e = takeLaunchEntry();
      auto& k = std::get<trace::KernelLaunch>(e->event.payload);
      k.function = "k";
      if (i % 2 == 1) {
        e->before.ranges = {{0x1000 + i, 8, 1, 0}};
        e->before.pending = std::make_unique<SlowHashes>(i, 0ms);
        e->after.ranges = {{0x2000 + i, 8, 1, 0}, {0x3000 + i, 8, 2, 0}};
        e->after.pending = std::make_unique<SlowHashes>(i + 1000, 0ms);
      }
      sink.push(std::move(e));
    }
  }
  uint64_t i = 0;
  trace::TraceReader(dir).forEach([&](const trace::Event& ev) {
    const auto& k = std::get<trace::KernelLaunch>(ev.payload);
    INFO("launch " << i);
    if (i % 2 == 0) {
      CHECK(k.inputs.empty());
      CHECK(k.outputs.empty());
    } else {
      REQUIRE(k.inputs.size() == 1);
      CHECK(k.inputs[0].range.address == 0x1000 + i);
      CHECK(k.inputs[0].digest == i);
      REQUIRE(k.outputs.size() == 2);
      CHECK(k.outputs[0].digest == i + 1000);
      CHECK(k.outputs[1].range.address == 0x3000 + i);
      CHECK(k.outputs[1].digest == 0);  // SlowHashes gives one result: the second range has none
    }
    ++i;
    return true;
  });
  CHECK(i == kLaunches);
  std::filesystem::remove_all(dir);
}
