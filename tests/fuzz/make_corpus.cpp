// Writes the seed corpus of the reader fuzzer from a valid trace: every file
// as it is, the decompressed frames of every block and the stored bytes of
// every blob (for the modes where the harness compresses), and a few
// hand-made variants (a newer version, truncations, missing files, a file
// that is not a trace). Older seeds (seed-*) are replaced; regression inputs
// (regress-*, tests/fuzz/make_regressions.py) and inputs kept from fuzzing
// runs for their coverage (cov-*, chosen with libFuzzer's -merge=1) stay.
//
//   gpurr_fuzz_corpus TRACE_DIR CORPUS_DIR
#include <zstd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "tests/fuzz/reader_fuzz.h"
#include "trace_format/trace.h"

namespace fs = std::filesystem;
using gpurr::fuzz::Mode;
using Bytes = std::vector<uint8_t>;

namespace {

Bytes readFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path.string());
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

Bytes decompress(const Bytes& frame, const std::string& what) {
  const unsigned long long size = ZSTD_getFrameContentSize(frame.data(), frame.size());
  if (size == ZSTD_CONTENTSIZE_ERROR || size == ZSTD_CONTENTSIZE_UNKNOWN) {
    throw std::runtime_error(what + ": not a zstd frame with a content size");
  }
  Bytes out(size);
  const size_t n = ZSTD_decompress(out.data(), out.size(), frame.data(), frame.size());
  if (ZSTD_isError(n) || n != size) throw std::runtime_error(what + ": cannot decompress");
  return out;
}

void append(Bytes& out, uint64_t v, size_t n) {
  for (size_t i = 0; i < n; ++i) out.push_back(static_cast<uint8_t>(v >> (8 * i)));
}

Bytes input(Mode mode, std::initializer_list<uint8_t> prefix, const Bytes& rest = {}) {
  Bytes out;
  out.reserve(1 + prefix.size() + rest.size());
  out.push_back(static_cast<uint8_t>(mode));
  out.insert(out.end(), prefix.begin(), prefix.end());
  out.insert(out.end(), rest.begin(), rest.end());
  return out;
}

// One record of a kSeveral input.
void record(Bytes& out, Mode mode, const Bytes& payload) {
  out.push_back(static_cast<uint8_t>(mode));
  append(out, payload.size(), 2);
  out.insert(out.end(), payload.begin(), payload.end());
}

Bytes text(const std::string& s) { return Bytes(s.begin(), s.end()); }

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s TRACE_DIR CORPUS_DIR\n", argv[0]);
    return 2;
  }
  const fs::path trace = argv[1];
  const fs::path corpus = argv[2];
  try {
    gpurr::trace::TraceReader reader(trace);
    fs::create_directories(corpus);
    for (const auto& e : fs::directory_iterator(corpus)) {
      if (e.path().filename().string().rfind("seed-", 0) == 0) fs::remove(e.path());
    }
    size_t written = 0;
    auto seed = [&](const std::string& name, const Bytes& bytes) {
      std::ofstream out(corpus / ("seed-" + name), std::ios::binary | std::ios::trunc);
      out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
      if (!out) throw std::runtime_error("cannot write " + (corpus / ("seed-" + name)).string());
      ++written;
    };

    const Bytes version = readFile(trace / "version");
    const Bytes header = readFile(trace / "header");
    const Bytes events = readFile(trace / "events");
    const Bytes index = readFile(trace / "index");
    seed("version", input(Mode::kVersion, {}, version));
    seed("version-newer", input(Mode::kVersion, {}, text("gpurr-trace 2\n")));
    seed("version-older", input(Mode::kVersion, {}, text("gpurr-trace 0\n")));
    seed("header", input(Mode::kHeader, {}, header));
    seed("header-truncated", input(Mode::kHeader, {}, Bytes(header.begin(), header.begin() + header.size() / 2)));
    seed("events", input(Mode::kEvents, {}, events));
    seed("events-truncated", input(Mode::kEvents, {}, Bytes(events.begin(), events.end() - 7)));
    seed("index", input(Mode::kIndex, {}, index));
    seed("index-empty", input(Mode::kIndex, {}));

    // Blocks: their frames, uncompressed, with the header fields they had.
    const auto& blocks = reader.blocks();
    for (size_t i = 0; i < blocks.size(); ++i) {
      const auto& b = blocks[i];
      const uint64_t end = i + 1 < blocks.size() ? blocks[i + 1].fileOffset : events.size();
      const Bytes frame(events.begin() + static_cast<ptrdiff_t>(end - b.compressedSize),
                        events.begin() + static_cast<ptrdiff_t>(end));
      Bytes in{static_cast<uint8_t>(Mode::kBlockFrames)};
      append(in, b.eventCount, 4);
      append(in, b.launchCount, 4);
      append(in, b.firstSeq, 8);
      append(in, b.firstTimeNs, 8);
      append(in, b.lastTimeNs, 8);
      const Bytes frames = decompress(frame, "block " + std::to_string(i));
      in.insert(in.end(), frames.begin(), frames.end());
      seed("frames-" + std::to_string(i), in);
    }

    // Blobs, in the order the harness numbers them (sorted paths).
    std::vector<fs::path> blobs;
    for (const auto& e : fs::recursive_directory_iterator(trace / "blobs")) {
      if (e.is_regular_file()) blobs.push_back(e.path());
    }
    std::sort(blobs.begin(), blobs.end());
    for (size_t i = 0; i < blobs.size(); ++i) {
      const Bytes file = readFile(blobs[i]);
      const uint8_t n = static_cast<uint8_t>(i);
      seed("blob-" + std::to_string(i), input(Mode::kBlobFile, {n}, file));
      seed("blob-content-" + std::to_string(i), input(Mode::kBlobContent, {n}, decompress(file, blobs[i].string())));
      seed("blob-truncated-" + std::to_string(i),
           input(Mode::kBlobFile, {n}, Bytes(file.begin(), file.begin() + file.size() / 2)));
    }

    // Odd entries. The harness numbers the paths: the blob files, events,
    // header, index, version (sorted), then the blobs directory.
    const auto path = [&](size_t afterBlobs) { return static_cast<uint8_t>(blobs.size() + afterBlobs); };
    seed("missing-blob", input(Mode::kOddEntry, {0, 0}));
    seed("events-is-dir", input(Mode::kOddEntry, {path(0), 1}));
    seed("header-is-dev-zero", input(Mode::kOddEntry, {path(1), 4}));
    seed("missing-index", input(Mode::kOddEntry, {path(2), 0}));
    seed("version-is-fifo", input(Mode::kOddEntry, {path(3), 2}));
    seed("blobs-loop", input(Mode::kOddEntry, {path(4), 3}));
    seed("not-a-trace", input(Mode::kNotATrace, {}, text("not a trace\n")));

    // Several files at once: a crash-cut events file without its index, and
    // a block that refers to a blob whose file was replaced.
    Bytes cut{static_cast<uint8_t>(Mode::kSeveral)};
    record(cut, Mode::kEvents, Bytes(events.begin(), events.begin() + events.size() * 2 / 3));
    record(cut, Mode::kOddEntry, {path(2), 0});
    seed("several-crash-cut", cut);
    Bytes both{static_cast<uint8_t>(Mode::kSeveral)};
    record(both, Mode::kHeader, header);
    record(both, Mode::kBlobFile, Bytes{1});
    seed("several-blob-empty", both);

    std::printf("wrote %zu seeds to %s\n", written, corpus.c_str());
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gpurr_fuzz_corpus: %s\n", e.what());
    return 1;
  }
}
