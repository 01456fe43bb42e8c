// GPU test: the device hash kernel (kernels/) must give the CPU reference
// hash (trace_format/hash.cpp) bit for bit, for buffer and chunk digests, for
// awkward lengths and start alignments, hashed one by one and in batches.
// Exits 77 (skipped) where no GPU is present.
#include <cstdio>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "kernels/device_hasher.h"
#include "trace_format/hash.h"

using namespace gpurr;

namespace {

constexpr int kSkip = 77;

#define CHECK_CU(call)                                                                   \
  do {                                                                                   \
    if (CUresult r_ = (call); r_ != CUDA_SUCCESS) {                                      \
      std::fprintf(stderr, "hash_match: %s failed: %s\n", #call, api.errorText(r_).c_str()); \
      return 1;                                                                          \
    }                                                                                    \
  } while (0)

}  // namespace

int main() {
  kernels::DriverApi api;
  const kernels::FirstDevice gpu = kernels::openFirstDevice(api);
  if (!gpu.ok) {
    std::fprintf(stderr, "hash_match: %s%s\n", gpu.absent ? "skipped: " : "", gpu.error.c_str());
    return gpu.absent ? kSkip : 1;
  }
  std::string error;

  auto hasher = kernels::DeviceHasher::create(api, error);
  if (!hasher) {
    std::fprintf(stderr, "hash_match: %s\n", error.c_str());
    return 1;
  }

  // One device buffer of random bytes; every case is a slice of it.
  const size_t total = (9u << 20) + 4096;
  std::vector<uint8_t> host(total);
  std::mt19937_64 rng(12345);
  for (auto& b : host) b = static_cast<uint8_t>(rng());
  CUdeviceptr base = 0;
  CHECK_CU(api.cuMemAlloc(&base, total));
  CHECK_CU(api.cuMemcpyHtoD(base, host.data(), total));

  const std::vector<uint64_t> lengths = {0,     1,     2,     7,     8,      15,      16,     17,
                                         31,    255,   4095,  4096,  4097,   65535,   65536,  65537,
                                         65552, 131072, 131073, 1 << 20, (3u << 20) + 5, 8u << 20};
  const std::vector<uint64_t> offsets = {0, 1, 3, 8, 15, 16, 17, 4096 + 7};

  std::vector<kernels::HashRequest> requests;
  std::vector<uint64_t> expected;
  std::vector<std::vector<uint64_t>> expectedChunks;
  for (uint64_t off : offsets) {
    for (uint64_t len : lengths) {
      if (off + len > total) continue;
      const std::span<const uint8_t> bytes(host.data() + off, len);
      requests.push_back({base + off, len});
      expected.push_back(hash::hashBuffer(bytes));
      expectedChunks.push_back(hash::chunkDigests(bytes));
    }
  }

  int failures = 0;
  auto compare = [&](const char* mode, size_t i, const kernels::HashResult& got) {
    const bool ok = got.digest == expected[i] && got.chunkDigests == expectedChunks[i];
    if (!ok && ++failures <= 20) {
      std::fprintf(stderr, "hash_match: %s: length %llu at offset %llu: device %016llx, cpu %016llx\n", mode,
                   static_cast<unsigned long long>(requests[i].length),
                   static_cast<unsigned long long>(requests[i].address - base),
                   static_cast<unsigned long long>(got.digest), static_cast<unsigned long long>(expected[i]));
    }
  };

  // Each buffer alone, then all of them in one batch (the recorder's way).
  std::vector<kernels::HashResult> results;
  for (size_t i = 0; i < requests.size(); ++i) {
    CHECK_CU(hasher->hashNow(nullptr, std::span(&requests[i], 1), results, true));
    compare("single", i, results[0]);
  }
  CHECK_CU(hasher->hashNow(nullptr, requests, results, true));
  for (size_t i = 0; i < requests.size(); ++i) compare("batch", i, results[i]);

  // A changed byte must change the digest (the kernel reads what it claims).
  host[70000] ^= 0x40;
  CHECK_CU(api.cuMemcpyHtoD(base, host.data(), total));
  const kernels::HashRequest whole{base, 1 << 20};
  CHECK_CU(hasher->hashNow(nullptr, std::span(&whole, 1), results));
  if (results[0].digest != hash::hashBuffer(std::span<const uint8_t>(host.data(), 1 << 20))) {
    std::fprintf(stderr, "hash_match: digest after a one-byte change differs from the CPU's\n");
    ++failures;
  }

  hasher.reset();
  api.cuMemFree(base);
  api.cuDevicePrimaryCtxRelease(gpu.device);
  std::printf("hash_match: %zu buffers, %d mismatches\n", requests.size(), failures);
  return failures == 0 ? 0 : 1;
}
