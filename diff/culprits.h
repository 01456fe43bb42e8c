// Known sources of nondeterminism, loaded from data/known_culprits.json: kernel
// name patterns, framework operations, libraries and environment variables,
// each with the framework operation it belongs to and the documented fix.
#pragma once

#include <filesystem>
#include <optional>
#include <regex>
#include <string>
#include <vector>

#include "common/demangle.h"
#include "diff/report.h"

namespace gpurr::diff {

class Culprits {
 public:
  struct Entry {
    std::string id;
    // ECMAScript regexes, "" = none: the demangled kernel name, the framework
    // op (an origin's op, else a FrameworkOp annotation), and for a launch in
    // backward the forward op it differentiates (an origin's forwardOp).
    std::string kernelPattern, frameworkOpPattern, forwardOpPattern;
    std::optional<std::regex> kernel, frameworkOp, forwardOp;
    std::string library;      // matches an AlgorithmChoice's library
    std::string environment;  // matches a differing environment variable
    std::vector<Cause> causes;  // the verdicts it can explain (empty = any)
    std::string op, why, fix, source;
    std::string argument;  // the arguments that decide, in words; "" = none
  };

  Culprits() = default;

  // Reads a culprits file. Throws std::runtime_error naming the file and the
  // entry at fault.
  static Culprits load(const std::filesystem::path& file);

  // share/gpurr/known_culprits.json next to the running executable's bin/.
  static std::filesystem::path defaultPath();

  // Entries that explain `d`, given the header differences; each at most once.
  // Each entry is tried on the divergent operations' framework op first, then
  // (in backward) their forward op, then the kernel name (for an entry that
  // names ops, only on operations whose framework op is unknown), the library
  // and the environment; the matches come strongest first (by framework op,
  // forward op, kernel, library, environment), in table order within each.
  std::vector<CulpritMatch> match(const FirstDivergence& d,
                                  const std::vector<EnvDifference>& environment) const;

  const std::vector<Entry>& entries() const { return entries_; }

 private:
  std::vector<Entry> entries_;
};

}  // namespace gpurr::diff
