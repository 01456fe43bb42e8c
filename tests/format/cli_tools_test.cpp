// Writes a trace with write_trace_with_cli.sh (capnp + zstd + xxhsum, no
// gpurr code) and reads it with gpurr's reader.
#include <catch2/catch.hpp>

#include <cstdlib>

#include "tests/unit/test_util.h"
#include "trace_format/hash.h"
#include "trace_format/trace.h"

using namespace gpurr::trace;
namespace fs = std::filesystem;

TEST_CASE("a trace written with the capnp and zstd command-line tools reads back") {
  gpurr::testing::TempDir tmp;
  const fs::path src = GPURR_SOURCE_DIR;
  const fs::path out = tmp / "cli.gpurr";
  const std::string cmd = "bash " + (src / "tests/format/write_trace_with_cli.sh").string() + " " +
                          (src / "trace_format/trace.capnp").string() + " " + out.string() + " " +
                          (src / "tests/format/events.txt").string() + " > /dev/null";
  REQUIRE(std::system(cmd.c_str()) == 0);

  TraceReader r(out);
  CHECK_FALSE(r.damage().unclosed);
  CHECK(r.header().toolVersion == "capnp-cli");
  CHECK(r.blocks().size() == 2);
  CHECK(r.eventCount() == 8);
  CHECK(r.launchCount() == 1);
  const auto events = r.readAll();
  REQUIRE(events.size() == 8);

  const auto& alloc = std::get<Allocation>(events[1].payload);
  CHECK(alloc == Allocation{2, 0x7f0000001000, 4096, AllocationKind::kAsync, 0, 7});

  const auto& module = std::get<ModuleLoad>(events[2].payload);
  CHECK(module.arch == 90);
  const auto cubin = gpurr::testing::readFile(src / "tests/format/cubin.bin");
  CHECK(r.readBlob(module.cubin) == cubin);

  const auto& k = std::get<KernelLaunch>(events[4].payload);
  CHECK(events[4].seq == 4);
  CHECK(events[4].thread == 1);
  CHECK(k.function == "_Z6scale2PfPKff");
  CHECK(k.module == 1);
  CHECK(k.grid == Dim3{16, 1, 1});
  CHECK(k.block == Dim3{256, 1, 1});
  CHECK(k.cluster == Dim3{0, 0, 0});
  CHECK(k.params.size() == 20);
  CHECK(k.paramLayout == std::vector<ParamInfo>{{0, 8}, {8, 8}, {16, 4}});
  CHECK(k.pointers == std::vector<PointerParam>{{0, 1, 0}, {8, 2, 0}});
  REQUIRE(k.outputs.size() == 1);
  CHECK(k.outputs[0].digest == 0x0123456789abcdefULL);
  CHECK(k.outputs[0].chunkDigests == std::vector<uint64_t>{42});
  CHECK(k.annotations == std::vector<Annotation>{FrameworkOp{"aten::mul"}});
  REQUIRE(events[4].origin);
  CHECK(*events[4].origin == Origin{"aten::mul",
                                    {"autograd::engine::evaluate_function: MulBackward0", "MulBackward0", "aten::mul"},
                                    Phase::kBackward, "aten::mul", "model.scale", "/src/train.py", 42, 3, 36});
  CHECK(describe(*events[4].origin) ==
        "aten::mul (backward of aten::mul) in model.scale, train.py:42, step 3 (launch 37 of the step)");
  // Fields left out take the schema's defaults: step -1 (unknown), phase unknown.
  REQUIRE(events[3].origin);
  CHECK(*events[3].origin == Origin{"aten::copy_", {}, Phase::kUnknown, "", "", "", 0, -1, 0});
  CHECK_FALSE(events[5].origin);

  CHECK(std::get<Memset>(events[5].payload).elementSize == 4);
  CHECK(std::get<Sync>(events[6].payload).kind == SyncKind::kStreamSynchronize);
  CHECK(std::get<Free>(events[7].payload).ordinal == 2);
}
