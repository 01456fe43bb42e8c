// Benchmark of the CPU half of the snapshot path (--snapshot, --full): a
// device buffer's bytes, once on the host, stored into a trace's blob store
// by recorder::storeSnapshot (blob id, encoding choice, byte planes, zstd
// with the writer's workers, file). Against what the same bytes cost with
// less work: a plain write() of them to a file in the same folder (what the
// storage takes) and libzstd level 1 with the same number of workers (the
// compression alone). Also prints each step of the store alone, so that a
// missed snapshot goal (bench/snapshot_bench.cpp, on a GPU) can be read
// against it; and reading the blobs back (readBlob), as replay and diff do.
// Needs no GPU.
//
//   blob_bench [MiB per buffer (64)] [buffers (8)] [repeats (3)] [DIR (the temporary folder)]
#include <fcntl.h>
#include <unistd.h>
#include <zstd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "recorder/snapshot.h"
#include "trace_format/trace.h"

using namespace gpurr;
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

// The best of `repeats` runs of `f`, in seconds.
double best(int repeats, const std::function<void()>& f) {
  double out = 1e30;
  for (int r = 0; r < repeats; ++r) {
    const auto t0 = Clock::now();
    f();
    out = std::min(out, std::chrono::duration<double>(Clock::now() - t0).count());
  }
  return out;
}

void writeFile(const fs::path& file, std::span<const uint8_t> bytes) {
  const int fd = ::open(file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  if (fd < 0) {
    std::perror(file.c_str());
    std::exit(1);
  }
  for (size_t done = 0; done < bytes.size();) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n <= 0) {
      std::perror(file.c_str());
      std::exit(1);
    }
    done += static_cast<size_t>(n);
  }
  ::close(fd);
}

}  // namespace

int main(int argc, char** argv) {
  const size_t mib = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 64;
  const int count = argc > 2 ? std::atoi(argv[2]) : 8;
  const int repeats = argc > 3 ? std::atoi(argv[3]) : 3;
  const fs::path dir = (argc > 4 ? fs::path(argv[4]) : fs::temp_directory_path()) /
                       ("blob_bench-" + std::to_string(::getpid()));
  const size_t bytes = mib << 20;
  if (bytes == 0 || count <= 0 || repeats <= 0) {
    std::fprintf(stderr, "usage: blob_bench [MiB per buffer] [buffers] [repeats] [DIR]\n");
    return 2;
  }

  // Float-like contents (normal values, as weights and activations), different
  // in every buffer so that nothing is deduplicated.
  std::vector<std::vector<uint8_t>> buffers(count, std::vector<uint8_t>(bytes));
  {
    std::mt19937 rng(1);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    for (auto& b : buffers) {
      for (size_t i = 0; i + 4 <= bytes; i += 4) {
        const float f = normal(rng);
        std::memcpy(b.data() + i, &f, 4);
      }
    }
  }
  const double total = static_cast<double>(bytes) * count;
  fs::create_directories(dir);

  const double plain = best(repeats, [&] {
    for (int i = 0; i < count; ++i) writeFile(dir / ("plain" + std::to_string(i)), buffers[i]);
    fs::remove_all(dir);
    fs::create_directories(dir);
  });
  const unsigned workers = std::clamp(std::thread::hardware_concurrency(), 1u, 8u);  // as TraceWriter::putBlob's
  std::vector<uint8_t> compressed(ZSTD_compressBound(bytes));
  size_t compressedBytes = 0;
  const double zstd = best(repeats, [&] {
    compressedBytes = 0;
    for (const auto& b : buffers) {
      ZSTD_CCtx* cctx = ZSTD_createCCtx();
      ZSTD_CCtx_setParameter(cctx, ZSTD_c_compressionLevel, 1);
      ZSTD_CCtx_setParameter(cctx, ZSTD_c_nbWorkers, static_cast<int>(workers));
      compressedBytes += ZSTD_compress2(cctx, compressed.data(), compressed.size(), b.data(), b.size());
      ZSTD_freeCCtx(cctx);
    }
  });
  uint64_t stored = 0;
  std::vector<trace::BlobRef> refs;
  const double store = best(repeats, [&] {
    fs::remove_all(dir);
    trace::TraceWriter writer(dir / "t.gpurr", trace::Header{});
    refs.clear();
    for (const auto& b : buffers) refs.push_back(recorder::storeSnapshot(writer, b));
    writer.close();
    stored = writer.bytesWritten();
  });
  // What replay and diff pay to get the bytes back (decompression, byte
  // planes undone, the content checked against its name).
  const double read = best(repeats, [&] {
    trace::TraceReader reader(dir / "t.gpurr");
    for (size_t i = 0; i < refs.size(); ++i) {
      if (reader.readBlob(refs[i]) != buffers[i]) {
        std::fprintf(stderr, "blob_bench: blob %zu reads back different bytes\n", i);
        std::exit(1);
      }
    }
  });
  trace::BlobEncoding encoding{};
  const double id = best(repeats, [&] {
    for (const auto& b : buffers) (void)trace::blobIdOf(b);
  });
  const double choose = best(repeats, [&] {
    for (const auto& b : buffers) encoding = recorder::chooseSnapshotEncoding(b);
  });
  const double encode = best(repeats, [&] {
    for (const auto& b : buffers) (void)trace::encodeBlob(b, encoding);
  });
  fs::remove_all(dir);

  auto rate = [&](double s) { return total / s / 1e9; };
  std::printf("blob_bench: %d buffers of %zu MiB (float data), %u zstd workers, best of %d\n", count, mib,
              workers, repeats);
  std::printf("  write() of the raw bytes            %8.2f GB/s\n", rate(plain));
  std::printf("  libzstd level 1 alone               %8.2f GB/s  (%.3f of the bytes)\n", rate(zstd),
              static_cast<double>(compressedBytes) / total);
  std::printf("  storeSnapshot (the whole store)     %8.2f GB/s  (%.3f of the bytes)\n", rate(store),
              static_cast<double>(stored) / total);
  std::printf("    blob id (XXH3-128)                %8.2f GB/s\n", rate(id));
  std::printf("    encoding choice                   %8.2f GB/s  (%s)\n", rate(choose),
              encoding == trace::BlobEncoding::kRaw ? "raw" : "byte planes");
  std::printf("    byte planes                       %8.2f GB/s\n", rate(encode));
  std::printf("  readBlob (the bytes back, checked)  %8.2f GB/s\n", rate(read));
  std::printf("  ratio store / write()               %8.2f\n", plain / store);
  std::printf("  ratio store / libzstd level 1       %8.2f\n", zstd / store);
  return 0;
}
