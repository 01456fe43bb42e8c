// What the report tests share: the golden diff cases, temporary directories,
// running `gpurr diff --json`, and a generator of long runs written in small
// blocks over two streams.
#pragma once

#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "trace_format/trace.h"

namespace testutil {

namespace fs = std::filesystem;
using json = nlohmann::json;

inline fs::path caseDir(const std::string& name) {
  return fs::path(GPURR_SOURCE_DIR) / "tests" / "diff" / "cases" / name;
}

inline fs::path fixture(const std::string& name) {
  return fs::path(GPURR_SOURCE_DIR) / "tests" / "report" / "fixtures" / name;
}

inline json loadJson(const fs::path& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error(path.string() + ": cannot be read");
  return json::parse(in);
}

struct TempDir {
  fs::path path;
  explicit TempDir(const std::string& name)
      : path(fs::temp_directory_path() / ("gpurr_report_" + name + "_" + std::to_string(::getpid()))) {
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

// `gpurr diff --json A B`, run in `dir`, parsed.
inline json gpurrDiff(const fs::path& dir, const std::string& a, const std::string& b) {
  const std::string cmd = "cd '" + dir.string() + "' && '" GPURR_BINARY_DIR "/bin/gpurr' diff " + a + " " + b +
                          " --json 2>/dev/null";
  FILE* pipe = ::popen(cmd.c_str(), "r");
  if (!pipe) throw std::runtime_error("cannot run " + cmd);
  std::string out;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = std::fread(buf.data(), 1, buf.size(), pipe)) > 0) out.append(buf.data(), n);
  const int status = ::pclose(pipe);
  if (!WIFEXITED(status) || WEXITSTATUS(status) > 1) throw std::runtime_error("failed: " + cmd);
  return json::parse(out);
}

inline uint64_t mix(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  x *= 0xc4ceb33fe1a85ec9ULL;
  x ^= x >> 33;
  return x;
}

// Two runs of `launches` launches of five kernels over two streams, with a
// host-to-device copy every 7 launches, a memset every 11 and a stream
// synchronisation every 10, in 512-byte blocks. Run B's launches from
// `divergeAt` on write other bytes; before launch `insertAt` run B launches
// `inserted` extra kernels that write a buffer nothing reads.
struct LongRuns {
  size_t launches = 300;
  size_t divergeAt = std::numeric_limits<size_t>::max();
  size_t insertAt = std::numeric_limits<size_t>::max();
  size_t inserted = 2;
  std::string kernel0 = "_Z7kernel0PfPKf";  // the name of every fifth launch's kernel
  std::vector<uint64_t> opSeqsA;  // event number of each operation of run A

  uint64_t seqOfOperation(uint64_t index) const { return opSeqsA.at(index); }

  void write(const fs::path& a, const fs::path& b) {
    writeRun(a, false);
    writeRun(b, true);
  }

 private:
  void writeRun(const fs::path& dir, bool second) {
    using namespace gpurr::trace;
    Header h;
    h.toolVersion = "0.1.0";
    h.commandLine = {"python", "train.py"};
    h.gpus = {{0, "NVIDIA H100 80GB HBM3", "GPU-0", 132, 9, 0, 85520809984ULL, "0000:19:00.0"}};
    h.driverVersion = 13000;
    TraceWriter w(dir, h, WriterOptions{512, 1, false, 8});
    uint64_t seq = 0;
    const uint64_t base = second ? 0x7f3400000000ULL : 0x7f1200000000ULL;
    const uint64_t streams[2] = {second ? 0x5603a0ULL : 0x55c120ULL, second ? 0x5603f0ULL : 0x55c170ULL};
    auto address = [&](uint32_t ordinal) { return base + uint64_t{ordinal} * 0x100000; };
    auto add = [&](Payload p) {
      const bool op = std::holds_alternative<KernelLaunch>(p) || std::holds_alternative<Memcpy>(p) ||
                      std::holds_alternative<Memset>(p) || std::holds_alternative<GraphLaunch>(p);
      if (op && !second) opSeqsA.push_back(seq);
      w.append(Event{seq, 1000 + seq * 5000, 0, std::move(p)});
      ++seq;
    };
    auto range = [&](uint32_t ordinal, uint64_t digest) {
      RangeDigest r;
      r.range = {address(ordinal), 4096, ordinal, 0};
      r.digest = digest;
      return r;
    };
    for (uint32_t o = 1; o <= 5; ++o) add(Allocation{o, address(o), 4096, AllocationKind::kDevice, 0, 0});
    uint64_t state[6] = {0, 11, 22, 33, 44, 55};
    for (size_t k = 0; k < launches; ++k) {
      if (second && k == insertAt) {
        for (size_t i = 0; i < inserted; ++i) {
          KernelLaunch x;
          x.stream = streams[0];
          x.function = "extra_kernel";
          x.grid = {1, 1, 1};
          x.block = {32, 1, 1};
          appendPointerParam(x, address(5), 5, 0);
          x.outputs = {range(5, mix(9000 + i))};
          add(x);
        }
      }
      if (k % 7 == 3) {
        Memcpy m;
        m.kind = MemcpyKind::kHostToDevice;
        m.stream = streams[0];
        m.size = 4096;
        m.dst = {address(1), 4096, 1, 0};
        m.src = {0x55d0c0de0000ULL, 4096, 0, 0};
        m.digest = state[1] = mix(1000 + k);
        add(m);
      }
      if (k % 11 == 5) {
        Memset s;
        s.stream = streams[1];
        s.dst = {address(2), 4096, 2, 0};
        s.elementSize = 4;
        s.digest = state[2] = mix(2000 + k);
        add(s);
      }
      const uint32_t in = static_cast<uint32_t>(k % 4) + 1, out = static_cast<uint32_t>((k + 1) % 4) + 1;
      KernelLaunch l;
      l.stream = streams[k % 3 == 0 ? 1 : 0];
      l.function = k % 5 == 0 ? kernel0 : "_Z7kernel" + std::to_string(k % 5) + "PfPKf";
      l.grid = {static_cast<uint32_t>(16 + k % 5), 1, 1};
      l.block = {256, 1, 1};
      appendPointerParam(l, address(out), out, 0);
      appendPointerParam(l, address(in), in, 0);
      l.inputs = {range(in, state[in])};
      state[out] = mix(k * 31 + state[in]) ^ (second && k >= divergeAt ? 1 : 0);
      l.outputs = {range(out, state[out])};
      add(l);
      if (k % 10 == 9) add(Sync{SyncKind::kStreamSynchronize, streams[0], 0});
    }
    w.close();
  }
};

}  // namespace testutil
