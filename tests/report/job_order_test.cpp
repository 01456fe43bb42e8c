// The job's happens-before order of collectives (report/job_order.h): what a
// divergence on one rank reaches, through collectives of several
// communicators, and the logical clocks that order the collectives.
#include "report/job_order.h"

#include <catch2/catch.hpp>

using gpurr::report::CollectiveOrder;

// Four processes: 1 and 2 share a subgroup whose collectives are 0-4; every
// process then takes part in the world's collective 5, then the subgroup's
// 6-10, then the world's 11.
CollectiveOrder subgroupJob() {
  return CollectiveOrder({{5, 11}, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11},
                          {5, 11}},
                         12);
}

TEST_CASE("a divergence reaches the ranks of the collectives after it, and theirs") {
  const CollectiveOrder order = subgroupJob();
  // Process 2 after 6 collectives (before the subgroup's 6): process 1 from
  // that collective (its index 6), processes 0 and 3 only from the world's
  // 11 (their index 1).
  CHECK(order.after(2, 6) == std::vector<uint64_t>{1, 6, 6, 1});
  // Process 0 after 1 collective (before the world's 11): every process
  // from 11 on; nothing it did reached process 2 before its index 11.
  CHECK(order.after(0, 1) == std::vector<uint64_t>{1, 11, 11, 1});
  // Before any collective: the world's 5 reaches everyone.
  CHECK(order.after(0, 0) == std::vector<uint64_t>{0, 5, 5, 0});
  // After its last collective: nothing.
  CHECK(order.after(3, 2) == std::vector<uint64_t>{2, 12, 12, 2});
}

TEST_CASE("the collectives' clocks follow the order they happened in") {
  const CollectiveOrder order = subgroupJob();
  CHECK(order.clock(0) == 1);
  CHECK(order.clock(4) == 5);
  CHECK(order.clock(5) == 6);   // after the subgroup's first five, though the world's first
  CHECK(order.clock(6) == 7);
  CHECK(order.clock(11) == 12);
}

TEST_CASE("collectives issued in another order by their ranks have no clock") {
  // Processes 0 and 1 issue collectives 0 and 1 in opposite orders: neither
  // is ever reached by both (a mismatch, which would hang).
  const CollectiveOrder order({{0, 1}, {1, 0}}, 2);
  CHECK(order.clock(0) == UINT64_MAX);
  CHECK(order.clock(1) == UINT64_MAX);
}
