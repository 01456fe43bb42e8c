// Myers' greedy O(ND) algorithm ("An O(ND) Difference Algorithm and Its
// Variations", 1986) with the V vector kept per edit step so that the script
// can be recovered: memory O(D^2), which maxEdits bounds. The common prefix
// and suffix are stripped first, so two runs that agree but for a few
// operations cost O(N). Long middles are cut into windows, and only the first
// half of each window's script is kept, so that a stretch cut by a window's
// end is aligned again in the next one.
//
// Before each window the runs are followed in step, as far as they agree or
// differ by lone substitutions (see substitution()). A window costs O(D^2)
// in Myers' inner loop and its V vectors; a launch in ten with a stale word
// (its identity differs, its shape does not) made D a fifth of the window,
// and the diff 18 times the decompression (bench/diff_bench --stale-every
// 10).
#include "diff/align.h"

#include <algorithm>
#include <functional>

namespace gpurr::diff {
namespace {

enum class StepKind : uint8_t { kMatch, kDeleteA, kInsertB };

// Where a window's script ends: at the end of both windows (the
// sequences' last), of a's (all of a and a prefix of b: the last window of
// a sequence cut short, AlignOptions::Cut), of b's, or of either. A window
// that ends inside both sequences takes all of one window and a prefix of
// the other: were both taken whole, the operations one window holds beyond
// what the other's reaches (a quarter of it, where one run's steps have a
// quarter more operations) would be edits, and among a training loop's
// repeated steps Myers may place them anywhere, at the window's start too.
enum class End : uint8_t { kBoth, kA, kB, kEither };

// Edits after which myers() asks whether its window can finish at all.
constexpr int64_t kCheckAfter = 64;

// Appends a run, merging it with the previous one of the same kind.
void push(Alignment& out, bool match, uint64_t aBegin, uint64_t bBegin, uint64_t aCount,
          uint64_t bCount) {
  if (aCount == 0 && bCount == 0) return;
  if (match) out.matched += aCount;
  if (!out.runs.empty()) {
    AlignedRun& last = out.runs.back();
    if (last.match == match && last.aBegin + last.aCount == aBegin &&
        last.bBegin + last.bCount == bBegin) {
      last.aCount += aCount;
      last.bCount += bCount;
      return;
    }
  }
  out.runs.push_back({match, aBegin, bBegin, aCount, bCount});
}

// Shortest edit script from a to b, in order; false when the edit distance
// exceeds maxEdits, or when `hopeless` (asked once, after kCheckAfter edits)
// says it will. With End::kA, from a to a prefix of b that takes all of a,
// with kB from a prefix of a that takes all of b to b, with kEither either.
bool myers(const Keys& a, const Keys& b, uint64_t maxEdits, End ends, std::vector<StepKind>& script,
           const std::function<bool()>& hopeless) {
  const int64_t n = static_cast<int64_t>(a.size()), m = static_cast<int64_t>(b.size());
  const int64_t maxD = std::min<int64_t>(n + m, static_cast<int64_t>(maxEdits));
  const int64_t offset = maxD + 1;
  std::vector<int64_t> v(2 * static_cast<size_t>(maxD) + 3, 0);
  // trace[d][k + d] = furthest x on diagonal k after d edits.
  std::vector<std::vector<int64_t>> trace;
  int64_t found = -1;
  int64_t x = n, y = m;
  for (int64_t d = 0; d <= maxD && found < 0; ++d) {
    // Past a few edits, a window that cannot finish within the bound is
    // given up before its O(D^2).
    if (d == kCheckAfter && hopeless()) return false;
    for (int64_t k = -d; k <= d; k += 2) {
      int64_t kx = (k == -d || (k != d && v[offset + k - 1] < v[offset + k + 1]))
                       ? v[offset + k + 1]       // from diagonal k+1: insertion
                       : v[offset + k - 1] + 1;  // from diagonal k-1: deletion
      int64_t ky = kx - k;
      while (kx < n && ky < m && a[kx] == b[ky]) ++kx, ++ky;
      v[offset + k] = kx;
      const bool endA = kx == n && ky >= 0 && ky <= m, endB = ky == m && kx >= 0 && kx <= n;
      const bool end = ends == End::kA   ? endA
                       : ends == End::kB ? endB
                       : ends == End::kEither ? endA || endB
                                              : kx >= n && ky >= m;
      if (end && found < 0) found = d, x = kx, y = ky;
    }
    trace.emplace_back(v.begin() + (offset - d), v.begin() + (offset + d + 1));
  }
  if (found < 0) return false;
  script.clear();
  for (int64_t d = found; d > 0; --d) {
    const auto& prev = trace[d - 1];
    auto at = [&](int64_t k) { return prev[static_cast<size_t>(k + d - 1)]; };
    const int64_t k = x - y;
    const bool insertion = k == -d || (k != d && at(k - 1) < at(k + 1));
    const int64_t prevK = insertion ? k + 1 : k - 1;
    const int64_t prevX = at(prevK), prevY = prevX - prevK;
    const int64_t startX = insertion ? prevX : prevX + 1;  // where the snake began
    while (x > startX) {
      --x, --y;
      script.push_back(StepKind::kMatch);
    }
    script.push_back(insertion ? StepKind::kInsertB : StepKind::kDeleteA);
    x = prevX;
    y = prevY;
  }
  while (x > 0) {
    --x;
    script.push_back(StepKind::kMatch);
  }
  std::reverse(script.begin(), script.end());
  return true;
}

// Operations of one run that differ pairwise from the other's, at most, in
// a lone substitution; and how far beyond it a counterpart is looked for.
constexpr uint64_t kMaxSubstituted = 4;
constexpr uint64_t kNearby = 64;

bool occurs(uint64_t key, const Keys& k, uint64_t from, uint64_t end) {
  for (uint64_t p = from; p < end; ++p)
    if (k[p] == key) return true;
  return false;
}

// The length r of a lone substitution at (i, j), 0 where there is none: a[i
// .. i+r) and b[j .. j+r) differ pairwise (r <= kMaxSubstituted), a[i+r] and
// b[j+r] agree, and none of the 2r differing operations occurs among the
// other run's next r + kNearby: no shift of either run could match one of
// them nearby. It is taken as one stretch of r operations of each run, as
// Myers' r deletions and r insertions would be. Not minimal in every case:
// where a differing identity occurs again further on, after a stretch that
// one run alone took, matching it there can match more (a training loop's
// next step repeats identities, but hundreds of operations on).
uint64_t substitution(const Keys& a, const Keys& b, uint64_t i, uint64_t j, uint64_t aEnd, uint64_t bEnd) {
  for (uint64_t r = 1; r <= kMaxSubstituted && i + r < aEnd && j + r < bEnd; ++r) {
    if (a[i + r] != b[j + r]) continue;
    for (uint64_t t = 0; t < r; ++t) {
      if (occurs(a[i + t], b, j, std::min(bEnd, j + r + kNearby)) ||
          occurs(b[j + t], a, i, std::min(aEnd, i + r + kNearby)))
        return 0;
    }
    return r;
  }
  return 0;
}

// Whether Myers would surely find no script within maxEdits: a script has
// at least as many edits as the operations it cannot match, and it can
// match no more of either run's operations than the keys the two have in
// common, counted as multisets (sorted copies, merged). Where the
// identities differ nearly everywhere (every allocation renamed, before
// the diff's renaming pass), Myers ran to maxEdits in every window, O(D^2)
// each: 1.5 s of a 2.5 s diff.
// How many identities `a` and `b` have in common, counted as multisets
// (`sa`, `sb`: their sorted copies).
uint64_t shared(const Keys& a, const Keys& b, std::vector<uint64_t>& sa, std::vector<uint64_t>& sb) {
  const auto sorted = [](const Keys& k, std::vector<uint64_t>& out) {
    out.resize(k.size());
    for (uint64_t p = 0; p < k.size(); ++p) out[p] = k[p];
    std::sort(out.begin(), out.end());
  };
  sorted(a, sa);
  sorted(b, sb);
  uint64_t common = 0;
  for (size_t x = 0, y = 0; x < sa.size() && y < sb.size();) {
    if (sa[x] < sb[y]) {
      ++x;
    } else if (sb[y] < sa[x]) {
      ++y;
    } else {
      ++common, ++x, ++y;
    }
  }
  return common;
}

bool surelyBeyond(const Keys& a, const Keys& b, uint64_t maxEdits, End ends, std::vector<uint64_t>& sa,
                  std::vector<uint64_t>& sb) {
  const uint64_t common = shared(a, b, sa, sb);
  // Where a script may end before one run's last operation, that run's
  // later operations are free: only the other run's unmatched ones are
  // sure edits.
  const uint64_t unmatched = ends == End::kA        ? a.size() - common
                             : ends == End::kB      ? b.size() - common
                             : ends == End::kEither ? std::min(a.size(), b.size()) - common
                                                    : a.size() + b.size() - 2 * common;
  return unmatched > maxEdits;
}

}  // namespace

Alignment align(Keys a, Keys b, const AlignOptions& options) {
  Alignment out;
  uint64_t prefix = 0;
  while (prefix < a.size() && prefix < b.size() && a[prefix] == b[prefix]) ++prefix;
  uint64_t suffix = 0;
  // (A cut sequence's last operations are not the other's last.)
  while (options.cut == AlignOptions::Cut::kNeither && suffix < a.size() - prefix && suffix < b.size() - prefix &&
         a[a.size() - 1 - suffix] == b[b.size() - 1 - suffix]) {
    ++suffix;
  }
  push(out, true, 0, 0, prefix, prefix);
  const uint64_t aEnd = a.size() - suffix, bEnd = b.size() - suffix;
  // Halved, once, where a window exceeds maxEdits with much in common: one
  // run with twice the operations of the other in each step (a model with
  // more layers) has edits for at least half of a window that ends inside
  // both (End::kEither), whatever its size; half a window holds half as
  // many. Not below maxEdits: smaller windows always finish, in O(D^2)
  // however little they have in common. Restored where a halved window
  // still exceeds it.
  const uint64_t full = std::max<uint64_t>(2, options.window);
  uint64_t window = full;
  std::vector<StepKind> script;
  std::vector<uint64_t> sortedA, sortedB;  // surelyBeyond's, capacity kept
  uint64_t i = prefix, j = prefix;
  while (i < aEnd || j < bEnd) {
    while (i < aEnd && j < bEnd) {
      if (a[i] == b[j]) {
        uint64_t same = 1;
        while (i + same < aEnd && j + same < bEnd && a[i + same] == b[j + same]) ++same;
        push(out, true, i, j, same, same);
        i += same, j += same;
      } else if (const uint64_t r = options.cut == AlignOptions::Cut::kNeither ? substitution(a, b, i, j, aEnd, bEnd) : 0;
                 r > 0) {  // (a sequence cut short is aligned by Myers alone: its other run's rest is free)
        push(out, false, i, j, r, r);
        i += r, j += r;
      } else {
        break;
      }
    }
    const uint64_t n = std::min(aEnd - i, window), m = std::min(bEnd - j, window);
    // The cut sequence's last window: the other's rest is free.
    const bool cutA = options.cut == AlignOptions::Cut::kA && i + n == aEnd,
               cutB = options.cut == AlignOptions::Cut::kB && j + m == bEnd;
    const bool last = cutA || cutB || (i + n == aEnd && j + m == bEnd);
    // A window that holds the rest of one sequence but not of the other
    // takes all of the other's window: taking all of the rest instead
    // could delete it whole, in fewer edits than the window's matches
    // cost, when the other's later operations, edits then, are not counted.
    const End ends = cutA ? End::kA
                     : cutB ? End::kB
                     : last ? End::kBoth
                     : i + n == aEnd ? End::kB
                     : j + m == bEnd ? End::kA
                                     : End::kEither;
    const auto beyond = [&] {
      return surelyBeyond(a.subspan(i, n), b.subspan(j, m), options.maxEdits, ends, sortedA, sortedB);
    };
    if (n == 0 || m == 0 || !myers(a.subspan(i, n), b.subspan(j, m), options.maxEdits, ends, script, beyond)) {
      if (n != 0 && m != 0 && window == full && window > options.maxEdits && (n == window || m == window) &&
          4 * shared(a.subspan(i, n), b.subspan(j, m), sortedA, sortedB) >= std::min(n, m)) {
        window /= 2;
        continue;
      }
      window = full;
      if (n != 0 && m != 0) out.bounded = true;
      // The rest of the sequence that goes on after the cut one's end is a
      // run of its own, not merged with a stretch of both before it.
      const bool rest = (options.cut == AlignOptions::Cut::kB && m == 0) ||
                        (options.cut == AlignOptions::Cut::kA && n == 0);
      if (rest && !out.runs.empty() && !out.runs.back().match &&
          (options.cut == AlignOptions::Cut::kB ? out.runs.back().bCount : out.runs.back().aCount) != 0) {
        out.runs.push_back({false, i, j, n, m});
      } else {
        push(out, false, i, j, n, m);
      }
      i += n, j += m;
      continue;
    }
    const uint64_t half = window / 2;
    uint64_t x = 0, y = 0;
    for (StepKind s : script) {
      if (!last && s == StepKind::kMatch && (x >= half || y >= half)) break;
      switch (s) {
        case StepKind::kMatch:
          push(out, true, i + x, j + y, 1, 1);
          ++x, ++y;
          break;
        case StepKind::kDeleteA:
          push(out, false, i + x, j + y, 1, 0);
          ++x;
          break;
        case StepKind::kInsertB:
          push(out, false, i + x, j + y, 0, 1);
          ++y;
          break;
      }
    }
    i += x, j += y;
  }
  push(out, true, aEnd, bEnd, suffix, suffix);
  return out;
}

}  // namespace gpurr::diff
