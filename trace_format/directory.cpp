// Directories of per-process traces (what `gpurr record` writes when several
// processes ran): which entries are traces, in the order ranks are counted;
// and where `gpurr record` gathers them while the program runs.
#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <string_view>

#include "trace_format/container.h"
#include "trace_format/trace.h"

namespace gpurr::trace {
namespace fs = std::filesystem;

bool isTrace(const fs::path& p) {
  std::error_code ec;
  return fs::is_regular_file(p / container::kVersionFile, ec);
}

bool RankOrder::operator()(const std::string& x, const std::string& y) const {
  size_t i = 0, j = 0;
  auto digit = [](char c) { return c >= '0' && c <= '9'; };
  while (i < x.size() && j < y.size()) {
    if (!digit(x[i]) || !digit(y[j])) {
      if (x[i] != y[j]) return x[i] < y[j];
      ++i, ++j;
      continue;
    }
    size_t ei = i, ej = j;
    while (ei < x.size() && digit(x[ei])) ++ei;
    while (ej < y.size() && digit(y[ej])) ++ej;
    size_t zi = i, zj = j;  // past the leading zeros
    while (zi + 1 < ei && x[zi] == '0') ++zi;
    while (zj + 1 < ej && y[zj] == '0') ++zj;
    const std::string_view vx(x.data() + zi, ei - zi), vy(y.data() + zj, ej - zj);
    if (vx.size() != vy.size()) return vx.size() < vy.size();
    if (vx != vy) return vx < vy;
    if (ei - i != ej - j) return ei - i < ej - j;
    i = ei, j = ej;
  }
  return x.size() - i < y.size() - j;
}

namespace {

// Whether the version file of `p` begins as a trace's does: a directory
// that merely holds a file named `version` (/proc, a package) is no trace.
bool markedAsTrace(const fs::path& p) {
  std::ifstream in(p / container::kVersionFile, std::ios::binary);
  const std::string_view prefix = container::kVersionPrefix;
  std::string head(prefix.size(), '\0');
  return in.read(head.data(), static_cast<std::streamsize>(head.size())) && head == prefix;
}

}  // namespace

std::vector<std::pair<std::string, fs::path>> directoryTraces(const fs::path& dir) {
  std::vector<std::pair<std::string, fs::path>> out, unmarked;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    if (!entry.is_directory(ec)) continue;
    if (isTrace(entry.path()) && (markedAsTrace(entry.path()) || entry.path().extension() == ".gpurr")) {
      out.emplace_back(entry.path().filename().string(), entry.path());
    } else if (entry.path().extension() == ".gpurr") {
      unmarked.emplace_back(entry.path().filename().string(), entry.path());
    }
  }
  // Beside traces, a trace's name without its version marker is a process
  // that left its trace unbegun or damaged: listed, to be found unreadable.
  if (!out.empty()) out.insert(out.end(), unmarked.begin(), unmarked.end());
  std::sort(out.begin(), out.end(), [](const auto& x, const auto& y) { return RankOrder{}(x.first, y.first); });
  return out;
}

std::string earlierAttempts(const fs::path& dir) {
  std::vector<std::string> attempts;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir / "attempts", ec)) {
    if (entry.is_directory(ec) && !directoryTraces(entry.path()).empty()) {
      attempts.push_back(entry.path().filename().string());
    }
  }
  if (attempts.empty()) return "";
  const std::string last = *std::max_element(attempts.begin(), attempts.end(), RankOrder{});
  return "; the traces of the job's earlier attempts are in " + (dir / "attempts" / last).string() +
         " (give that directory)";
}

namespace {
std::string stagingPrefix(const fs::path& out) { return "." + out.filename().string() + ".staging-"; }
}  // namespace

std::string stagingTemplate(const fs::path& out) {
  return (out.parent_path() / (stagingPrefix(out) + "XXXXXX")).string();
}

fs::path stagingDirectory(const fs::path& out) {
  const std::string prefix = stagingPrefix(out);
  std::error_code ec;
  const fs::path parent = out.parent_path().empty() ? fs::path(".") : out.parent_path();
  for (const fs::directory_entry& e : fs::directory_iterator(parent, ec)) {
    if (e.path().filename().string().rfind(prefix, 0) == 0) return out.parent_path() / e.path().filename();
  }
  return {};
}

std::string stagedTracesHint(const fs::path& out) {
  const fs::path staging = stagingDirectory(out.has_filename() ? out : out.parent_path());
  if (staging.empty()) return "";
  const auto traces = directoryTraces(staging);
  if (traces.empty()) return "";
  return fmt::format("; `gpurr record -o {}` left what it recorded in {} (it is still running, or was killed before "
                     "it moved its traces there): give {}{}",
                     out.string(), staging.string(), traces.front().second.string(),
                     traces.size() > 1 ? fmt::format(", or that directory for all {} traces", traces.size()) : "");
}

}  // namespace gpurr::trace
