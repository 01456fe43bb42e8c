// The job's verdict on a collective whose reduction order changed
// (reduction_order.h).
#include "diff/reduction_order.h"

#include <fmt/format.h>

#include "diff/environment.h"
#include "diff/wording.h"

namespace gpurr::diff {

CollectiveVerdict reductionOrderVerdict(const std::string& collective, size_t ranks,
                                        const std::vector<EnvDifference>& nccl) {
  CollectiveVerdict v;
  v.evidence.push_back({EvidenceKind::kReductionOrder, {ranks}, {collective}});
  v.summary = fmt::format("{}: every rank sent identical data in both runs and received different data: the "
                          "order of the collective's reduction changed",
                          toString(Cause::kCollectiveReductionOrder));
  if (nccl.empty()) {
    v.evidence.push_back({EvidenceKind::kNcclChose});
  } else {
    Evidence settings{EvidenceKind::kNcclSettings};
    for (const EnvDifference& e : nccl) {
      settings.texts.insert(settings.texts.end(), {e.field, e.a.value_or("(unset)"), e.b.value_or("(unset)")});
    }
    v.evidence.insert(v.evidence.begin(), settings);
    v.cause = Cause::kEnvironment;
    v.summary = fmt::format("environment: the runs were recorded with different NCCL settings ({}), and a "
                            "collective's reduction order changed",
                            envSummary(nccl));
  }
  v.fix = reductionOrderFix();
  return v;
}

}  // namespace gpurr::diff
