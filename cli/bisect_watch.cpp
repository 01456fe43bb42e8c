// Stopping a run of `gpurr bisect` soon after its first divergence
// (bisect_watch.h): the run's growing traces compared with the first run's.
#include "cli/bisect_watch.h"

#include <fmt/format.h>

#include <chrono>
#include <fstream>
#include <string>
#include <vector>

#include "cli/bisect.h"
#include "cli/record.h"
#include "report/compare.h"

namespace gpurr::cli::bisect {

namespace {

using Clock = std::chrono::steady_clock;

// The least pause between two comparisons: the recorder of a watched run
// closes a block this often (`gpurr record --stop-file`), so looking more
// often would find nothing new.
constexpr std::chrono::milliseconds kMinPause{250};
// Operations the run watched must have written after a divergence for one
// comparison to be enough (else it must be seen twice).
constexpr uint64_t kPastOps = 16;

// What `gpurr record -o out` is writing now: its staging directory's one
// trace when `first` is a trace, the staging directory itself when `first`
// is a directory of traces; empty while there is none.
fs::path recording(const fs::path& first, const fs::path& out) {
  const fs::path staging = record::stagingDirectory(out);
  if (staging.empty() || !trace::isTrace(first)) return staging;
  std::vector<fs::path> traces;
  std::error_code ec;
  for (const fs::directory_entry& t : fs::directory_iterator(staging, ec)) {
    if (trace::isTrace(t.path())) traces.push_back(t.path());
  }
  return traces.size() == 1 ? traces.front() : fs::path();
}

}  // namespace

RunWatch::RunWatch(fs::path first, fs::path out, fs::path stopFile)
    : first_(std::move(first)), out_(std::move(out)), stopFile_(std::move(stopFile)) {
  thread_ = std::thread([this] { watch(); });
}

RunWatch::~RunWatch() {
  {
    std::lock_guard lock(mu_);
    done_ = true;
  }
  wake_.notify_all();
  thread_.join();
  std::error_code ec;
  fs::remove(stopFile_, ec);
  fs::remove(fs::path(stopFile_).concat(".part"), ec);
}

void RunWatch::watch() {
  // The runs of a job of several processes are not stopped so: their ranks
  // would read the stop file after different steps, one that stopped
  // leaving the others in a collective (the layer heeds only a stop file
  // there from the job's start).
  if (runTraces(first_).size() > 1) return;
  std::unique_lock lock(mu_);
  auto pause = kMinPause;
  while (!wake_.wait_for(lock, pause, [this] { return done_; })) {
    lock.unlock();
    const Clock::time_point start = Clock::now();
    const bool done = compareOnce();
    pause = std::max(kMinPause, std::chrono::duration_cast<std::chrono::milliseconds>(4 * (Clock::now() - start)));
    lock.lock();
    if (done) return;
  }
}

bool RunWatch::compareOnce() {
  const fs::path now = recording(first_, out_);
  if (now.empty()) return false;
  std::optional<Seen> at;
  try {
    const report::RunComparison c = report::compareRuns(first_, now, false, nullptr);
    if (const std::optional<DivergencePoint> p = earliestDivergence(c)) {
      const diff::ProcessDiff& pd = c.processes[p->process];
      const diff::FirstDivergence& d = *pd.firstDivergence;
      // Where the divergent operations end in the run watched (a path
      // divergence's stretch may hold none of its operations).
      const uint64_t endB = d.stretch ? d.stretch->bBegin + d.stretch->bCount : d.b.index + 1;
      at = Seen{d.a.seq, d.b.seq, divergenceStep(d), pd.opsB, endB};
    }
  } catch (const std::exception&) {
    return false;  // a block being written, a trace not begun: the next look tells
  }
  // A divergence at the end of what is written so far may be an edge of
  // it: the run's own is one it has gone well past, or one seen at the same
  // place again, the run having gone on.
  const bool past = at && at->endB + kPastOps <= at->opsB;
  const bool again = at && seen_ && seen_->seqA == at->seqA && seen_->seqB == at->seqB && at->opsB > seen_->opsB;
  if (!past && !again) {
    seen_ = at;
    return false;
  }
  if (at->step < 0) return true;  // no step to stop after (no PyTorch layer): watching is done
  const int64_t step = at->step + 1;
  const fs::path partial = fs::path(stopFile_).concat(".part");
  {
    std::ofstream f(partial, std::ios::trunc);
    f << step << '\n';
    if (!f) return false;
  }
  std::error_code ec;
  fs::rename(partial, stopFile_, ec);
  if (ec) return false;
  stopAfter_.store(step);
  return true;
}

}  // namespace gpurr::cli::bisect
