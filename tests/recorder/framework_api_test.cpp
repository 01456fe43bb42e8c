// The C functions the framework layer calls (recorder/framework_api.cpp):
// on a thread whose thread_locals are gone (the main thread's at exit(),
// before static destructors that may still run ops), they leave the
// framework context alone.
#include "recorder/framework_api.h"

#include <catch2/catch.hpp>

#include <functional>
#include <thread>

#include "recorder/framework_context.h"

namespace fw = gpurr::recorder::framework;

namespace {

// What a thread does as it ends, after its other thread_locals were
// destroyed (made before them, so destroyed after them).
struct AtThreadEnd {
  std::function<void()> run;
  ~AtThreadEnd() {
    if (run) run();
  }
};
thread_local AtThreadEnd atThreadEnd;

int id;  // a scope's identity

}  // namespace

TEST_CASE("the framework layer's calls on a thread whose thread_locals are gone are ignored",
          "[recorder][framework]") {
  fw::resetForTesting();
  bool reportedAtEnd = true;
  std::thread([&] {
    atThreadEnd.run = [&] {
      gpurr_framework_enter_module("Model.layer");
      gpurr_framework_open_scope(&id, "aten::add", 0, 7, 1, "train.py", 3, 1);
      const uint64_t address = 0x1000;
      const uint8_t written = 1;
      gpurr_framework_op_operands(&id, &address, &written, 1);
      gpurr_framework_close_scope(&id);
      gpurr_framework_exit_module();
      reportedAtEnd = fw::active();
    };
    gpurr_framework_exit_module();  // makes this thread's state (after atThreadEnd), reports nothing
  }).join();
  CHECK_FALSE(reportedAtEnd);
  gpurr_framework_enter_module("Model");  // on a live thread: reported
  CHECK(fw::active());
  fw::resetForTesting();
}
