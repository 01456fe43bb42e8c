// The job's verdict on a collective that received different data although
// every rank of its communicator sent identical data in both runs: the order
// of its reduction changed, because NCCL's settings differ between the runs
// (environment) or because NCCL chose another algorithm or protocol by
// itself (collective reduction order). Only the job's view (report/job.h)
// sees every rank's inputs; each rank's own verdict stays `collective`.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "diff/report.h"

namespace gpurr::diff {

struct CollectiveVerdict {
  Cause cause = Cause::kCollectiveReductionOrder;
  Cause mechanism = Cause::kCollectiveReductionOrder;  // what the collective shows
  std::string summary;                                 // the cause in one line
  std::vector<Evidence> evidence;
  std::string fix;
};

// `collective` describes it (report/job.h), `ranks` is how many sent
// identical data, `nccl` the NCCL settings that differ between the runs
// (ncclDifferences, environment.h).
CollectiveVerdict reductionOrderVerdict(const std::string& collective, size_t ranks,
                                        const std::vector<EnvDifference>& nccl);

}  // namespace gpurr::diff
