// The reader on damaged and hostile traces: a writer killed mid-run, cut
// files, flipped bits, absurd sizes, missing pieces, things that are not
// traces. Every case is a TraceError with a useful message, or a correct
// read of what is intact, saying what was not read; never a crash.
#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>

#include <cstring>

#include "test_util.h"
#include "trace_format/scan.h"
#include "trace_format/trace.h"

using namespace gpurr::trace;
using gpurr::testing::readFile;
using gpurr::testing::TempDir;
using gpurr::testing::writeFile;
namespace fs = std::filesystem;

namespace {

Event launch(uint64_t seq) {
  KernelLaunch k;
  k.function = seq % 2 ? "_Z3fooPf" : "_Z3barPfS_";
  k.params.assign(24, static_cast<uint8_t>(seq));
  k.outputs = {RangeDigest{{0x1000, 64, 1, 0}, seq * 31 + 1, {}, std::nullopt}};
  return Event{seq, seq * 10, 0, k};
}

// A small closed trace with several blocks and one blob.
fs::path makeTrace(const TempDir& tmp, uint64_t events = 200) {
  const fs::path dir = tmp / "t.gpurr";
  WriterOptions options;
  options.blockBytes = 512;
  TraceWriter w(dir, Header{}, options);
  const BlobRef blob = w.putBlob(std::vector<uint8_t>(1000, 3));
  w.append(Event{0, 0, 0, ModuleLoad{1, blob, 90}});
  for (uint64_t i = 1; i < events; ++i) w.append(launch(i));
  w.close();
  return dir;
}

// Opens and fully reads a trace, as `gpurr info` and `dump` do.
void readEverything(const fs::path& dir) {
  TraceReader r(dir);
  r.forEach([&](const Event& e) {
    if (const auto* m = std::get_if<ModuleLoad>(&e.payload)) r.readBlob(m->cubin);
    return true;
  });
}

std::string errorOf(const fs::path& dir) {
  try {
    readEverything(dir);
  } catch (const TraceError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("a trace whose writer was SIGKILLed is readable up to its last complete block") {
  TempDir tmp;
  const fs::path dir = tmp / "killed.gpurr";
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    WriterOptions options;
    options.blockBytes = 4096;
    TraceWriter w(dir, Header{}, options);
    for (uint64_t i = 0; i < 1000; ++i) w.append(launch(i));
    w.flush();  // everything so far is on disk
    for (uint64_t i = 1000; i < 1010; ++i) w.append(launch(i));  // still buffered
    ::raise(SIGKILL);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  REQUIRE(WIFSIGNALED(status));
  REQUIRE(WTERMSIG(status) == SIGKILL);

  TraceReader r(dir);
  CHECK(r.damage().unclosed);
  CHECK(r.damage().discardedBytes == 0);
  CHECK_THAT(r.damage().detail, Catch::Contains("did not end cleanly"));
  CHECK(r.eventCount() == 1000);
  const auto events = r.readAll();
  REQUIRE(events.size() == 1000);
  CHECK(events.back().seq == 999);
}

TEST_CASE("a trace cut in the middle of a block keeps the blocks before it") {
  TempDir tmp;
  const fs::path dir = makeTrace(tmp);
  TraceReader whole(dir);
  const auto& blocks = whole.blocks();
  REQUIRE(blocks.size() >= 4);
  const uint64_t cut = blocks[3].fileOffset + 80;  // inside block 3's frame
  fs::remove(dir / "index");  // as after a crash: no index
  fs::remove(dir / "checksums");
  fs::resize_file(dir / "events", cut);

  TraceReader r(dir);
  CHECK(r.blocks().size() == 3);
  CHECK(r.damage().unclosed);
  CHECK(r.damage().discardedBytes == 80);
  CHECK(r.damage().discardedEvents == blocks[3].eventCount);
  CHECK_THAT(r.damage().detail, Catch::Contains("discarded 80 trailing bytes"));
  const uint64_t expected = blocks[0].eventCount + blocks[1].eventCount + blocks[2].eventCount;
  CHECK(r.readAll().size() == expected);

  fs::resize_file(dir / "events", blocks[3].fileOffset + 30);  // inside its header
  TraceReader r2(dir);
  CHECK(r2.blocks().size() == 3);
  CHECK(r2.damage().discardedBytes == 30);
}

TEST_CASE("a damaged block header costs nothing with an index checksums vouches for, and the blocks after it without") {
  TempDir tmp;
  const fs::path dir = makeTrace(tmp);
  const std::vector<BlockInfo> blocks = TraceReader(dir).blocks();
  REQUIRE(blocks.size() >= 4);
  const uint64_t all = blocks.back().firstSeq + blocks.back().eventCount;
  const auto original = readFile(dir / "events");
  const auto index = readFile(dir / "index");
  const auto checksums = readFile(dir / "checksums");
  // Each byte of block 3's header changed in turn. With the index, the
  // block is read by its entry (its frame has a checksum of its own), and
  // the trace is complete; without, the trace reads up to block 3, saying
  // that its header is corrupt. Never an error, never a block after it.
  for (const bool vouched : {true, false}) {
    INFO((vouched ? "an index checksums vouches for" : "no index"));
    writeFile(dir / "index", index);
    writeFile(dir / "checksums", checksums);
    if (!vouched) {
      fs::remove(dir / "index");
      fs::remove(dir / "checksums");
    }
    size_t noticed = 0;
    for (uint64_t at = blocks[2].fileOffset; at < blocks[2].fileOffset + 64; ++at) {
      INFO("byte " << at << " changed");
      auto bytes = original;
      bytes[at] ^= 0x5a;
      writeFile(dir / "events", bytes);
      // As `gpurr info` and `diff` read: a header that parses but lies (a
      // frame's size) shows when its frame is decoded, or at the next header.
      Damage damage;
      const uint64_t read = readingPastCorruptBlocks({dir}, [&](const std::vector<ReadLimit>& l) {
        const TraceReader r(dir, l[0]);
        damage = r.damage();
        return r.readAll().size();
      });
      if (vouched) {
        CHECK(read == all);
        CHECK_FALSE(damage.incomplete());
        if (!damage.detail.empty()) {
          ++noticed;
          CHECK_THAT(damage.detail, Catch::Contains(fmt::format("the header of block 3 of {} (at offset {}) is "
                                                                "damaged (",
                                                                blocks.size(), blocks[2].fileOffset)) &&
                                        Catch::Contains("read by its index's entry"));
        }
        continue;
      }
      if (!damage.corruptBlock) {
        CHECK(read == all);
        continue;
      }
      ++noticed;
      CHECK(read == blocks[2].firstSeq);
      CHECK(damage.incomplete());
      CHECK(damage.cause() == "damaged since it was written: a block of its events is corrupt");
      CHECK_THAT(damage.detail, Catch::Contains("read the 2 blocks before it"));
    }
    CHECK(noticed > 40);
  }
}

TEST_CASE("a trace none of whose blocks can be read is an error that says why") {
  TempDir tmp;
  const fs::path dir = makeTrace(tmp);
  fs::remove(dir / "index");
  fs::remove(dir / "checksums");
  auto bytes = readFile(dir / "events");
  bytes[16] ^= 0x01;  // the first block's magic
  writeFile(dir / "events", bytes);
  CHECK_THAT(errorOf(dir), Catch::Contains("the header of block 1 (at offset 0) is corrupt (bad magic)") &&
                               Catch::Contains("none of its events can be read"));
}

TEST_CASE("bytes appended to a complete trace are left unread, and the trace is complete") {
  TempDir tmp;
  const fs::path dir = makeTrace(tmp);
  const uint64_t all = TraceReader(dir).eventCount();
  auto events = readFile(dir / "events");
  events.resize(events.size() + 12, 0x41);
  writeFile(dir / "events", events);
  const TraceReader r(dir);
  CHECK_FALSE(r.damage().incomplete());
  CHECK_THAT(r.damage().detail, Catch::Contains("the 12 bytes after its last block"));
  CHECK(r.readAll().size() == all);
}

TEST_CASE("a complete trace whose events file was cut short reads up to the cut") {
  TempDir tmp;
  const fs::path dir = makeTrace(tmp);
  const auto blocks = TraceReader(dir).blocks();
  REQUIRE(blocks.size() >= 4);
  fs::resize_file(dir / "events", blocks[3].fileOffset + 100);
  const TraceReader r(dir);  // the index, which checksums vouches for, is kept
  CHECK(r.blocks().size() == 3);
  CHECK(r.damage().corruptBlock);
  CHECK_THAT(r.damage().detail, Catch::Contains(fmt::format("block 4 of {} is corrupt (its frame of", blocks.size())));
  CHECK(r.readAll().size() == blocks[3].firstSeq);
}

TEST_CASE("a corrupt block in the middle is a CorruptBlock, and the blocks before it read as a trace cut there") {
  TempDir tmp;
  const fs::path dir = makeTrace(tmp);
  const auto blocks = TraceReader(dir).blocks();
  REQUIRE(blocks.size() >= 6);
  auto bytes = readFile(dir / "events");
  bytes[(blocks[4].fileOffset + blocks[5].fileOffset) / 2] ^= 0x10;  // inside block 4
  writeFile(dir / "events", bytes);
  fs::remove(dir / "checksums");

  // Both read paths, the reader's and the scanner's, name the block.
  ReadLimit limit;
  for (const bool scan : {false, true}) {
    const TraceReader r(dir);  // opening reads block headers alone: it succeeds
    CHECK_FALSE(r.damage().incomplete());
    try {
      if (scan) {
        scanEvents(r, [](const ScanEvent&) { return true; });
      } else {
        r.readAll();
      }
      FAIL("expected a CorruptBlock");
    } catch (const CorruptBlock& e) {
      CHECK_THAT(e.what(), Catch::Contains(fmt::format("block at offset {} is corrupt", blocks[4].fileOffset)));
      ReadLimit l;
      CHECK_FALSE(e.narrowed(tmp / "other.gpurr", l));  // another trace's limit stays
      CHECK(l.blockOffset == UINT64_MAX);
      CHECK(e.narrowed(dir, l));
      CHECK(l.blockOffset == blocks[4].fileOffset);
      CHECK_FALSE(e.narrowed(dir, l));  // no further
      limit = l;
    }
  }

  const TraceReader cut(dir, limit);
  CHECK(cut.blocks().size() == 4);
  CHECK(cut.damage().incomplete());
  CHECK(cut.damage().corruptBlock);
  CHECK_FALSE(cut.damage().unclosed);
  const std::string lost = fmt::format("from event #{} on are not read", blocks[4].firstSeq);
  CHECK_THAT(cut.damage().detail, Catch::Contains(fmt::format("block 5 of {} is corrupt (", blocks.size())) &&
                                      Catch::Contains("read the 4 blocks before it") && Catch::Contains(lost));
  CHECK(cut.damage().cause() == "damaged since it was written: a block of its events is corrupt");
  CHECK(cut.damage().readsTo() == "its corrupt block");
  const auto events = cut.readAll();
  CHECK(events.size() == blocks[4].firstSeq);
  CHECK(cut.eventCount() == blocks[4].firstSeq);
  uint64_t scanned = 0;
  scanEvents(cut, [&](const ScanEvent&) { return ++scanned, true; });
  CHECK(scanned == blocks[4].firstSeq);

  // What `gpurr info` and `diff` run: read, and read again up to the block.
  int reads = 0;
  const uint64_t read = readingPastCorruptBlocks({dir}, [&](const std::vector<ReadLimit>& l) {
    ++reads;
    return TraceReader(dir, l[0]).readAll().size();
  });
  CHECK(reads == 2);
  CHECK(read == blocks[4].firstSeq);
  // A corrupt block of another trace is not this one's to narrow: it goes on up.
  CHECK_THROWS_AS(readingPastCorruptBlocks({tmp / "other.gpurr"}, [&](const std::vector<ReadLimit>&) {
                    return TraceReader(dir).readAll().size();
                  }),
                  CorruptBlock);
}

TEST_CASE("a bit flipped anywhere in a block's zstd frame after its header is a CorruptBlock on both read paths") {
  // Blocks of incompressible launches, so that the scanner, which decodes
  // frames while it decompresses, meets a damaged structure before the
  // frame's checksum: it must then decompress the rest to tell a changed
  // frame (CorruptBlock) from one written so (an error).
  TempDir tmp;
  const fs::path dir = tmp / "big.gpurr";
  {
    WriterOptions options;
    options.blockBytes = 256 << 10;
    TraceWriter w(dir, Header{}, options);
    uint64_t x = 88172645463325252ull;
    for (uint64_t seq = 0; seq < 2000; ++seq) {
      KernelLaunch k;
      k.function = "_Z3fooPf";
      for (int i = 0; i < 512; ++i) k.params.push_back(static_cast<uint8_t>((x ^= x << 13, x ^= x >> 7, x ^= x << 17)));
      w.append(Event{seq, seq, 0, k});
    }
    w.close();
  }
  fs::remove(dir / "checksums");
  const auto blocks = TraceReader(dir).blocks();
  REQUIRE(blocks.size() >= 3);
  const auto original = readFile(dir / "events");
  const uint64_t frameEnd = blocks[2].fileOffset, frame = frameEnd - blocks[1].compressedSize;
  REQUIRE(frameEnd - frame > (96 << 10));
  int scanned = 0;
  for (uint64_t at = frame + 32; at < frame + (96 << 10); at += 1531) {
    INFO("a bit flipped at offset " << at);
    auto bytes = original;
    bytes[at] ^= 0x08;
    writeFile(dir / "events", bytes);
    const TraceReader r(dir);
    const std::string expected = fmt::format("block at offset {} is corrupt", blocks[1].fileOffset);
    CHECK_THROWS_AS(r.readAll(), CorruptBlock);
    CHECK_THROWS_WITH(r.readAll(), Catch::Contains(expected));
    try {
      scanEvents(r, [](const ScanEvent&) { return true; });
      FAIL("read");
    } catch (const CorruptBlock& e) {
      CHECK_THAT(e.what(), Catch::Contains(expected));
      ++scanned;
    }
  }
  CHECK(scanned > 60);
}

TEST_CASE("an index checksums does not vouch for is ignored where it does not fit, not trusted") {
  TempDir tmp;
  const fs::path dir = makeTrace(tmp);
  const TraceReader r0(dir);
  const auto blocks = r0.blocks();
  // Append a copy of the events file's first block: the index no longer
  // covers the file, and nothing vouches for it.
  fs::remove(dir / "checksums");
  auto events = readFile(dir / "events");
  const auto firstBlock = std::vector<uint8_t>(events.begin(), events.begin() + blocks[1].fileOffset);
  events.insert(events.end(), firstBlock.begin(), firstBlock.end());
  writeFile(dir / "events", events);
  // Scanning finds the appended block out of sequence: read up to it.
  const TraceReader r(dir);
  CHECK(r.damage().indexDamaged);
  CHECK(r.damage().corruptBlock);
  CHECK_THAT(r.damage().detail, Catch::Contains("covers") && Catch::Contains("inside the block before it"));
  CHECK(r.eventCount() == r0.eventCount());
  CHECK(r.blocks().size() == blocks.size());
}

TEST_CASE("things that are not traces give clear errors") {
  TempDir tmp;
  CHECK_THAT(errorOf(tmp / "nothing.gpurr"), Catch::Contains("no such trace"));

  writeFile(tmp / "file.gpurr", std::string("hello"));
  CHECK_THAT(errorOf(tmp / "file.gpurr"), Catch::Contains("a trace is a directory"));

  fs::create_directory(tmp / "empty");
  CHECK_THAT(errorOf(tmp / "empty"), Catch::Contains("no version marker"));

  const fs::path dir = makeTrace(tmp);
  writeFile(dir / "version", std::string("gpurr-trace 99\n"));
  CHECK_THAT(errorOf(dir), Catch::Contains("newer gpurr"));
  writeFile(dir / "version", std::string("PK\x03\x04 zip"));
  CHECK_THAT(errorOf(dir), Catch::Contains("not a gpurr version marker"));
}

TEST_CASE("a corrupt header, events file or blob names the file") {
  TempDir tmp;
  const fs::path dir = makeTrace(tmp);
  const auto header = readFile(dir / "header");
  const auto events = readFile(dir / "events");

  SECTION("garbage header") {
    writeFile(dir / "header", std::vector<uint8_t>(header.size(), 0xff));
    CHECK_THAT(errorOf(dir), Catch::Contains("header"));
  }
  SECTION("empty header") {
    writeFile(dir / "header", std::vector<uint8_t>{});
    CHECK_THAT(errorOf(dir), Catch::Contains("header"));
  }
  SECTION("missing events file") {
    fs::remove(dir / "events");
    CHECK_THAT(errorOf(dir), Catch::Contains("events"));
  }
  SECTION("huge declared block size") {
    auto bad = events;
    // uncompressedSize is the second 32-bit field of the BlockHeader struct:
    // segment table (8) + root pointer (8) + magic (8) + compressedSize (4).
    const uint32_t huge = 0xfffffff0;
    std::memcpy(bad.data() + 28, &huge, 4);
    writeFile(dir / "events", bad);
    fs::remove(dir / "index");
    fs::remove(dir / "checksums");
    const std::string error = errorOf(dir);
    CHECK_THAT(error, Catch::Contains("events"));
  }
  SECTION("missing blob") {
    fs::remove_all(dir / "blobs");
    CHECK_THAT(errorOf(dir), Catch::Contains("missing"));
  }
  SECTION("corrupt blob") {
    for (auto& e : fs::recursive_directory_iterator(dir / "blobs")) {
      if (!e.is_regular_file()) continue;
      auto bytes = readFile(e.path());
      bytes[bytes.size() / 2] ^= 0x10;
      writeFile(e.path(), bytes);
    }
    CHECK_THAT(errorOf(dir), Catch::Contains("corrupt blob"));
  }
  SECTION("empty blob") {
    for (auto& e : fs::recursive_directory_iterator(dir / "blobs")) {
      if (e.is_regular_file()) writeFile(e.path(), std::vector<uint8_t>{});
    }
    CHECK_THAT(errorOf(dir), Catch::Contains("corrupt blob: not a zstd frame that states its size (0 bytes)"));
  }
}

TEST_CASE("every single-bit flip in the events and header files is caught or harmless") {
  TempDir tmp;
  const fs::path dir = makeTrace(tmp, 40);
  const uint64_t expected = TraceReader(dir).eventCount();
  for (const char* file : {"events", "header", "index"}) {
    const auto original = readFile(dir / file);
    size_t errors = 0, reads = 0;
    for (size_t bit = 0; bit < original.size() * 8; ++bit) {
      auto bytes = original;
      bytes[bit / 8] ^= static_cast<uint8_t>(1u << (bit % 8));
      writeFile(dir / file, bytes);
      try {  // each event looked up by its number (the diff's lookups)
        TraceReader r(dir);
        for (uint64_t seq = 0; seq < expected + 2; ++seq) (void)r.event(seq);
      } catch (const TraceError& e) {
        CHECK(std::string(e.what()).find(dir.string()) != std::string::npos);
        // Said in the product's words, not the decoding library's source.
        CHECK(std::string(e.what()).find("boundsCheck") == std::string::npos);
      }
      try {
        TraceReader r(dir);
        size_t n = r.readAll().size();
        CHECK(n <= expected + 1);
        ++reads;
      } catch (const TraceError& e) {
        CHECK(std::string(e.what()).find(dir.string()) != std::string::npos);
        ++errors;
      }
    }
    writeFile(dir / file, original);
    INFO(file << ": " << errors << " errors, " << reads << " clean reads");
    // zstd's checksum and the framing checks catch nearly every flip in events.
    if (std::string(file) == "events") CHECK(errors > reads);
  }
}
